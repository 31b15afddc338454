//! What the compatibility counts of a controller object's hook calls
//! (`stencil_hook_calls`, `stencil_hook_call_seconds`); its syncs are counted as
//! reconciles through [`Metrics::reconciled`].

use std::time::Instant;

use crate::hooks::CallError;
use crate::metrics::{HookLabels, HookResultLabels, Metrics};

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
