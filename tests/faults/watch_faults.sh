#!/usr/bin/env bash
# The fault suite's watch mode: the rig scenarios run again, one watch fault per run
# (events of one kind, or of every kind, held 300 ms, or held and coalesced to an
# object's latest update), so every pass that reads a store at a point where a view can
# lag or skip a state reads it lagging. Each scenario asserts its own end state; the
# faults add the lag. Needs STENCIL_TEST_KUBECONFIG (a running rig).
#
#   tests/faults/watch_faults.sh short   the regression cases `make test` runs
#   tests/faults/watch_faults.sh full    every scenario under every fault (make test-faults)
set -u

: "${STENCIL_TEST_KUBECONFIG:?needs a running rig: make testenv-up, then STENCIL_TEST_KUBECONFIG=target/testenv/kubeconfig}"
CARGO=${CARGO:-cargo}

case "${1:-short}" in
short)
    runs=(
        "STENCIL_FAULT_COALESCE_EVENTS=ConfigMap=300 ownership"
        "STENCIL_FAULT_COALESCE_EVENTS=*=300 ownership"
    )
    ;;
full)
    scenarios=(ownership controller decorators pause revisions rollout cel)
    # Delaying every kind's events delays the children's too, so the children alone are
    # only coalesced: three faults keep the whole suite under 30 minutes.
    faults=(
        STENCIL_FAULT_COALESCE_EVENTS=ConfigMap=300
        "STENCIL_FAULT_COALESCE_EVENTS=*=300"
        "STENCIL_FAULT_DELAY_EVENTS=*=300"
    )
    runs=()
    for fault in "${faults[@]}"; do
        for scenario in "${scenarios[@]}"; do
            runs+=("$fault $scenario")
        done
    done
    # The sharded moves take six minutes a run: under the widest fault alone.
    runs+=("STENCIL_FAULT_COALESCE_EVENTS=*=300 sharding")
    ;;
*)
    echo "usage: $0 short|full" >&2
    exit 2
    ;;
esac

failed=()
for run in "${runs[@]}"; do
    fault=${run% *}
    scenario=${run##* }
    started=$(date +%s)
    if env "$fault" "$CARGO" test --locked --features fault-injection --test "$scenario" -q >"/tmp/watch-faults.$$.log" 2>&1; then
        result=ok
    else
        result=FAILED
        failed+=("$run")
        tail -60 "/tmp/watch-faults.$$.log"
    fi
    echo "watch faults: $fault --test $scenario: $result in $(($(date +%s) - started)) s"
done
rm -f "/tmp/watch-faults.$$.log"
echo "watch faults: ${#runs[@]} runs, ${#failed[@]} failed"
for run in "${failed[@]}"; do
    echo "  failed: $run"
done
[ ${#failed[@]} = 0 ]
