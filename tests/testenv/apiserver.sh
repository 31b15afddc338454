#!/usr/bin/env bash
# Fault injection for the rig's API server (used by the fault tests):
#   apiserver.sh kill            kill -9 the kube-apiserver, keeping its command line
#   apiserver.sh start [ARG...]  start it again with the same command line plus ARGs,
#                                and wait for /readyz
#   apiserver.sh etcd-url        print the etcd URL the API server uses
# The new pid goes to kwokctl's pid file, so down.sh still stops it.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

pidfile="$CLUSTER_DIR/pids/kube-apiserver.pid"
saved="$STATE/kube-apiserver.cmdline"

case "${1:-}" in
  kill)
    pid="$(tr -dc '0-9' <"$pidfile")"
    # The first kill keeps kwokctl's own command line; later ones must not replace it
    # with one that carries a test's extra arguments.
    [[ -f "$saved" ]] || cp "/proc/$pid/cmdline" "$saved"
    kill -KILL "$pid"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
    ;;
  start)
    shift
    mapfile -d '' argv <"$saved"
    cd "$CLUSTER_DIR"
    setsid "${argv[@]}" "$@" >>"$CLUSTER_DIR/logs/kube-apiserver.log" 2>&1 </dev/null &
    printf '%s' "$!" >"$pidfile"
    deadline=$(($(date +%s) + 60))
    until "$K8S_BIN/kubectl" --kubeconfig "$KUBECONFIG_OUT" get --raw /readyz --request-timeout=2s >/dev/null 2>&1; do
      if (($(date +%s) > deadline)); then
        log "the API server did not come back; see $CLUSTER_DIR/logs/kube-apiserver.log"
        exit 1
      fi
      sleep 0.2
    done
    ;;
  etcd-url)
    pid="$(tr -dc '0-9' <"$pidfile")"
    tr '\0' '\n' <"/proc/$pid/cmdline" | sed -n 's/^--etcd-servers=//p'
    ;;
  *)
    echo "usage: $0 kill | start [ARG...] | etcd-url" >&2
    exit 2
    ;;
esac
