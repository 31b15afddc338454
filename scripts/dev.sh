#!/usr/bin/env bash
# `make dev`: a cluster (the rig, unless KUBECONFIG already names one), Stencil's CRD,
# `stencil run --definitions operators/`, and the examples applied. Ctrl-C stops Stencil.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -z "${KUBECONFIG:-}" ]]; then
  tests/testenv/up.sh
  # shellcheck source=/dev/null
  . target/testenv/env
fi
cargo build --locked --quiet --bin stencil
stencil=target/debug/stencil

"$stencil" crd | kubectl apply --server-side -f - >/dev/null
# The website's v1alpha1 differs from its v1: the API server converts through Stencil's
# webhook, served here on loopback where the rig's API server reaches it.
webhook_port="${STENCIL_DEV_WEBHOOK_PORT:-9443}"
"$stencil" run --definitions operators/ \
  --webhook-addr "127.0.0.1:$webhook_port" --webhook-url "https://127.0.0.1:$webhook_port" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT INT TERM

deadline=$(($(date +%s) + 120))
for crd in databases websites tenants; do
  until kubectl get "crd/$crd.examples.stencil.dev" >/dev/null 2>&1; do
    if (($(date +%s) > deadline)); then
      echo "dev: Stencil did not install crd/$crd.examples.stencil.dev" >&2
      exit 1
    fi
    sleep 0.5
  done
  kubectl wait --for=condition=Established "crd/$crd.examples.stencil.dev" --timeout=60s >/dev/null
done
kubectl apply -f examples/

# Each bundled parent's Ready condition once it settles (or after two minutes).
for kind in databases websites tenants; do
  kubectl wait --for=condition=Ready "$kind" --all --all-namespaces --timeout=120s >/dev/null 2>&1 || true
done
kubectl get databases,websites,tenants -A

cat <<'TEXT'

Stencil is running (Ctrl-C stops it). In another shell:
  . target/testenv/env                       # when the rig is in use
  kubectl get databases,websites,tenants     # parents, with Ready and phase columns
  kubectl get all,cm,secret,ingress -l app.kubernetes.io/managed-by=stencil
  kubectl get website docs -o yaml           # the status: conditions, url, availableReplicas
  kubectl describe database orders           # events: Created, Updated, Pruned, Error
  kubectl wait --for=condition=Ready website/docs --timeout=60s
Edit operators/*.yaml and watch the children change without a restart.
TEXT
wait "$pid"
