//! The sharder, run by the leader of a sharded ring. It follows the membership Leases
//! and brings every parent's `stencil.dev/shard` label in line with the ready members
//! ([`crate::shard::plan`]):
//! - a parent without the label is assigned at once: a metadata watch per parent kind
//!   selects only those (`!stencil.dev/shard`), so its cost does not grow with the
//!   parents already assigned;
//! - when the ready members change, and every resync period, a full sync
//!   ([`super::sync`]) lists every parent, beside the loop, to drain parents from the
//!   member that no longer owns them and move those of members that are gone;
//! - a member whose Lease went unrenewed for a Lease duration (by this process's clock,
//!   once every renewal already received is taken in) has its Lease deleted under a
//!   resourceVersion precondition: a member that renewed meanwhile keeps it, and one
//!   that did not can never renew it again. Only then are its parents moved.
//!
//! Every label change carries the parent's resourceVersion: it applies to the placement
//! the plan was made from, or not at all (the next event or list plans again).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, PartialObjectMeta, Preconditions};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use tokio::sync::mpsc;

use super::Kinds;
use super::placer::{PLACING, Placer};
use super::sync::FullSync;
use crate::discovery::{self, Resolved};
use crate::gvk::Gvk;
use crate::labels;
use crate::metrics::{MemberLabel, Metrics};
use crate::shard::{Leases, MemberState, Ring};
use crate::tasks::Owned;

/// How the sharder is set up.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Where the membership Leases are.
    pub namespace: String,
    /// The ring's name (`stencil.dev/ring` on each membership Lease).
    pub ring: String,
    /// How long a membership Lease is valid without renewal.
    pub lease_duration: Duration,
    /// How often every parent is looked at again.
    pub resync: Duration,
    /// The namespaces served; empty: every one.
    pub namespaces: Vec<String>,
}

/// Unassigned parents found and not yet being placed: a burst waits in its watch beyond
/// these, not in memory.
const FOUND: usize = 256;

/// A parent without a member, found by a kind's watch.
struct Found {
    resolved: Arc<Resolved>,
    meta: PartialObjectMeta<DynamicObject>,
}

/// Runs the sharder until dropped.
pub async fn run(client: Client, settings: Settings, kinds: Arc<Kinds>, metrics: Arc<Metrics>) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), &settings.namespace);
    let selector = format!("{}={}", labels::RING, settings.ring);
    let mut lease_events = watcher(leases, watcher::Config::default().labels(&selector))
        .default_backoff()
        .boxed();
    let (found_tx, mut found) = mpsc::channel::<Found>(FOUND);
    let mut placing = FuturesUnordered::new();
    // At most one full sync at a time; `sync_again`: the ring or the kinds changed while
    // it ran, so another follows it.
    let mut syncing = FuturesUnordered::new();
    let mut sync_again = false;
    let mut kinds = kinds.subscribe();
    let mut resync = tokio::time::interval(settings.resync);
    let mut state = Following {
        relist: None,
        synced: false,
        ready: Vec::new(),
        watching: HashMap::new(),
        found_tx,
    };
    let placer = Arc::new(Placer {
        client: client.clone(),
        namespaces: settings.namespaces.clone(),
    });
    let mut sharder = Sharder {
        client,
        placer,
        leases: Leases::new(settings.lease_duration),
        settings,
        versions: HashMap::new(),
        resolved: BTreeMap::new(),
        metrics,
    };
    loop {
        let wake = sharder.leases.next_expiry(Instant::now());
        let expiry = async {
            match wake {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        let full = tokio::select! {
            Some(event) = lease_events.next() => state.lease_event(&mut sharder, event),
            Some(Found { resolved, meta }) = found.recv(), if state.synced && placing.len() < PLACING => {
                let ring = sharder.leases.ring(Instant::now());
                let placer = sharder.placer.clone();
                placing.push(async move { placer.place(&resolved, &meta, &ring).await }.boxed());
                false
            }
            Some(_) = placing.next(), if !placing.is_empty() => false,
            Some(()) = syncing.next(), if !syncing.is_empty() => std::mem::take(&mut sync_again),
            changed = kinds.changed() => {
                if changed.is_err() {
                    return;
                }
                let now = kinds.borrow_and_update().clone();
                state.watching.retain(|gvk, _| now.contains(gvk));
                sharder.resolved.retain(|gvk, _| now.contains(gvk));
                true
            }
            // A resync while a sync runs is that sync.
            _ = resync.tick() => syncing.is_empty(),
            () = expiry => false,
        };
        // A long fence or discovery holds this loop up: the renewals received meanwhile
        // are taken in before any member is judged, or members that renewed would look
        // expired.
        let full = full | state.received_lease_events(&mut sharder, &mut lease_events);
        if !state.synced {
            continue;
        }
        let kinds_now = kinds.borrow().clone();
        if let Some(ring) = state.settle(&mut sharder, full, &kinds_now).await {
            if syncing.is_empty() {
                syncing.push(sharder.full_sync().run(ring).boxed());
            } else {
                sync_again = true;
            }
        }
    }
}

/// What the sharder's loop follows between its wake-ups.
struct Following {
    /// The members seen in a relist of the Leases, while it runs.
    relist: Option<BTreeSet<String>>,
    /// The Leases have been listed once: the ring is known. `ready`: its ready members.
    synced: bool,
    ready: Vec<String>,
    /// The watch of unassigned parents of each kind, and where they send what they find.
    watching: HashMap<Gvk, Owned<()>>,
    found_tx: mpsc::Sender<Found>,
}

impl Following {
    /// Takes a membership Lease event; returns whether every parent is to be looked at
    /// (a relist ended).
    fn lease_event(&mut self, sharder: &mut Sharder, event: Result<Event<Lease>, watcher::Error>) -> bool {
        match event {
            Ok(Event::Init) => self.relist = Some(BTreeSet::new()),
            Ok(Event::InitApply(lease)) => {
                if let (Some(seen), Some(name)) = (self.relist.as_mut(), lease.metadata.name.clone()) {
                    seen.insert(name);
                }
                sharder.observe(&lease);
            }
            Ok(Event::InitDone) => {
                if let Some(seen) = self.relist.take() {
                    let gone: Vec<String> = sharder
                        .versions
                        .keys()
                        .filter(|m| !seen.contains(*m))
                        .cloned()
                        .collect();
                    for member in gone {
                        sharder.forget(&member);
                    }
                }
                self.synced = true;
                return true;
            }
            Ok(Event::Apply(lease)) => sharder.observe(&lease),
            Ok(Event::Delete(lease)) => {
                if let Some(name) = lease.metadata.name.as_deref() {
                    sharder.forget(name);
                }
            }
            Err(e) => tracing::debug!(error = %e, "watching the membership Leases"),
        }
        false
    }

    /// Takes every membership Lease event already received, without waiting; returns
    /// whether every parent is to be looked at.
    fn received_lease_events<S>(&mut self, sharder: &mut Sharder, events: &mut S) -> bool
    where
        S: futures::Stream<Item = Result<Event<Lease>, watcher::Error>> + Unpin,
    {
        let mut full = false;
        while let Some(Some(event)) = events.next().now_or_never() {
            full |= self.lease_event(sharder, event);
        }
        full
    }

    /// After a wake-up: fences out expired members and, when the ring changed or `full`
    /// asks, watches every kind's unassigned parents and returns the ring to bring every
    /// parent in line with.
    async fn settle(&mut self, sharder: &mut Sharder, full: bool, kinds: &BTreeSet<Gvk>) -> Option<Ring> {
        sharder.fence_out_expired().await;
        let ring = sharder.leases.ring(Instant::now());
        let now_ready: Vec<String> = ring.ready().map(str::to_string).collect();
        let changed = now_ready != self.ready;
        if changed {
            tracing::info!(members = ?now_ready, "the ring changed");
            sharder.metrics.shard_members.set(now_ready.len() as i64);
            self.ready = now_ready;
        }
        if !full && !changed {
            return None;
        }
        sharder.resolve(kinds).await;
        for (gvk, resolved) in &sharder.resolved {
            let namespace = sharder.placer.scope(resolved).map(str::to_string);
            self.watching.entry(gvk.clone()).or_insert_with(|| {
                Owned::spawn(unassigned(
                    sharder.client.clone(),
                    resolved.clone(),
                    namespace,
                    self.found_tx.clone(),
                ))
            });
        }
        Some(ring)
    }
}

struct Sharder {
    client: Client,
    placer: Arc<Placer>,
    settings: Settings,
    leases: Leases,
    /// Each member's Lease resourceVersion, for the precondition of its deletion.
    versions: HashMap<String, String>,
    resolved: BTreeMap<Gvk, Arc<Resolved>>,
    metrics: Arc<Metrics>,
}

impl Sharder {
    fn observe(&mut self, lease: &Lease) {
        let Some(name) = lease.metadata.name.as_deref() else {
            return;
        };
        let spec = lease.spec.as_ref();
        let holder = spec.and_then(|s| s.holder_identity.as_deref());
        let renewed = spec
            .and_then(|s| s.renew_time.as_ref())
            .map(|t| t.0.to_string())
            .unwrap_or_default();
        self.leases.observe(name, holder, &renewed, Instant::now());
        if let Some(rv) = &lease.metadata.resource_version {
            self.versions.insert(name.to_string(), rv.clone());
        }
    }

    fn forget(&mut self, member: &str) {
        self.leases.remove(member);
        self.versions.remove(member);
        self.metrics.shard_parents.remove(&MemberLabel {
            member: member.to_string(),
        });
    }

    /// Deletes the Lease of every member that let it expire, unless it was renewed since
    /// this process last saw it (the resourceVersion precondition), and the Leases left
    /// without a holder by members that are gone for good.
    async fn fence_out_expired(&mut self) {
        let now = Instant::now();
        let ring = self.leases.ring(now);
        let mut expired: Vec<String> = self
            .versions
            .keys()
            .filter(|m| ring.state(m) == Some(MemberState::Expired))
            .cloned()
            .collect();
        expired.extend(self.leases.departed(now));
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &self.settings.namespace);
        for member in expired {
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    resource_version: self.versions.get(&member).cloned(),
                    uid: None,
                }),
                ..DeleteParams::default()
            };
            match api.delete(&member, &params).await {
                Ok(_) if ring.state(&member) == Some(MemberState::Expired) => {
                    tracing::warn!(%member, "the member stopped renewing its Lease; its parents move to the others");
                    self.forget(&member);
                }
                Ok(_) => {
                    tracing::info!(%member, "removed the Lease a departed member released");
                    self.forget(&member);
                }
                Err(kube::Error::Api(s)) if s.code == 404 => self.forget(&member),
                Err(e) => tracing::debug!(%member, error = %e, "could not remove an expired member's Lease"),
            }
        }
    }

    async fn resolve(&mut self, kinds: &BTreeSet<Gvk>) {
        for gvk in kinds {
            if self.resolved.contains_key(gvk) {
                continue;
            }
            match discovery::resolve(&self.client, gvk).await {
                Ok(r) => {
                    self.resolved.insert(gvk.clone(), Arc::new(r));
                }
                Err(e) => tracing::debug!(kind = %gvk, error = %e, "not served yet; assigned once it is"),
            }
        }
    }

    /// A full sync of every kind resolved, to run beside the loop.
    fn full_sync(&self) -> FullSync {
        FullSync {
            placer: self.placer.clone(),
            kinds: self.resolved.values().cloned().collect(),
            metrics: self.metrics.clone(),
        }
    }
}

/// Sends every parent of a kind that no member has, in `namespace` or everywhere.
async fn unassigned(client: Client, resolved: Arc<Resolved>, namespace: Option<String>, found: mpsc::Sender<Found>) {
    let api: Api<PartialObjectMeta<DynamicObject>> = match &namespace {
        Some(ns) => Api::namespaced_with(client, ns, &resolved.resource),
        None => Api::all_with(client, &resolved.resource),
    };
    let config = watcher::Config::default().labels(&format!("!{}", labels::SHARD));
    let mut events = watcher(api, config).default_backoff().boxed();
    while let Some(event) = events.next().await {
        match event {
            Ok(Event::Apply(meta) | Event::InitApply(meta)) => {
                if found
                    .send(Found {
                        resolved: resolved.clone(),
                        meta,
                    })
                    .await
                    .is_err()
                {
                    return;
                }
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(kind = %resolved.resource.kind, error = %e, "watching unassigned parents"),
        }
    }
}
