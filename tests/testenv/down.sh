#!/usr/bin/env bash
# Stops every process the rig started, by pid, and removes its state. Safe to run when
# the rig is down or half up.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

pids=$(rig_pids)
if [[ -x "$KWOKCTL" && -d "$CLUSTER_DIR" ]]; then
  "$KWOKCTL" delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
fi
for pid in $pids; do
  kill -TERM "$pid" 2>/dev/null || true
done
deadline=$(($(date +%s) + 15))
for pid in $pids; do
  while kill -0 "$pid" 2>/dev/null; do
    if (($(date +%s) > deadline)); then
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.2
  done
done
rm -rf "$STATE"
for pid in $pids; do
  if kill -0 "$pid" 2>/dev/null; then
    log "process $pid is still running"
    exit 1
  fi
done
log "down"
