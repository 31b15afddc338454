#!/usr/bin/env bash
# Builds the rig's upstream binaries from the Go module proxy with the ordinary `go`
# client and caches them under $STENCIL_CACHE/bin/<component>-<version>/. A component
# whose cache directory is complete is not built again, so a cached run builds nothing.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
. "$here/versions.env"

cache="${STENCIL_CACHE:-$HOME/.cache/stencil}"
export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:--buildvcs=false}"

log() { printf 'testenv-build: %s\n' "$*" >&2; }

# complete DIR: a build is complete only when its marker exists, so an interrupted
# build never passes for a cached one.
complete() { [[ -f "$1/.complete" ]]; }

scratch_module() {
  local dir="$1" name="$2"
  rm -rf "$dir"
  mkdir -p "$dir"
  printf 'module %s\n\ngo 1.25\n' "$name" >"$dir/go.mod"
}

build_kubernetes() {
  local v="$KUBERNETES_VERSION" out="$cache/bin/kubernetes-$KUBERNETES_VERSION"
  complete "$out" && return 0
  log "building kube-apiserver, kube-controller-manager, kube-scheduler, kubectl $v"
  local work="$cache/work/kubernetes-$v"
  scratch_module "$work" stencil.dev/testenv/kubernetes
  (
    cd "$work"
    local gomod staging_version
    gomod="$(go mod download -json "k8s.io/kubernetes@$v" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
    # Staging modules are published as k8s.io/<name> v0.<minor>.<patch>.
    staging_version="v0.${v#v1.}"
    {
      printf 'require k8s.io/kubernetes %s\n\n' "$v"
      printf 'replace (\n'
      # Every `k8s.io/x => ./staging/...` line of the upstream go.mod becomes a
      # replace with the published module; other replaces are carried over as they are.
      sed -n '/^replace (/,/^)/p' "$gomod" | grep '=>' | while read -r mod _arrow target rest; do
        if [[ "$target" == ./staging/* ]]; then
          printf '\t%s => %s %s\n' "$mod" "$mod" "$staging_version"
        else
          printf '\t%s => %s %s\n' "$mod" "$target" "$rest"
        fi
      done
      printf ')\n'
    } >>go.mod
    cat >tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
    go mod tidy -e >/dev/null
    local pkg=k8s.io/component-base/version cgo=k8s.io/client-go/pkg/version
    local minor="${v#v1.}"; minor="${minor%%.*}"
    local date; date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    local ld="-s -w"
    for p in "$pkg" "$cgo"; do
      ld+=" -X $p.gitVersion=$v -X $p.gitMajor=1 -X $p.gitMinor=$minor"
      ld+=" -X $p.gitTreeState=clean -X $p.buildDate=$date"
    done
    mkdir -p "$out"
    go build -tags tools -trimpath -ldflags "$ld" -o "$out/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
  )
  touch "$out/.complete"
}

build_etcd() {
  local v="$ETCD_VERSION" out="$cache/bin/etcd-$ETCD_VERSION"
  complete "$out" && return 0
  log "building etcd $v"
  local work="$cache/work/etcd-$v"
  scratch_module "$work" stencil.dev/testenv/etcd
  (
    cd "$work"
    local gomod
    gomod="$(go mod download -json "go.etcd.io/etcd/server/v3@$v" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
    # etcd's go.mod replaces its sibling modules with ../ paths; use the published ones.
    {
      printf 'require go.etcd.io/etcd/server/v3 %s\n\nreplace (\n' "$v"
      grep -E '^\s*go\.etcd\.io/etcd/[^ ]+ => \.\./' "$gomod" | while read -r mod _rest; do
        printf '\t%s => %s %s\n' "$mod" "$mod" "$v"
      done
      printf ')\n'
    } >>go.mod
    cat >main.go <<'GO'
// Command etcd runs the etcd server, as upstream's etcdmain does.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
    go mod tidy >/dev/null
    mkdir -p "$out"
    go build -trimpath -ldflags "-s -w" -o "$out/etcd" .
  )
  touch "$out/.complete"
}

# build_go_install NAME PACKAGE VERSION [LDFLAGS]: `go install` of a module without
# replace directives.
build_go_install() {
  local name="$1" module_pkg="$2" v="$3" extra="${4:-}" out="$cache/bin/$1-$3"
  complete "$out" && return 0
  log "building $name $v"
  mkdir -p "$out"
  GOBIN="$out" go install -trimpath -ldflags "-s -w $extra" "$module_pkg@$v"
  touch "$out/.complete"
}

# kro, the peer of the benchmarks: its controller and its CRDs.
build_kro() {
  local v="$KRO_VERSION" out="$cache/bin/kro-$KRO_VERSION"
  complete "$out" && return 0
  log "building kro $v"
  mkdir -p "$out/crds"
  GOBIN="$out" go install -trimpath -ldflags "-s -w" "github.com/kubernetes-sigs/kro/cmd/controller@$v"
  mv "$out/controller" "$out/kro"
  local dir
  dir="$(go mod download -json "github.com/kubernetes-sigs/kro@$v" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
  cp "$dir"/helm/crds/*.yaml "$out/crds/"
  chmod u+w "$out"/crds/*.yaml
  touch "$out/.complete"
}

if [[ "${1:-}" == kro ]]; then
  build_kro
  exit 0
fi

build_kubernetes
build_etcd
build_go_install kwok sigs.k8s.io/kwok/cmd/kwok "$KWOK_VERSION"
build_go_install kwokctl sigs.k8s.io/kwok/cmd/kwokctl "$KWOK_VERSION"
build_go_install helm helm.sh/helm/v4/cmd/helm "$HELM_VERSION" \
  "-X helm.sh/helm/v4/internal/version.version=$HELM_VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
log "binaries ready under $cache/bin"
