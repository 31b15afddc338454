//! `stencil run` as a library: [`Options`] into a [`Runtime`] that runs the sources, the
//! registry, the HTTP endpoint and leader election until it is told to stop. The binary,
//! the rig tests and the benchmark all start Stencil through it.

mod client;
mod leases;
mod sources;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use crate::registry::RELEASE_GRACE;
pub use client::Observer;

use crate::http::{self, Health, ServeError};
use crate::leader::{self, ElectionError, Leadership};
use crate::metrics::Metrics;
use crate::registry::dependencies::Dependencies;
use crate::registry::{Registry, definition_status};
use crate::sharding;
use crate::tasks::Owned;
use crate::watch::Watches;
use crate::webhook::{self, Conversions};
use leases::{Leases, Wait};
use sources::Sources;

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
    /// Serve metacontroller's CompositeControllers and DecoratorControllers too
    /// (`--compat metacontroller`).
    pub compat_metacontroller: bool,
    /// Where hook calls for some hosts go instead (`--resolve HOST=ADDRESS:PORT`).
    pub hook_overrides: crate::hooks::Overrides,
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
            compat_metacontroller: false,
            hook_overrides: crate::hooks::Overrides::new(),
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
    /// The hook client cannot start.
    #[error("starting the hook client: {0}")]
    Hooks(#[source] std::io::Error),
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
        #[cfg(feature = "fault-injection")]
        crate::watch::faults::check_env().map_err(RuntimeError::Fault)?;
        let unfenced = client::unfenced(&config, metrics.clone(), observer.clone())?;
        let conversions = Conversions::new();
        let webhook = Webhook::start(&options, &unfenced, &conversions, &metrics).await?;
        let mut leases = Leases::join(unfenced, &options, &metrics).await?;
        let fence = leases.fence(&metrics);
        let client = client::fenced(&config, metrics.clone(), observer.clone(), fence.clone())?;
        let leader_client = match leases.leader_fence() {
            Some(both) => client::fenced(&config, metrics.clone(), observer, both)?,
            None => client.clone(),
        };
        let kinds = Arc::new(sharding::Kinds::default());
        let sharder = spawn_sharder(&leases, &options, leader_client.clone(), kinds.clone(), metrics.clone());
        let mut sources = Sources::start(&options, &client, &health, conversions.clone(), kinds)?;
        tokio::pin!(shutdown);
        if let Wait::ShutDown = leases.acquired(&mut shutdown).await? {
            leases.leave().await;
            return Ok(());
        }
        let leadership = leases.leadership();
        let _trusted = webhook.keep_trusted(&leader_client, &leadership, conversions);
        let _compat = spawn_compat(&leases, &options, &client, &leader_client, &metrics)?;
        let (reports, status_task) = definition_status::start(leader_client, leadership.clone());
        let watches = Watches::new(
            client.clone(),
            options.namespaces.clone(),
            options.sync_timeout,
            metrics.clone(),
        );
        let mut registry = Registry::new(Dependencies {
            client,
            watches: Arc::new(watches),
            concurrency: options.concurrency,
            metrics,
            reports,
            webhook: webhook.served.as_ref().map(|s| s.webhook.clone()),
            storage_migration: options.storage_migration,
            instance: options.instance.clone(),
            home: options.home.clone(),
            shard: member(&options),
            leadership,
        });
        tracing::info!(definitions = ?options.definitions, namespaces = ?options.namespaces, "stencil running");
        for event in sources.queued() {
            registry.handle(event);
        }
        let outcome = tokio::select! {
            _ = async { while let Some(event) = sources.events.recv().await { registry.handle(event) } } => Ok(()),
            _ = &mut shutdown => {
                tracing::info!("shutting down");
                Ok(())
            }
            error = leases.lost() => Err(error),
        };
        registry.shutdown().await;
        status_task.abort();
        // Before the Leases go: a sharder that saw this member leave would otherwise try
        // to move its parents through a sealed fence.
        drop(sharder);
        leases.log_fence(&fence);
        leases.leave().await;
        outcome
    }
}

/// How often the sharder looks at every parent again, besides ring changes.
const SHARDER_RESYNC: Duration = Duration::from_secs(60);

/// The conversion webhook of a process that serves one.
struct Webhook {
    /// Every replica reads the converting CRDs, so each converts with what they carry.
    _follow: Option<Owned<()>>,
    /// The server, its endpoint and CA bundle.
    served: Option<webhook::Served>,
}

impl Webhook {
    /// Starts the webhook `options` ask for. Every replica converts, so it starts before
    /// the wait for a Lease.
    async fn start(
        options: &Options,
        unfenced: &kube::Client,
        conversions: &Conversions,
        metrics: &Arc<Metrics>,
    ) -> Result<Webhook, RuntimeError> {
        let Some(settings) = &options.webhook else {
            return Ok(Webhook {
                _follow: None,
                served: None,
            });
        };
        let follow = webhook::follow(unfenced.clone(), options.home.clone(), conversions.clone());
        let follow = Owned::spawn(follow);
        let served = webhook::start(unfenced, settings, conversions.clone(), metrics.clone()).await?;
        Ok(Webhook {
            _follow: Some(follow),
            served: Some(served),
        })
    }

    /// The leader keeps every converting CRD trusting the CA the webhook serves.
    fn keep_trusted(&self, client: &kube::Client, leadership: &Leadership, table: Conversions) -> Option<Owned<()>> {
        let served = self.served.as_ref()?;
        let trusted = webhook::keep_trusted(client.clone(), leadership.clone(), served.webhook.clone(), table);
        Some(Owned::spawn(trusted))
    }
}

/// `--compat metacontroller`, served by one process only: the leader, or sharded, the
/// ring's leader through its fence (every member serving every controller object would
/// call each hook once per member and write each child as many times).
fn spawn_compat(
    leases: &Leases,
    options: &Options,
    client: &kube::Client,
    leader_client: &kube::Client,
    metrics: &Arc<Metrics>,
) -> Result<Option<Owned<()>>, RuntimeError> {
    if !options.compat_metacontroller {
        return Ok(None);
    }
    let hooks = crate::hooks::HookClient::new(options.hook_overrides.clone()).map_err(RuntimeError::Hooks)?;
    let metrics = metrics.clone();
    Ok(Some(match leases.ring_election() {
        Some(election) => {
            let (led, client) = (election.led(), leader_client.clone());
            Owned::spawn(async move {
                if led.await.is_ok() {
                    crate::compat::metacontroller::serve(client, hooks, metrics).await;
                }
            })
        }
        None => Owned::spawn(crate::compat::metacontroller::serve(client.clone(), hooks, metrics)),
    }))
}

/// Sharded, the task that assigns the parents to the members once this one leads.
fn spawn_sharder(
    leases: &Leases,
    options: &Options,
    leader_client: kube::Client,
    kinds: Arc<sharding::Kinds>,
    metrics: Arc<Metrics>,
) -> Option<Owned<()>> {
    let (election, settings) = (leases.ring_election()?, options.leader.as_ref()?);
    let sharder = sharding::sharder::Settings {
        namespace: settings.namespace.clone(),
        ring: settings.name.clone(),
        lease_duration: settings.lease_duration,
        resync: SHARDER_RESYNC,
        namespaces: options.namespaces.clone(),
    };
    let led = election.led();
    Some(Owned::spawn(async move {
        if led.await.is_ok() {
            tracing::info!("leading the ring: assigning parents to members");
            sharding::sharder::run(leader_client, sharder, kinds, metrics).await;
        }
    }))
}

/// This process as a member of a sharded ring; `None` unsharded.
fn member(options: &Options) -> Option<sharding::Member> {
    let leader = options.leader.as_ref().filter(|_| options.sharding)?;
    Some(sharding::Member {
        name: leader.identity.clone(),
        namespace: leader.namespace.clone(),
        ring: leader.name.clone(),
    })
}
