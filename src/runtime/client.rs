//! The API clients of a running Stencil: every request is counted by method; writes of
//! the reconciling client pass the leader's fence. With the `fault-injection` feature (the
//! fault suite's builds only), `STENCIL_FAULT_ABORT_AFTER_WRITES=k` aborts the process
//! before its (k+1)-th write, as a kill -9 would stop it.

use std::sync::Arc;

use kube::client::{Body, ClientBuilder};

use super::RuntimeError;
use crate::leader::Fence;
use crate::metrics::{MethodLabel, Metrics};

/// Sees every request a runtime sends (tests record writes with it).
pub type Observer = Arc<dyn Fn(&http::Method, &str) + Send + Sync>;

/// Counts requests and tells the observer.
fn counting(
    metrics: Arc<Metrics>,
    observer: Option<Observer>,
) -> impl Fn(http::Request<Body>) -> http::Request<Body> + Clone {
    move |req: http::Request<Body>| {
        if let Some(observe) = &observer {
            let target = req
                .uri()
                .path_and_query()
                .map_or_else(|| req.uri().path(), |p| p.as_str());
            observe(req.method(), target);
        }
        if req.method() != http::Method::GET {
            tracing::debug!(method = %req.method(), path = req.uri().path(), "write");
        }
        let label = MethodLabel {
            method: req.method().to_string(),
        };
        metrics.rest_client_requests_total.get_or_create(&label).inc();
        req
    }
}

/// The client for the leader election and the webhook's certificate, which standbys need
/// too: counted, never fenced.
pub(super) fn unfenced(
    config: &kube::Config,
    metrics: Arc<Metrics>,
    observer: Option<Observer>,
) -> Result<kube::Client, RuntimeError> {
    let count = tower::util::MapRequestLayer::new(counting(metrics, observer));
    let builder = ClientBuilder::try_from(config.clone())
        .map_err(RuntimeError::Client)?
        .with_layer(&count);
    #[cfg(feature = "fault-injection")]
    let builder = builder.with_layer(&faults::abort_after_writes()?);
    Ok(builder.build())
}

/// The client for everything else: counted, and its writes fenced.
pub(super) fn fenced(
    config: &kube::Config,
    metrics: Arc<Metrics>,
    observer: Option<Observer>,
    fence: Fence,
) -> Result<kube::Client, RuntimeError> {
    let count = tower::util::MapRequestLayer::new(counting(metrics, observer));
    let gate = tower::filter::FilterLayer::new(move |req| fence.check(req));
    let builder = ClientBuilder::try_from(config.clone())
        .map_err(RuntimeError::Client)?
        .with_layer(&count);
    #[cfg(feature = "fault-injection")]
    let builder = builder.with_layer(&faults::abort_after_writes()?);
    Ok(builder.with_layer(&gate).build())
}

#[cfg(feature = "fault-injection")]
mod faults {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::{Body, RuntimeError};

    const ABORT_AFTER_WRITES: &str = "STENCIL_FAULT_ABORT_AFTER_WRITES";

    /// A layer that counts the process's writes (shared by both clients) and aborts
    /// before the (k+1)-th when asked to. Only the fault suite's builds have it.
    pub(super) fn abort_after_writes()
    -> Result<tower::util::MapRequestLayer<impl Fn(http::Request<Body>) -> http::Request<Body> + Clone>, RuntimeError>
    {
        static WRITES: AtomicU64 = AtomicU64::new(0);
        let k: Option<u64> = match std::env::var(ABORT_AFTER_WRITES) {
            Ok(v) => Some(
                v.parse()
                    .map_err(|_| RuntimeError::Fault(format!("{ABORT_AFTER_WRITES}={v} is not a number")))?,
            ),
            Err(_) => None,
        };
        Ok(tower::util::MapRequestLayer::new(move |req: http::Request<Body>| {
            if let Some(k) = k
                && req.method() != http::Method::GET
                && WRITES.fetch_add(1, Ordering::SeqCst) >= k
            {
                eprintln!("{ABORT_AFTER_WRITES}={k}: aborting before write {}", k + 1);
                std::process::abort();
            }
            req
        }))
    }
}
