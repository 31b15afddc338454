//! Shared watches with owners: one reflector per kind and selection, shared by every
//! definition that uses it. A definition holds a [`WatchLease`] for each kind it
//! watches; when the last lease of a kind is dropped, its task stops and its store is
//! freed. kube's shared reflectors do not take DynamicObject, so each watch keeps its own
//! store and fans its events out to subscribers.

mod backoff;
mod catch_up;
#[cfg(feature = "fault-injection")]
pub mod faults;
#[cfg(test)]
mod hand_fed;
mod index;
mod shared;
mod stored;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::api::DynamicObject;
use kube::runtime::WatchStreamExt;

use kube::runtime::watcher::{self, Event, watcher};

pub use backoff::WatchFailure;
pub use catch_up::CatchUp;
#[cfg(test)]
pub(crate) use hand_fed::HandFed;
pub use shared::SharedWatch;
pub use stored::Stored;

use crate::discovery::{self, DiscoveryError};
use crate::gvk::Gvk;
use crate::labels;
use crate::metrics::Metrics;

/// Which objects of a kind a watch sees.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum WatchSelection {
    /// Every object: parents and lookups.
    All,
    /// Only objects Stencil manages (`app.kubernetes.io/managed-by=stencil`): children.
    Managed,
    /// Only objects a label selector (in query form) matches, selected by the API server:
    /// a decorator's parents.
    Labels(String),
}

/// Why a watch could not be had.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The kind is not served (yet).
    #[error(transparent)]
    NotServed(#[from] DiscoveryError),
    /// The API server refused to list or watch the kind.
    #[error("forbidden to list and watch {plural}: add the rule {rule}")]
    Forbidden {
        /// The kind's plural.
        plural: String,
        /// The RBAC rule to add.
        rule: String,
        /// The API server's answer.
        #[source]
        source: Arc<watcher::Error>,
    },
    /// The first list failed for another reason.
    #[error("watching {plural}: {source}")]
    Failed {
        /// The kind's plural.
        plural: String,
        /// What failed.
        #[source]
        source: Arc<watcher::Error>,
    },
    /// The first list did not arrive in time; it goes on, and the next attempt waits for it.
    #[error(
        "the first list of {kind} has not completed after {seconds} s; it goes on and the definition serves once it completes"
    )]
    Timeout {
        /// The kind.
        kind: String,
        /// How long Stencil waited.
        seconds: u64,
    },
}

impl WatchError {
    /// The reason a status gives for this error.
    pub fn reason(&self) -> &'static str {
        match self {
            WatchError::NotServed(_) => "NotServed",
            WatchError::Forbidden { .. } => "Forbidden",
            WatchError::Failed { .. } => "WatchFailed",
            WatchError::Timeout { .. } => "Listing",
        }
    }
}

type Key = (Gvk, WatchSelection);

/// A running watch and the task that feeds it; dropping the last lease drops this.
struct Running {
    key: Key,
    shared: Arc<SharedWatch>,
    task: tokio::task::AbortHandle,
    registry: Weak<RunningWatches>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
        if let Some(registry) = self.registry.upgrade() {
            let mut running = registry.running.lock().expect("watches lock");
            // A new watch of the same key may have replaced this one already.
            if running.get(&self.key).is_some_and(|w| w.strong_count() == 0) {
                running.remove(&self.key);
            }
            registry.metrics.watched_kinds.set(running.len() as i64);
        }
        tracing::debug!(kind = %self.key.0, "watch stopped: no definition uses it");
    }
}

/// One owner's hold on a shared watch; the watch runs while any lease is alive.
#[derive(Clone)]
pub struct WatchLease {
    running: Arc<Running>,
}

impl std::ops::Deref for WatchLease {
    type Target = SharedWatch;

    fn deref(&self) -> &SharedWatch {
        &self.running.shared
    }
}

struct RunningWatches {
    running: Mutex<HashMap<Key, Weak<Running>>>,
    metrics: Arc<Metrics>,
}

/// All watches of the process, keyed by group, version, kind and selection.
pub struct Watches {
    client: Client,
    namespaces: Vec<String>,
    sync_timeout: Duration,
    registry: Arc<RunningWatches>,
}

impl Watches {
    /// An empty set; `namespaces` restricts namespaced kinds (empty: every namespace), and
    /// a watch whose first list takes longer than `sync_timeout` is reported, not awaited.
    pub fn new(client: Client, namespaces: Vec<String>, sync_timeout: Duration, metrics: Arc<Metrics>) -> Self {
        Watches {
            client,
            namespaces,
            sync_timeout,
            registry: Arc::new(RunningWatches {
                running: Mutex::new(HashMap::new()),
                metrics,
            }),
        }
    }

    /// The namespaces namespaced kinds are watched in; empty: every namespace.
    pub fn namespaces(&self) -> &[String] {
        &self.namespaces
    }

    /// A lease on the watch of a kind for `owner`, started on first use. It returns once
    /// the store holds its first list, or with the reason it cannot: the kind is not
    /// served, the list is forbidden, or it did not arrive within the sync timeout.
    ///
    /// # Errors
    ///
    /// The kind is not served, listing it is forbidden, or the first list did not arrive
    /// within the sync timeout.
    pub async fn acquire(&self, gvk: &Gvk, selection: WatchSelection, owner: &str) -> Result<WatchLease, WatchError> {
        let lease = match self.running(gvk, selection.clone()) {
            Some(lease) => lease,
            None => self.start(gvk, selection).await?,
        };
        tracing::debug!(kind = %gvk, owner, "watch acquired");
        self.synced(&lease).await?;
        Ok(lease)
    }

    fn running(&self, gvk: &Gvk, selection: WatchSelection) -> Option<WatchLease> {
        let running = self.registry.running.lock().expect("watches lock");
        let r = running.get(&(gvk.clone(), selection))?.upgrade()?;
        Some(WatchLease { running: r })
    }

    async fn synced(&self, lease: &WatchLease) -> Result<(), WatchError> {
        let mut failures = lease.failures();
        let failed = async {
            loop {
                if let Some(f) = failures.borrow_and_update().clone().filter(WatchFailure::current) {
                    return f;
                }
                if failures.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::select! {
            biased;
            _ = lease.synced() => Ok(()),
            f = failed => Err(f.to_error()),
            _ = tokio::time::sleep(self.sync_timeout) => {
                keep_listing(lease.clone());
                Err(WatchError::Timeout {
                    kind: lease.gvk.to_string(),
                    seconds: self.sync_timeout.as_secs(),
                })
            }
        }
    }

    async fn start(&self, gvk: &Gvk, selection: WatchSelection) -> Result<WatchLease, WatchError> {
        let resolved = discovery::resolve(&self.client, gvk).await?;
        let key = (gvk.clone(), selection.clone());
        let mut running = self.registry.running.lock().expect("watches lock");
        // Another caller may have started it while discovery ran.
        if let Some(r) = running.get(&key).and_then(Weak::upgrade) {
            return Ok(WatchLease { running: r });
        }
        // One namespace is watched there alone (least privilege); several share one
        // cluster-wide watch whose events are filtered (`stencil rbac` grants it).
        let namespace = match (resolved.namespaced, self.namespaces.as_slice()) {
            (true, [only]) => Some(only.clone()),
            _ => None,
        };
        let shared = Arc::new(SharedWatch::new(gvk.clone(), resolved, namespace));
        let task = tokio::spawn(feed(
            self.stream(&shared, &selection),
            shared.clone(),
            self.namespaces.clone(),
        ));
        let lease = WatchLease {
            running: Arc::new(Running {
                key: key.clone(),
                shared,
                task: task.abort_handle(),
                registry: Arc::downgrade(&self.registry),
            }),
        };
        running.insert(key, Arc::downgrade(&lease.running));
        self.registry.metrics.watched_kinds.set(running.len() as i64);
        Ok(lease)
    }

    fn stream(
        &self,
        shared: &SharedWatch,
        selection: &WatchSelection,
    ) -> futures::stream::BoxStream<'static, Result<Event<DynamicObject>, watcher::Error>> {
        let base = watcher::Config::default().page_size(LIST_PAGE);
        let config = match selection {
            WatchSelection::All => base,
            WatchSelection::Managed => base.labels(&format!("{}={}", labels::MANAGED_BY, labels::MANAGED_BY_VALUE)),
            WatchSelection::Labels(query) => base.labels(query),
        };
        #[cfg(feature = "fault-injection")]
        let selector = config.label_selector.clone();
        let events = watcher(shared.api(self.client.clone()), config)
            .backoff(backoff::RetryBackoff::new())
            .boxed();
        #[cfg(feature = "fault-injection")]
        let events = {
            let events = faults::inject(events, faults::for_kind(&shared.gvk.kind));
            match faults::stale_version(&shared.gvk.kind) {
                Some(version) => faults::stale_first_list(
                    events,
                    faults::stale_list(shared, self.client.clone(), selector, version),
                    shared.gvk.kind.clone(),
                ),
                None => events,
            }
        };
        events
    }
}

/// Objects per page of a list. A page is parsed whole before its objects are stored
/// compact, so it sets the transient peak of a (re)list; kube's default is 500.
const LIST_PAGE: u32 = 100;

/// How long a watch whose first list outlasted the sync timeout is kept after the list
/// completes or fails, for the caller's next attempt (a few seconds later) to take over.
const LINGER: Duration = Duration::from_secs(30);

/// Holds a watch whose first list is slow until the list completes or fails, and
/// [`LINGER`] after, so the caller's next attempt finds it running (its store filled or
/// filling) instead of starting a new LIST from scratch, which a list longer than the
/// sync timeout would never finish.
fn keep_listing(lease: WatchLease) {
    tokio::spawn(async move {
        let mut failures = lease.failures();
        tokio::select! {
            _ = lease.synced() => {}
            _ = failures.wait_for(Option::is_some) => {}
        }
        tokio::time::sleep(LINGER).await;
    });
}

/// Feeds one watch from its stream until aborted.
async fn feed(
    mut events: futures::stream::BoxStream<'static, Result<Event<DynamicObject>, watcher::Error>>,
    shared: Arc<SharedWatch>,
    namespaces: Vec<String>,
) {
    let keep: Vec<String> = if shared.resolved.namespaced {
        namespaces
    } else {
        Vec::new()
    };
    let in_scope =
        |o: &DynamicObject| keep.is_empty() || o.metadata.namespace.as_ref().is_some_and(|ns| keep.contains(ns));
    let types = kube::core::TypeMeta {
        api_version: shared.resolved.resource.api_version.clone(),
        kind: shared.resolved.resource.kind.clone(),
    };
    while let Some(event) = events.next().await {
        // Items of a list response carry no apiVersion and kind; every stored object does.
        // Managed fields are dropped: nothing reads them, and they are often half of an
        // object's size, so they would be most of the stores' memory.
        let event = event.map(|e| {
            e.modify(|o| {
                if o.types.is_none() {
                    o.types = Some(types.clone());
                }
                o.metadata.managed_fields = None;
            })
        });
        match event {
            Ok(Event::Apply(o) | Event::InitApply(o) | Event::Delete(o)) if !in_scope(&o) => {}
            Ok(event) => {
                shared.observe(event);
            }
            Err(e) => {
                tracing::warn!(kind = %shared.gvk, error = %e, "watch failed; retrying");
                shared.failed(WatchFailure::new(e, &shared.resolved.resource));
            }
        }
    }
}
