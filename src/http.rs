//! The HTTP endpoint: `/metrics` (Prometheus text), `/healthz` (the process is up) and
//! `/readyz` (the definition sources have synced, on the leader and on standbys alike).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::metrics::Metrics;

/// What `/readyz` reports.
#[derive(Debug, Default)]
pub struct Health {
    files_synced: AtomicBool,
    cluster_synced: AtomicBool,
}

impl Health {
    /// Health with the given sources still to sync; a source not in use counts as synced.
    pub fn new(files: bool, cluster: bool) -> Arc<Health> {
        Arc::new(Health {
            files_synced: AtomicBool::new(!files),
            cluster_synced: AtomicBool::new(!cluster),
        })
    }

    /// The file source has loaded every definition.
    pub fn files_synced(&self) {
        self.files_synced.store(true, Ordering::Release);
    }

    /// The cluster source has listed every OperatorDefinition.
    pub fn cluster_synced(&self) {
        self.cluster_synced.store(true, Ordering::Release);
    }

    /// Whether every source has synced.
    pub fn ready(&self) -> bool {
        self.files_synced.load(Ordering::Acquire) && self.cluster_synced.load(Ordering::Acquire)
    }
}

/// The HTTP server could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr}: {source}")]
pub struct ServeError {
    /// The address asked for.
    pub addr: SocketAddr,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

/// Binds `addr` and serves until the process ends; returns the bound address.
///
/// # Errors
///
/// `addr` cannot be bound.
pub async fn serve(addr: SocketAddr, health: Arc<Health>, metrics: Arc<Metrics>) -> Result<SocketAddr, ServeError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError { addr, source })?;
    let bound = listener.local_addr().map_err(|source| ServeError { addr, source })?;
    let app = Router::new()
        .route("/metrics", get(move || encode(metrics.clone())))
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || {
                let ready = health.ready();
                async move {
                    if ready {
                        (StatusCode::OK, "ok")
                    } else {
                        (
                            StatusCode::SERVICE_UNAVAILABLE,
                            "definition sources have not synced yet",
                        )
                    }
                }
            }),
        );
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "the HTTP server stopped");
        }
    });
    Ok(bound)
}

async fn encode(metrics: Arc<Metrics>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics.encode(),
    )
}
