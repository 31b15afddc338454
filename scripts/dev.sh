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
"$stencil" run --definitions operators/ &
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
