//! The conversion webhook: `ConversionReview`s over HTTPS at `/convert/<crd>`, answered
//! from the definition each CRD carries. Every replica serves it, leader or not, so
//! conversion does not stop during a failover. Its certificate is reloaded when the
//! files of `--webhook-cert-dir`, or the Secret that keeps the generated one, change,
//! once the converting CRDs trust its CA (the `trust` module).

mod certs;
mod follow;
mod review;
mod table;
mod trust;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::routing::post;
use axum_server::tls_rustls::RustlsConfig;

pub use certs::{CertError, Certificates};
pub use follow::follow;
pub use review::{answer, succeeded};
pub use table::{Conversions, Lookup};
pub use trust::keep_trusted;

use crate::crd::{Endpoint, Webhook};
use crate::metrics::{Metrics, ResultLabel};
use crate::tasks::Owned;

/// Where the certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertSource {
    /// `tls.crt`, `tls.key` and optionally `ca.crt` in a directory, reloaded on change.
    Dir(PathBuf),
    /// Generated once and kept in this Secret.
    Secret {
        /// The Secret's namespace (Stencil's own).
        namespace: String,
        /// The Secret's name.
        name: String,
    },
}

/// How `stencil run` serves the webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The address to listen on.
    pub addr: SocketAddr,
    /// How the API server reaches it.
    pub endpoint: Endpoint,
    /// Where its certificate comes from.
    pub certs: CertSource,
}

/// Why the webhook cannot serve.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The certificate cannot be had.
    #[error(transparent)]
    Cert(#[from] CertError),
    /// The address cannot be bound.
    #[error("binding the webhook to {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The certificate directory cannot be watched.
    #[error("watching --webhook-cert-dir: {0}")]
    Watch(#[from] notify::Error),
}

/// A serving webhook: where it listens, what CRDs should point at, and the tasks that
/// serve it and reload its certificate (stopped when this is dropped).
pub struct Served {
    /// The bound address.
    pub addr: SocketAddr,
    /// The endpoint and CA bundle for the CRDs Stencil installs, as the certificate
    /// rotates.
    pub webhook: tokio::sync::watch::Receiver<Webhook>,
    _server: Owned<()>,
    /// The file watch or the Secret watch, whichever reads new certificates.
    _reload: Box<dyn std::any::Any + Send>,
    _rotate: Owned<()>,
}

#[derive(Clone)]
struct App {
    conversions: Conversions,
    metrics: Arc<Metrics>,
}

/// Gets the certificate, binds `settings.addr` and serves ConversionReviews from
/// `conversions`. `client` reads and writes the certificate's Secret; it must not be
/// fenced, since standbys serve too.
///
/// # Errors
///
/// The certificate cannot be had, or the address cannot be bound.
pub async fn start(
    client: &kube::Client,
    settings: &Settings,
    conversions: Conversions,
    metrics: Arc<Metrics>,
) -> Result<Served, WebhookError> {
    let hosts = certs::hosts(&settings.endpoint);
    let (initial, what) = match &settings.certs {
        CertSource::Dir(dir) => (certs::read_dir(dir)?, dir.display().to_string()),
        CertSource::Secret { namespace, name } => (
            certs::from_secret(client, namespace, name, &hosts).await?,
            format!("Secret {namespace}/{name}"),
        ),
    };
    let tls = RustlsConfig::from_config(certs::server_config(&initial, &what)?);
    let (fresh, fresh_rx) = tokio::sync::mpsc::unbounded_channel();
    let reload: Box<dyn std::any::Any + Send> = match &settings.certs {
        CertSource::Dir(dir) => Box::new(watch_dir(dir.clone(), fresh)?),
        CertSource::Secret { namespace, name } => Box::new(Owned::spawn(watch_secret(
            client.clone(),
            namespace.clone(),
            name.clone(),
            hosts,
            fresh,
        ))),
    };
    let (trust, webhook) = tokio::sync::watch::channel(Webhook {
        endpoint: settings.endpoint.clone(),
        ca_bundle: initial.ca.clone(),
    });
    let rotate = Owned::spawn(trust::rotate(
        initial,
        fresh_rx,
        tls.clone(),
        trust,
        conversions.clone(),
        what,
    ));
    let listener = std::net::TcpListener::bind(settings.addr).map_err(|source| WebhookError::Bind {
        addr: settings.addr,
        source,
    })?;
    let bind_error = |source| WebhookError::Bind {
        addr: settings.addr,
        source,
    };
    listener.set_nonblocking(true).map_err(bind_error)?;
    let addr = listener.local_addr().map_err(bind_error)?;
    let app = router(App { conversions, metrics });
    let server = axum_server::from_tcp_rustls(listener, tls).map_err(bind_error)?;
    let server = Owned::spawn(async move {
        if let Err(e) = server.serve(app.into_make_service()).await {
            tracing::error!(error = %e, "the conversion webhook stopped");
        }
    });
    tracing::info!(%addr, endpoint = ?settings.endpoint, "serving the conversion webhook");
    Ok(Served {
        addr,
        webhook,
        _server: server,
        _reload: reload,
        _rotate: rotate,
    })
}

/// The webhook's routes: `/convert/<crd>`, with bodies up to [`MAX_REVIEW_BYTES`].
fn router(app: App) -> Router {
    Router::new()
        .route("/convert/{crd}", post(convert))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_REVIEW_BYTES))
        .with_state(app)
}

/// One ConversionReview, converted on the blocking pool: templates may run long.
async fn convert(State(app): State<App>, Path(crd): Path<String>, body: Bytes) -> impl axum::response::IntoResponse {
    let started = std::time::Instant::now();
    let def = lookup(&app.conversions, &crd).await;
    let deadline = started + REVIEW_DEADLINE;
    let review =
        tokio::task::spawn_blocking(move || answer(&crd, def.as_deref().map_err(String::as_str), &body, deadline))
            .await
            .map_or_else(
                |e| {
                    serde_json::json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                "response": {"uid": "", "result": {"status": "Failure", "message": format!("conversion failed: {e}")}}})
                },
                |review| {
                    let result = if succeeded(&review) { "success" } else { "failure" };
                    app.metrics
                        .conversion_reviews_total
                        .get_or_create(&ResultLabel { result: result.into() })
                        .inc();
                    serde_json::to_value(review).unwrap_or_default()
                },
            );
    app.metrics
        .conversion_review_seconds
        .observe(started.elapsed().as_secs_f64());
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        serde_json::to_vec(&review).unwrap_or_default(),
    )
}

/// The definition that converts `crd`, waiting (a bounded time, well inside the API
/// server's 30 s) for the first read of the CRD when this process has just started.
async fn lookup(conversions: &Conversions, crd: &str) -> Result<Arc<crate::compile::CompiledDefinition>, String> {
    let deadline = tokio::time::Instant::now() + FIRST_READ;
    if let Lookup::Refused(_) = conversions.get(crd) {
        conversions.ask(crd);
    }
    loop {
        match conversions.get(crd) {
            Lookup::Found(def) => return Ok(def),
            Lookup::Refused(why) => return Err(why),
            Lookup::Pending if tokio::time::Instant::now() >= deadline => {
                return Err(format!(
                    "CRD {crd} could not be read within {FIRST_READ:?}; nothing is converted until it is"
                ));
            }
            Lookup::Pending => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
        }
    }
}

/// How long one review may take, waiting for its CRD included: under the 30 s the API
/// server gives a conversion webhook, so the answer still counts.
const REVIEW_DEADLINE: std::time::Duration = std::time::Duration::from_secs(25);

/// The largest ConversionReview accepted. The API server sends one object a review (a
/// list of 30 objects of 100 KiB read at a spoke version, from its cache or at an exact
/// resourceVersion from etcd, never made a review larger than one object on the rig),
/// and an object may be as large as the API server's 3 MiB request limit, beyond the
/// HTTP layer's 2 MB default; 32 MiB leaves room for a server that batches, and still
/// bounds what one review may hold in memory.
const MAX_REVIEW_BYTES: usize = 32 * 1024 * 1024;

/// How long a review waits for the first read of its CRD.
const FIRST_READ: std::time::Duration = std::time::Duration::from_secs(10);

/// Reads the certificate again when a file in `dir` changes (a Secret volume's `..data`
/// swap included) and sends it to `fresh`; a broken update is not sent.
fn watch_dir(
    dir: PathBuf,
    fresh: tokio::sync::mpsc::UnboundedSender<certs::Certificates>,
) -> Result<
    notify_debouncer_full::Debouncer<notify::RecommendedWatcher, notify_debouncer_full::RecommendedCache>,
    WebhookError,
> {
    let watched = dir.clone();
    let mut debouncer = notify_debouncer_full::new_debouncer(
        std::time::Duration::from_millis(500),
        None,
        move |_: notify_debouncer_full::DebounceEventResult| match certs::read_dir(&dir) {
            Ok(read) => {
                let _ = fresh.send(read);
            }
            Err(e) => tracing::warn!(error = %e, "keeping the last webhook certificate"),
        },
    )?;
    debouncer.watch(&watched, notify::RecursiveMode::NonRecursive)?;
    Ok(debouncer)
}

/// Sends the certificate Secret `namespace/name` holds to `fresh` each time it changes
/// (another replica made it again).
async fn watch_secret(
    client: kube::Client,
    namespace: String,
    name: String,
    hosts: Vec<String>,
    fresh: tokio::sync::mpsc::UnboundedSender<certs::Certificates>,
) {
    use futures::StreamExt as _;
    use kube::runtime::{WatchStreamExt as _, watcher};
    let api: kube::Api<k8s_openapi::api::core::v1::Secret> = kube::Api::namespaced(client, &namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = std::pin::pin!(watcher::watcher(api, config).default_backoff());
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Apply(s) | watcher::Event::InitApply(s)) => {
                if let Some(read) = certs::stored(&s, &hosts) {
                    let _ = fresh.send(read);
                }
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "watching the webhook certificate's Secret"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt as _;

    #[tokio::test]
    async fn a_review_as_large_as_the_api_servers_largest_object_is_read_and_answered() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/operators/website.yaml");
        let (mut defs, _) = crate::compile::compile_file(path, &std::fs::read_to_string(path).unwrap());
        let def = defs.remove(0);
        let conversions = Conversions::new();
        let origin = crate::source::Origin::File {
            path: path.into(),
            name: def.name.clone(),
        };
        let live = crate::crd::parent_crd(&def, None).unwrap();
        conversions.observe(&crate::source::SourceEvent::Upsert(origin, Box::new(def)));
        conversions.observe_crd("websites.examples.stencil.dev", live);
        let app = router(App {
            conversions,
            metrics: Arc::new(Metrics::new()),
        });
        // A 3 MiB object, the API server's request limit.
        let review = serde_json::json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "u", "desiredAPIVersion": "examples.stencil.dev/v1alpha1",
                "objects": [{"apiVersion": "examples.stencil.dev/v1", "kind": "Website",
                    "metadata": {"name": "big", "namespace": "web"},
                    "spec": {"content": {"index.html": "x".repeat(3 << 20)}, "domains": ["big.example"]}}]}});
        let request = axum::http::Request::post("/convert/websites.examples.stencil.dev")
            .header("content-type", "application/json")
            .body(axum::body::Body::from(serde_json::to_vec(&review).unwrap()))
            .unwrap();
        let response = app.oneshot(request).await.unwrap();
        assert_eq!(response.status(), axum::http::StatusCode::OK);
        let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        let answer: serde_json::Value = serde_json::from_slice(&body).unwrap();
        // Read whole and answered: the render limit, not the HTTP layer, refuses it, and
        // says so on the API server's error.
        let message = answer["response"]["result"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("converting Website web/big") && message.contains("more than the limit of 1048576"),
            "{answer}"
        );
    }
}
