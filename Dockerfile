# Stencil's image: a static binary on a distroless, non-root base.
# Not built by CI (no container engine runs there): build it with
#   docker build -t stencil:$(cargo pkgid | cut -d'#' -f2) .
FROM rust:1.95-bookworm AS build
RUN rustup target add x86_64-unknown-linux-musl && apt-get update && apt-get install -y --no-install-recommends musl-tools
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY crates ./crates
COPY charts/stencil/crds ./charts/stencil/crds
COPY charts/stencil/files ./charts/stencil/files
COPY operators ./operators
RUN cargo build --locked --release --target x86_64-unknown-linux-musl --bin stencil

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/target/x86_64-unknown-linux-musl/release/stencil /usr/local/bin/stencil
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/stencil"]
CMD ["run"]
