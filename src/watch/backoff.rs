//! How a failing watch waits before it retries, and how its error reads on a status.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::watcher;

use super::WatchError;

/// 0.5 s doubling to 5 s, so a watch is back within seconds of the API server (kube's
/// default waits up to 30 s).
pub(super) struct RetryBackoff {
    builder: backon::ExponentialBuilder,
    delays: backon::ExponentialBackoff,
}

impl RetryBackoff {
    pub(super) fn new() -> Self {
        let builder = backon::ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(500))
            .with_max_delay(Duration::from_secs(5))
            .with_jitter()
            .without_max_times();
        RetryBackoff {
            delays: backon::BackoffBuilder::build(builder),
            builder,
        }
    }
}

impl Iterator for RetryBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Self::Item> {
        self.delays.next()
    }
}

impl kube::runtime::utils::Backoff for RetryBackoff {
    fn reset(&mut self) {
        self.delays = backon::BackoffBuilder::build(self.builder);
    }
}

/// How long a failure stays current without another one. A failing watch retries at
/// least every 10 s (5 s, doubled at most by the jitter) and records each failure; a
/// watch that resumed after an outage records nothing, and a quiet kind may send no event
/// to clear the last failure, so it fades instead.
const CURRENT_FOR: Duration = Duration::from_secs(20);

/// What went wrong with a watch, as the definition's status reports it.
#[derive(Debug, Clone)]
pub struct WatchFailure {
    plural: String,
    /// The RBAC rule that lets Stencil list and watch the kind.
    rule: String,
    source: Arc<watcher::Error>,
    at: tokio::time::Instant,
}

impl WatchFailure {
    /// Records `source`, a failure to list or watch the kind `ar`, as of now.
    pub(super) fn new(source: watcher::Error, ar: &kube::core::ApiResource) -> Self {
        WatchFailure {
            plural: ar.plural.clone(),
            rule: crate::gvk::missing_rule(&ar.group, &ar.plural, "list, watch"),
            source: Arc::new(source),
            at: tokio::time::Instant::now(),
        }
    }

    /// Whether the watch may still be failing: no retry has gone by without a failure.
    pub fn current(&self) -> bool {
        self.at.elapsed() < CURRENT_FOR
    }

    /// The failure as an error; one the API server refused (403) names the rule to add.
    pub fn to_error(&self) -> WatchError {
        let inner = match &*self.source {
            watcher::Error::InitialListFailed(k)
            | watcher::Error::WatchStartFailed(k)
            | watcher::Error::WatchFailed(k) => Some(k),
            _ => None,
        };
        match inner {
            Some(kube::Error::Api(status)) if status.code == 403 => WatchError::Forbidden {
                plural: self.plural.clone(),
                rule: self.rule.clone(),
                source: self.source.clone(),
            },
            _ => WatchError::Failed {
                plural: self.plural.clone(),
                source: self.source.clone(),
            },
        }
    }
}
