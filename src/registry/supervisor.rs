//! Carries out the registry's effects without ever waiting on a definition's task: each
//! controller runs in its own task, and tasks that touch one parent kind are chained, so
//! a new controller of a kind starts only once the old one has stopped (and its parents
//! have been released), without the registry loop awaiting either.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use tokio::sync::watch;

use super::dependencies::{Dependencies, resolve};
use super::release::release_parents;
use super::report::Report;
use super::rollout_driver::{self, Driver};
use super::state::{Effect, ParentKind, parent_kind};
use crate::compile::CompiledDefinition;
use crate::gvk::Gvk;
use crate::reconcile;
use crate::source::Origin;

/// How often a waiting definition retries (a missing kind, an unestablished CRD, a
/// forbidden list).
const RETRY: Duration = Duration::from_secs(3);

/// How long shutdown waits for the controllers to finish their reconciles.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// How long the parents of a kind nobody serves keep Stencil's finalizer before it is
/// released: a definition that comes back meanwhile (a renamed or moved file, a ConfigMap
/// key renamed, a truncated read, an OperatorDefinition deleted and created again, queued
/// events replayed at failover) takes them over, and nothing is released.
pub const RELEASE_GRACE: Duration = Duration::from_secs(10);

type Barrier = Shared<BoxFuture<'static, ()>>;

/// Runs the effects.
pub struct Supervisor {
    deps: Dependencies,
    running: HashMap<Origin, watch::Sender<bool>>,
    /// The last task started for each parent kind; the next one waits for it.
    barriers: HashMap<ParentKind, Barrier>,
    /// Releases waiting out [`RELEASE_GRACE`], by parent kind; a start of the kind
    /// cancels its release.
    releases: HashMap<ParentKind, watch::Sender<bool>>,
}

impl Supervisor {
    /// A supervisor with nothing running.
    pub fn new(deps: Dependencies) -> Self {
        Supervisor {
            deps,
            running: HashMap::new(),
            barriers: HashMap::new(),
            releases: HashMap::new(),
        }
    }

    /// Carries out one effect; returns at once.
    pub fn execute(&mut self, effect: Effect) {
        self.barriers.retain(|_, b| b.peek().is_none());
        match effect {
            Effect::Start {
                origin,
                def,
                kinds_seen,
                fallback,
            } => {
                self.stop(&origin);
                let (stop, stopped) = watch::channel(false);
                let deps = self.deps.clone();
                tracing::info!(definition = %origin, "started");
                self.running.insert(origin.clone(), stop);
                let kind = parent_kind(&def);
                if let Some(cancel) = self.releases.remove(&kind) {
                    let _ = cancel.send(true);
                }
                self.chain(
                    kind,
                    serve(deps, origin, Versions { def, fallback }, kinds_seen, stopped),
                );
            }
            Effect::Stop(origin) => self.stop(&origin),
            Effect::Release(def) => {
                let deps = self.deps.clone();
                let kind = parent_kind(&def);
                let (cancel, cancelled) = watch::channel(false);
                if let Some(earlier) = self.releases.insert(kind.clone(), cancel) {
                    let _ = earlier.send(true);
                }
                self.chain(kind, async move {
                    if pause(&cancelled, RELEASE_GRACE).await {
                        release_parents(deps, def).await;
                    } else {
                        tracing::info!(definition = %def.name, kind = %def.parent, "another definition serves the kind again; nothing released");
                    }
                });
            }
            Effect::Report(origin, report) => self.deps.reports.send(&origin, report),
            Effect::FileInvalid(file, message) => {
                tracing::error!(file = %file, "{message}; definitions from this file keep their last good version")
            }
        }
    }

    fn stop(&mut self, origin: &Origin) {
        if let Some(stop) = self.running.remove(origin) {
            let _ = stop.send(true);
        }
    }

    /// Runs `work` once the last task of `kind` has finished.
    fn chain(&mut self, kind: ParentKind, work: impl std::future::Future<Output = ()> + Send + 'static) {
        let before = self.barriers.remove(&kind);
        let task = tokio::spawn(async move {
            if let Some(before) = before {
                before.await;
            }
            work.await;
        });
        let done: Barrier = task.map(|_| ()).boxed().shared();
        self.barriers.insert(kind, done);
    }

    /// Stops every controller and waits (a bounded time) for them, leaving parents and
    /// their finalizers in place for the next Stencil process.
    pub async fn shutdown(mut self) {
        for (_, stop) in self.running.drain() {
            let _ = stop.send(true);
        }
        let all = futures::future::join_all(self.barriers.into_values());
        if tokio::time::timeout(SHUTDOWN_GRACE, all).await.is_err() {
            tracing::warn!("controllers did not stop within {SHUTDOWN_GRACE:?}; leaving them");
        }
    }
}

/// Waits until `stop` is set.
async fn stopped(mut stop: watch::Receiver<bool>) {
    while !*stop.borrow() {
        if stop.changed().await.is_err() {
            return;
        }
    }
}

/// Sleeps for `d`, returning false if stopped meanwhile.
async fn pause(stop: &watch::Receiver<bool>, d: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => true,
        _ = stopped(stop.clone()) => false,
    }
}

/// Retries `attempt` every [`RETRY`], reporting why it waits, until it succeeds or the
/// definition is stopped.
async fn until_ready<T, F, Fut>(
    deps: &Dependencies,
    origin: &Origin,
    stop: &watch::Receiver<bool>,
    mut attempt: F,
) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, (&'static str, String)>>,
{
    loop {
        if *stop.borrow() {
            return None;
        }
        match attempt().await {
            Ok(v) => return Some(v),
            Err((reason, message)) => deps.reports.send(origin, Report::Waiting { reason, message }),
        }
        if !pause(stop, RETRY).await {
            return None;
        }
    }
}

/// A definition to serve, and the version it replaces: should the new one's CRD change
/// be refused as breaking, the CRD stays as it is and the version it replaced serves on.
struct Versions {
    def: Arc<CompiledDefinition>,
    fallback: Option<Arc<CompiledDefinition>>,
}

/// What installing a definition's CRD came to.
struct Installed {
    /// The change refused as breaking, if it was.
    refused: Option<String>,
    /// The child kinds an earlier run recorded on the CRD.
    recorded: Vec<Gvk>,
}

/// One definition's life: install its CRD, resolve its kinds (waiting for any that is not
/// served or not allowed yet), then run its controller and keep its status current until
/// stopped. Its watches are released when it ends.
async fn serve(
    deps: Dependencies,
    origin: Origin,
    versions: Versions,
    kinds_seen: Vec<Gvk>,
    stop: watch::Receiver<bool>,
) {
    // A decorator's parents are not sharded: only the leader serves it.
    if versions.def.spec.is_decorator() && !deps.leadership.now() {
        tokio::select! {
            () = deps.leadership.wait() => {}
            () = stopped(stop.clone()) => return,
        }
    }
    let Some(Installed { refused, recorded }) = install(&deps, &origin, &stop, &versions.def).await else {
        return;
    };
    // Kinds an earlier run wrote and this one no longer renders: watched, so their
    // objects are pruned.
    let kinds_seen = {
        let mut all = recorded;
        crate::gvk::remember(&mut all, kinds_seen);
        all
    };
    let def = match (&refused, versions.fallback) {
        (Some(_), Some(previous)) => previous,
        (Some(message), None) => {
            // Nothing to fall back on: report and wait for the next version.
            let report = Report::Waiting {
                reason: "BreakingSchemaChange",
                message: message.clone(),
            };
            deps.reports.send(&origin, report);
            stopped(stop).await;
            return;
        }
        (None, _) => versions.def,
    };
    let _migration = refused.is_none().then(|| migrate(&deps, &origin, &def));
    // The revisions, and the rollout between them, before any parent is served.
    let split = match refused {
        None => until_ready(&deps, &origin, &stop, || rollout_driver::prepare(&deps, &origin, &def)).await,
        Some(_) => Some(None),
    };
    let Some(split) = split else { return };
    let Some(ctx) = until_ready(&deps, &origin, &stop, || resolve(&deps, &def, &kinds_seen)).await else {
        return;
    };
    let ctx = Arc::new(ctx.rolling(split));
    let _rollout = Driver::new(&deps, &origin, &def, &ctx).map(|driver| {
        let (deps, ctx) = (deps.clone(), ctx.clone());
        crate::tasks::Owned::spawn(async move { driver.run(&deps, &ctx).await })
    });
    let controller = tokio::spawn(reconcile::run(ctx.clone(), deps.concurrency, stopped(stop.clone())));
    keep_reporting(&deps, &origin, &ctx, refused, &stop).await;
    let label = crate::metrics::definition(&def.name);
    deps.metrics.decorated_parents.remove(&label);
    deps.metrics.decorated_ready_parents.remove(&label);
    let _ = controller.await;
}

/// Installs the definition's CRD, retrying until it is installed, refused as breaking,
/// or the definition is stopped (`None`). Only the leader writes it; the others wait
/// for it.
async fn install(
    deps: &Dependencies,
    origin: &Origin,
    stop: &watch::Receiver<bool>,
    def: &CompiledDefinition,
) -> Option<Installed> {
    until_ready(deps, origin, stop, || async {
        let installer = if deps.leadership.now() {
            crate::crd::Installer::Apply
        } else {
            crate::crd::Installer::AwaitLeader
        };
        let webhook = deps.webhook.as_ref().map(|w| w.borrow().clone());
        match crate::crd::install(&deps.client, def, webhook.as_ref(), installer).await {
            Ok(recorded) => Ok(Installed {
                refused: None,
                recorded,
            }),
            Err(e @ crate::crd::InstallError::Breaking { .. }) => Ok(Installed {
                refused: Some(e.to_string()),
                recorded: Vec::new(),
            }),
            Err(e @ crate::crd::InstallError::NotOurs { .. }) => Err(("CrdNotOurs", e.to_string())),
            Err(e) => Err(("Waiting", e.to_string())),
        }
    })
    .await
}

/// Stores the definition's objects anew when its storage version changed: one replica
/// does it, the leader or the next one.
fn migrate(deps: &Dependencies, origin: &Origin, def: &Arc<CompiledDefinition>) -> crate::tasks::Owned<()> {
    let (client, reports, origin, def) = (deps.client.clone(), deps.reports.clone(), origin.clone(), def.clone());
    let (method, leadership) = (deps.storage_migration, deps.leadership.clone());
    crate::tasks::Owned::spawn(async move {
        leadership.wait().await;
        let progress = |p| reports.send(&origin, Report::Migration(p));
        if let Err(e) = crate::migrate::run(&client, &def, method, progress).await {
            let message = e.to_string();
            reports.send(&origin, Report::MigrationFailed { message });
        }
    })
}

/// What a definition's status says of its controller, as last reported.
#[derive(PartialEq)]
struct Seen {
    parents: usize,
    problem: Option<String>,
    decorated: Option<reconcile::Decorated>,
}

/// Reports the controller's state on the definition's status whenever it changes, and
/// tidies the controller's ledger, until the definition is stopped.
async fn keep_reporting(
    deps: &Dependencies,
    origin: &Origin,
    ctx: &reconcile::Context,
    refused: Option<String>,
    stop: &watch::Receiver<bool>,
) {
    let mut watched: Vec<String> = ctx.watched().map(|w| w.gvk.to_string()).collect();
    watched.sort();
    watched.dedup();
    let label = crate::metrics::definition(&ctx.def.name);
    let mut last = None;
    loop {
        let now = Seen {
            parents: ctx.parent_count(),
            problem: ctx.problem(),
            decorated: ctx.decorated(),
        };
        if last.as_ref() != Some(&now) {
            if let Some(d) = &now.decorated {
                deps.metrics
                    .decorated_parents
                    .get_or_create(&label)
                    .set(d.parents as i64);
                deps.metrics
                    .decorated_ready_parents
                    .get_or_create(&label)
                    .set(d.ready as i64);
            }
            let report = Report::Serving {
                watched: watched.clone(),
                parents: now.decorated.as_ref().map_or(now.parents, |d| d.parents),
                problem: now.problem.clone(),
                decorated: now.decorated.clone(),
                refused: refused.clone(),
            };
            deps.reports.send(origin, report);
            last = Some(now);
        }
        if !pause(stop, Duration::from_secs(5)).await {
            break;
        }
        ctx.sweep();
        reconcile::strays(ctx).await;
    }
}
