//! `stencil run` as a library: [`Options`] into a [`Runtime`] that runs the sources, the
//! registry, the HTTP endpoint and leader election until it is told to stop. The binary,
//! the rig tests and the benchmark all start Stencil through it.

mod client;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use client::Observer;

use crate::http::{self, Health, ServeError};
use crate::leader::{self, Election, ElectionError, Fence};
use crate::metrics::Metrics;
use crate::registry::shell::Shell;
use crate::registry::{Registry, status};
use crate::source::{cluster, files};
use crate::watch::Watches;
use crate::webhook::{self, Conversions};

/// How `stencil run` is configured.
#[derive(Debug, Clone)]
pub struct Options {
    /// Definition files and directories, hot-reloaded.
    pub definitions: Vec<PathBuf>,
    /// Whether OperatorDefinition resources are served too.
    pub cluster_definitions: bool,
    /// Namespaces to serve (empty: all).
    pub namespaces: Vec<String>,
    /// Parents reconciled at once per definition.
    pub concurrency: u16,
    /// Where to serve /metrics, /healthz and /readyz; none serves nothing.
    pub metrics_addr: Option<SocketAddr>,
    /// Leader election; none reconciles at once.
    pub leader: Option<leader::Settings>,
    /// How long a watch's first list may take before the definition reports it.
    pub sync_timeout: Duration,
    /// The conversion webhook; none serves none, and a definition whose versions convert
    /// then reports that it needs one.
    pub webhook: Option<crate::webhook::Settings>,
    /// Who stores objects anew when a definition's storage version changes.
    pub storage_migration: crate::migrate::Method,
    /// The name events are reported from (the Pod's, `$POD_NAME` in the chart).
    pub instance: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            definitions: Vec::new(),
            cluster_definitions: true,
            namespaces: Vec::new(),
            concurrency: 16,
            metrics_addr: None,
            leader: None,
            sync_timeout: Duration::from_secs(10),
            webhook: None,
            storage_migration: crate::migrate::Method::Auto,
            instance: None,
        }
    }
}

/// Why Stencil stopped.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The kubeconfig gives no usable client.
    #[error("building the API client: {0}")]
    Client(#[source] kube::Error),
    /// The HTTP endpoint could not start.
    #[error(transparent)]
    Http(#[from] ServeError),
    /// `--definitions` cannot be watched.
    #[error("watching --definitions: {0}")]
    Files(#[from] notify::Error),
    /// Leader election failed.
    #[error(transparent)]
    Election(#[from] ElectionError),
    /// The conversion webhook cannot serve.
    #[error(transparent)]
    Webhook(#[from] crate::webhook::WebhookError),
    /// A fault-injection setting is wrong.
    #[error("{0}")]
    Fault(String),
    /// This process stopped leading.
    #[error("lost the leader Lease; exiting so a fresh process can stand by")]
    LostLease,
}

/// A configured Stencil, ready to run.
pub struct Runtime {
    config: kube::Config,
    options: Options,
    metrics: Arc<Metrics>,
    observer: Option<Observer>,
}

impl Runtime {
    /// A runtime for the cluster in `config`.
    pub fn new(config: kube::Config, options: Options) -> Runtime {
        Runtime {
            config,
            options,
            metrics: Arc::new(Metrics::new()),
            observer: None,
        }
    }

    /// Calls `observer` with every request's method and path (with its query).
    pub fn observe(mut self, observer: Observer) -> Runtime {
        self.observer = Some(observer);
        self
    }

    /// The runtime's metrics, as /metrics serves them.
    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// Runs until `shutdown` resolves, the sources end, or leadership is lost.
    ///
    /// # Errors
    ///
    /// The client cannot be built, a source or the webhook cannot start, the metrics
    /// address cannot be bound, or leadership is lost.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) -> Result<(), RuntimeError> {
        let Runtime {
            config,
            options,
            metrics,
            observer,
        } = self;
        let health = Health::new(!options.definitions.is_empty(), options.cluster_definitions);
        if let Some(addr) = options.metrics_addr {
            let bound = http::serve(addr, health.clone(), metrics.clone()).await?;
            tracing::info!(addr = %bound, "serving /metrics, /healthz and /readyz");
        }
        let unfenced = client::unfenced(&config, metrics.clone(), observer.clone())?;
        let conversions = Conversions::new();
        // Every replica converts, so the webhook starts before the wait for the Lease.
        let served = match &options.webhook {
            Some(settings) => Some(webhook::start(&unfenced, settings, conversions.clone(), metrics.clone()).await?),
            None => None,
        };
        let mut election = match &options.leader {
            Some(settings) => Some(Election::start(unfenced, settings, &metrics).await?),
            None => None,
        };
        let fence = election.as_ref().map_or_else(|| Fence::open(&metrics), Election::fence);
        let client = client::fenced(&config, metrics.clone(), observer, fence.clone())?;

        let (tx, mut sources) = tokio::sync::mpsc::unbounded_channel();
        let (forward, rx) = tokio::sync::mpsc::unbounded_channel();
        // The webhook's table follows the sources at once; the registry takes the same
        // events once this process leads.
        let _tee = crate::tasks::Owned::spawn(async move {
            while let Some(event) = sources.recv().await {
                conversions.observe(&event);
                if forward.send(event).is_err() {
                    break;
                }
            }
        });
        let _file_watch = if options.definitions.is_empty() {
            None
        } else {
            let watch = files::watch(options.definitions.clone(), tx.clone())?;
            health.files_synced();
            Some(watch)
        };
        let _cluster_source = options.cluster_definitions.then(|| {
            let synced = health.clone();
            crate::tasks::Owned::spawn(cluster::watch(client.clone(), tx.clone(), move || {
                synced.cluster_synced()
            }))
        });

        tokio::pin!(shutdown);
        if let Some(e) = election.as_mut() {
            tracing::info!("waiting to become the leader");
            tokio::select! {
                acquired = e.acquired() => {
                    if let Err(err) = acquired {
                        return Err(err.into());
                    }
                    tracing::info!("became the leader");
                }
                _ = &mut shutdown => {
                    if let Some(e) = election {
                        e.release().await;
                    }
                    return Ok(());
                }
            }
        }

        let watches = Arc::new(Watches::new(
            client.clone(),
            options.namespaces.clone(),
            options.sync_timeout,
            metrics.clone(),
        ));
        let (reports, status_task) = status::start(client.clone());
        let shell = Shell {
            client,
            watches,
            concurrency: options.concurrency,
            metrics,
            reports,
            webhook: served.as_ref().map(|s| s.webhook.clone()),
            storage_migration: options.storage_migration,
            instance: options.instance.clone(),
            shard: None,
        };
        let mut registry = Registry::new(shell);
        tracing::info!(definitions = ?options.definitions, namespaces = ?options.namespaces, "stencil running");
        let lost = async {
            match election.as_mut() {
                Some(e) => e.lost().await,
                None => std::future::pending().await,
            }
        };
        let mut rx = rx;
        // What a standby queued while it waited: only the last word on each definition
        // counts, so a definition removed and added again meanwhile is not stopped.
        let mut queued = Vec::new();
        while let Ok(event) = rx.try_recv() {
            queued.push(event);
        }
        for event in crate::source::latest(queued) {
            registry.handle(event);
        }
        let outcome = tokio::select! {
            _ = async { while let Some(event) = rx.recv().await { registry.handle(event) } } => Ok(()),
            _ = &mut shutdown => {
                tracing::info!("shutting down");
                Ok(())
            }
            _ = lost => Err(RuntimeError::LostLease),
        };
        registry.shutdown().await;
        status_task.abort();
        if let Some(e) = election {
            let (sent, refused) = fence.counts();
            tracing::info!(sent, refused, "writes through the leader's fence");
            e.release().await;
        }
        outcome
    }
}
