#!/usr/bin/env bash
# Starts the rig: etcd, kube-apiserver (RBAC, client-certificate admin, service-account
# keys), kube-controller-manager, kube-scheduler and kwok with fake Nodes, all on
# loopback, through kwokctl's binary runtime and the cached binaries. Idempotent: a
# healthy rig is left as it is; a broken one is torn down first.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

NODES="${STENCIL_TESTENV_NODES:-3}"
# The controller manager's client QPS (its default is 20, which makes Deployments
# Available at about one a second: a B4 run at 10,000 parents sets it higher). Read when
# the rig starts: `make testenv-down` first to change it.
KCM_QPS="${STENCIL_TESTENV_KCM_QPS:-}"
KCM_ARGS=""
if [ -n "$KCM_QPS" ]; then
  KCM_ARGS=$(printf '      - key: kube-api-qps\n        value: "%s"\n      - key: kube-api-burst\n        value: "%s"\n      - key: concurrent-deployment-syncs\n        value: "20"\n      - key: concurrent-replicaset-syncs\n        value: "20"' "$KCM_QPS" "$((KCM_QPS * 2))")
fi

"$TESTENV_DIR/build.sh"

if rig_healthy; then
  log "already up ($KUBECONFIG_OUT)"
  exit 0
fi
"$TESTENV_DIR/down.sh"

mkdir -p "$STATE"
cat >"$STATE/kwokctl.yaml" <<YAML
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  bindAddress: 127.0.0.1
# The default Service range is a /24; benchmarks create thousands of Services.
# The controller manager and the scheduler run without leader election: with it, they
# exit when the API server is gone for longer than their lease (the fault suite takes it
# away for 60 s), and nothing would start them again.
# The controller manager provisions hostPath volumes under /tmp (the storage a kind or
# minikube cluster has out of the box), so claims bind and StatefulSets become Ready.
componentsPatches:
  - name: kube-apiserver
    extraArgs:
      - key: service-cluster-ip-range
        value: 10.96.0.0/16
  - name: kube-controller-manager
    extraArgs:
      - key: leader-elect
        value: "false"
      - key: enable-hostpath-provisioner
        value: "true"
$KCM_ARGS
  - name: kube-scheduler
    extraArgs:
      - key: leader-elect
        value: "false"
YAML

start=$(date +%s)
log "starting kube $KUBERNETES_VERSION, etcd $ETCD_VERSION, kwok $KWOK_VERSION"
if ! "$KWOKCTL" --config "$STATE/kwokctl.yaml" create cluster --name "$CLUSTER" --runtime binary \
  --kube-apiserver-binary "$K8S_BIN/kube-apiserver" \
  --kube-controller-manager-binary "$K8S_BIN/kube-controller-manager" \
  --kube-scheduler-binary "$K8S_BIN/kube-scheduler" \
  --etcd-binary "$ETCD_BIN/etcd" \
  --kwok-controller-binary "$KWOK_BIN/kwok" \
  --kubeconfig "$STATE/kwokctl-kubeconfig" \
  --wait 180s >"$STATE/kwokctl.log" 2>&1; then
  log "kwokctl failed; its log follows"
  cat "$STATE/kwokctl.log" >&2
  exit 1
fi
cp "$CLUSTER_DIR/kubeconfig.yaml" "$KUBECONFIG_OUT"
kubectl() { "$K8S_BIN/kubectl" --kubeconfig "$KUBECONFIG_OUT" "$@"; }

deadline=$(($(date +%s) + 120))
until kubectl get --raw /readyz >/dev/null 2>&1; do
  if (($(date +%s) > deadline)); then
    log "the API server did not become ready; see $CLUSTER_DIR/logs"
    exit 1
  fi
  sleep 0.5
done

for i in $(seq 0 $((NODES - 1))); do
  cat <<YAML
---
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$i
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {type: kwok, kubernetes.io/hostname: kwok-node-$i, kubernetes.io/os: linux}
status:
  allocatable: {cpu: "1000", memory: 4Ti, pods: "2000"}
  capacity: {cpu: "1000", memory: 4Ti, pods: "2000"}
YAML
done | kubectl apply -f - >/dev/null

# The default StorageClass: claims without a class get a hostPath volume at once.
kubectl apply -f - >/dev/null <<YAML
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: kubernetes.io/host-path
reclaimPolicy: Delete
volumeBindingMode: Immediate
YAML

# The service-account controller creates `default` in every namespace; tests rely on it.
until kubectl get serviceaccount default -n default >/dev/null 2>&1; do
  if (($(date +%s) > deadline)); then
    log "kube-controller-manager did not create the default ServiceAccount"
    exit 1
  fi
  sleep 0.5
done

cat >"$STATE/env" <<ENV
# Source this file to use the rig: \`. target/testenv/env\`
export KUBECONFIG="$KUBECONFIG_OUT"
export PATH="$K8S_BIN:$HELM_BIN:\$PATH"
ENV
log "up in $(($(date +%s) - start))s: . target/testenv/env"
