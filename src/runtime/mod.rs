//! `stencil run` as a library: [`Options`] into a [`Runtime`] that runs the sources, the
//! registry, the HTTP endpoint and leader election until it is told to stop. The binary,
//! the rig tests and the benchmark all start Stencil through it.

mod client;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use crate::registry::RELEASE_GRACE;
pub use client::Observer;

use crate::http::{self, Health, ServeError};
use crate::leader::{self, Election, ElectionError, Fence, Leadership};
use crate::metrics::Metrics;
use crate::registry::dependencies::Dependencies;
use crate::registry::{Registry, definition_status};
use crate::sharding;
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
    /// Only the OperatorDefinition resources this label selector matches are served.
    pub definition_selector: Option<String>,
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
    /// Split the parents between the replicas: each joins the ring named after the
    /// leader Lease under its leader identity, and the leader assigns the parents. Needs
    /// `leader`.
    pub sharding: bool,
    /// Stencil's own namespace (`$POD_NAMESPACE`), where each definition's revisions are
    /// kept as `ControllerRevision`s; none keeps none.
    pub home: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            definitions: Vec::new(),
            cluster_definitions: true,
            definition_selector: None,
            namespaces: Vec::new(),
            concurrency: 16,
            metrics_addr: None,
            leader: None,
            sync_timeout: Duration::from_secs(10),
            webhook: None,
            storage_migration: crate::migrate::Method::Auto,
            instance: None,
            sharding: false,
            home: None,
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
    /// This member lost its membership Lease: its parents are another's now.
    #[error("lost the membership Lease; exiting so a fresh process can join the ring")]
    LostMembership,
    /// Sharding was asked for without leader election.
    #[error("--sharding needs --leader-elect: the leader assigns the parents")]
    ShardingWithoutLeader,
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
        // Every replica reads the converting CRDs, so each converts with what they carry.
        let _follow = options.webhook.as_ref().map(|_| {
            crate::tasks::Owned::spawn(webhook::follow(
                unfenced.clone(),
                options.home.clone(),
                conversions.clone(),
            ))
        });
        // Every replica converts, so the webhook starts before the wait for the Lease.
        let served = match &options.webhook {
            Some(settings) => Some(webhook::start(&unfenced, settings, conversions.clone(), metrics.clone()).await?),
            None => None,
        };
        if options.sharding && options.leader.is_none() {
            return Err(RuntimeError::ShardingWithoutLeader);
        }
        let mut membership = match (&options.leader, options.sharding) {
            (Some(settings), true) => {
                Some(sharding::membership::join(unfenced.clone(), settings, &settings.name, &metrics).await?)
            }
            _ => None,
        };
        let mut election = match &options.leader {
            Some(settings) => Some(Election::start(unfenced, settings, &metrics).await?),
            None => None,
        };
        // A member writes under its own Lease; the sharder, under both.
        let fence = match (&membership, &election) {
            (Some(m), _) => m.fence(),
            (None, Some(e)) => e.fence(),
            (None, None) => Fence::open(&metrics),
        };
        let client = client::fenced(&config, metrics.clone(), observer.clone(), fence.clone())?;
        // Sharded, the leader's own writes (assignments, definition status) pass both.
        let (leader_client, leadership) = match (&membership, &election) {
            (Some(m), Some(e)) => (
                client::fenced(&config, metrics.clone(), observer, m.fence().and(&e.fence()))?,
                e.leadership(),
            ),
            _ => (client.clone(), Leadership::always()),
        };
        let kinds = Arc::new(sharding::Kinds::default());
        let sharder = match (&membership, &election, &options.leader) {
            (Some(_), Some(e), Some(settings)) => {
                let leader_client = leader_client.clone();
                let sharder = sharding::sharder::Settings {
                    namespace: settings.namespace.clone(),
                    ring: settings.name.clone(),
                    lease_duration: settings.lease_duration,
                    resync: SHARDER_RESYNC,
                    namespaces: options.namespaces.clone(),
                };
                let (led, kinds, metrics) = (e.led(), kinds.clone(), metrics.clone());
                Some(crate::tasks::Owned::spawn(async move {
                    if led.await.is_ok() {
                        tracing::info!("leading the ring: assigning parents to members");
                        sharding::sharder::run(leader_client, sharder, kinds, metrics).await;
                    }
                }))
            }
            _ => None,
        };

        let (tx, mut sources) = tokio::sync::mpsc::unbounded_channel();
        let (forward, rx) = tokio::sync::mpsc::unbounded_channel();
        // The webhook's table and the sharder's kinds follow the sources at once; the
        // registry takes the same events once this process leads (sharded: once it has
        // joined the ring).
        let sharded_kinds = kinds.clone();
        let table = conversions.clone();
        let _tee = crate::tasks::Owned::spawn(async move {
            while let Some(event) = sources.recv().await {
                conversions.observe(&event);
                sharded_kinds.observe(&event);
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
            let selector = options.definition_selector.clone();
            crate::tasks::Owned::spawn(cluster::watch(client.clone(), selector, tx.clone(), move || {
                synced.cluster_synced()
            }))
        });

        tokio::pin!(shutdown);
        if let Some(m) = membership.as_mut() {
            tracing::info!("joining the ring");
            tokio::select! {
                acquired = m.acquired() => {
                    if let Err(err) = acquired {
                        return Err(err.into());
                    }
                    tracing::info!("joined the ring");
                }
                _ = &mut shutdown => {
                    leave(membership, election).await;
                    return Ok(());
                }
            }
        } else if let Some(e) = election.as_mut() {
            tracing::info!("waiting to become the leader");
            tokio::select! {
                acquired = e.acquired() => {
                    if let Err(err) = acquired {
                        return Err(err.into());
                    }
                    tracing::info!("became the leader");
                }
                _ = &mut shutdown => {
                    leave(membership, election).await;
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
        // The leader keeps every converting CRD trusting the CA the webhook serves.
        let _trusted = served.as_ref().map(|s| {
            crate::tasks::Owned::spawn(webhook::keep_trusted(
                leader_client.clone(),
                leadership.clone(),
                s.webhook.clone(),
                table,
            ))
        });
        let (reports, status_task) = definition_status::start(leader_client, leadership.clone());
        let deps = Dependencies {
            client,
            watches,
            concurrency: options.concurrency,
            metrics,
            reports,
            webhook: served.as_ref().map(|s| s.webhook.clone()),
            storage_migration: options.storage_migration,
            instance: options.instance.clone(),
            home: options.home.clone(),
            shard: options
                .leader
                .as_ref()
                .filter(|_| options.sharding)
                .map(|l| sharding::Member {
                    name: l.identity.clone(),
                    namespace: l.namespace.clone(),
                    ring: l.name.clone(),
                }),
            leadership,
        };
        let mut registry = Registry::new(deps);
        tracing::info!(definitions = ?options.definitions, namespaces = ?options.namespaces, "stencil running");
        // Unsharded, the leader Lease is what lets this process write. Sharded, the
        // membership Lease is; the leader Lease, once held, only for assigning parents.
        let lost = async {
            match (membership.as_mut(), election.as_mut()) {
                (Some(m), Some(e)) => tokio::select! {
                    () = m.lost() => RuntimeError::LostMembership,
                    () = async {
                        if e.acquired().await.is_err() {
                            std::future::pending::<()>().await;
                        }
                        e.lost().await;
                    } => RuntimeError::LostLease,
                },
                (_, Some(e)) => {
                    e.lost().await;
                    RuntimeError::LostLease
                }
                _ => std::future::pending().await,
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
            error = lost => Err(error),
        };
        registry.shutdown().await;
        status_task.abort();
        // Before the Leases go: a sharder that saw this member leave would otherwise try
        // to move its parents through a sealed fence.
        drop(sharder);
        let (sent, refused) = fence.counts();
        if membership.is_some() {
            tracing::info!(sent, refused, "writes through the member's fence");
        } else if election.is_some() {
            tracing::info!(sent, refused, "writes through the leader's fence");
        }
        leave(membership, election).await;
        outcome
    }
}

/// How often the sharder looks at every parent again, besides ring changes.
const SHARDER_RESYNC: Duration = Duration::from_secs(60);

/// Leaves the ring and the election, releasing whatever Lease is held: the membership
/// first, so the parents move at once, then the leader Lease.
async fn leave(membership: Option<Election>, election: Option<Election>) {
    if let Some(m) = membership {
        m.release().await;
    }
    if let Some(e) = election {
        e.release().await;
    }
}
