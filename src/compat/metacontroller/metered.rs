//! What the compatibility counts, per controller object: its syncs as controller-runtime
//! counts reconciles (`controller_runtime_reconcile_*`, labelled
//! `CompositeController/NAME` or `DecoratorController/NAME`) and its hook calls
//! (`stencil_hook_calls`, `stencil_hook_call_seconds`).

use std::time::Instant;

use crate::hooks::CallError;
use crate::metrics::{self, HookLabels, HookResultLabels, Metrics, ResultLabels};

/// Counts a sync of `controller` that began at `started`.
pub(super) fn synced(metrics: &Metrics, controller: &str, started: Instant, succeeded: bool) {
    let label = metrics::controller(controller);
    metrics
        .reconcile_time_seconds
        .get_or_create(&label)
        .observe(started.elapsed().as_secs_f64());
    let result = if succeeded { "success" } else { "error" };
    metrics
        .reconcile_total
        .get_or_create(&ResultLabels {
            controller: controller.to_string(),
            result: result.into(),
        })
        .inc();
    if !succeeded {
        metrics.reconcile_errors_total.get_or_create(&label).inc();
    }
}

/// Counts a call of `controller`'s hook `hook` that began at `started`.
pub(super) fn called<T>(
    metrics: &Metrics,
    controller: &str,
    hook: &str,
    started: Instant,
    outcome: &Result<T, CallError>,
) {
    let labels = HookLabels {
        controller: controller.to_string(),
        hook: hook.to_string(),
    };
    metrics
        .hook_call_seconds
        .get_or_create(&labels)
        .observe(started.elapsed().as_secs_f64());
    let result = match outcome {
        Ok(_) => "success",
        Err(CallError::RetryAfter { .. }) => "busy",
        Err(_) => "error",
    };
    metrics
        .hook_calls_total
        .get_or_create(&HookResultLabels {
            hook: labels,
            result: result.into(),
        })
        .inc();
}
