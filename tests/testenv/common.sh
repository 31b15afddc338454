#!/usr/bin/env bash
# Shared paths of the test rig. Sourced by up.sh and down.sh.
set -euo pipefail

TESTENV_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$TESTENV_DIR/../.." && pwd)"
# shellcheck source=versions.env
. "$TESTENV_DIR/versions.env"

CACHE="${STENCIL_CACHE:-$HOME/.cache/stencil}"
K8S_BIN="$CACHE/bin/kubernetes-$KUBERNETES_VERSION"
ETCD_BIN="$CACHE/bin/etcd-$ETCD_VERSION"
KWOK_BIN="$CACHE/bin/kwok-$KWOK_VERSION"
KWOKCTL="$CACHE/bin/kwokctl-$KWOK_VERSION/kwokctl"
HELM_BIN="$CACHE/bin/helm-$HELM_VERSION"

STATE="$REPO_ROOT/target/testenv"
CLUSTER=stencil
export KWOK_WORKDIR="$STATE/kwok"
CLUSTER_DIR="$KWOK_WORKDIR/clusters/$CLUSTER"
KUBECONFIG_OUT="$STATE/kubeconfig"

log() { printf 'testenv: %s\n' "$*" >&2; }

# Every pid the rig recorded, one per line.
rig_pids() {
  local f
  for f in "$CLUSTER_DIR"/pids/*.pid; do
    [[ -f "$f" ]] || continue
    # kwokctl writes pid files without a trailing newline.
    tr -dc '0-9' <"$f"
    echo
  done
}

# True when every recorded process is alive and the API server answers /readyz.
rig_healthy() {
  [[ -f "$KUBECONFIG_OUT" ]] || return 1
  local pid any=0
  for pid in $(rig_pids); do
    any=1
    kill -0 "$pid" 2>/dev/null || return 1
  done
  [[ $any == 1 ]] || return 1
  "$K8S_BIN/kubectl" --kubeconfig "$KUBECONFIG_OUT" get --raw /readyz --request-timeout=5s >/dev/null 2>&1 || return 1
  # A rig started before the default StorageClass existed is rebuilt.
  "$K8S_BIN/kubectl" --kubeconfig "$KUBECONFIG_OUT" get storageclass standard --request-timeout=5s >/dev/null 2>&1
}
