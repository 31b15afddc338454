//! Everything one definition's controller shares between its passes: the client, the
//! definition (and the rollout between its revisions), the watches, the metrics, the
//! events, and the [`Ledger`] of what is kept about each parent. Its part in a rollout
//! is in [`rollout`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::{Api, DynamicObject, ObjectMeta};
use kube::runtime::events::{EventType, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::{Client, Resource as _};
use serde_json::Value;

use super::events::Events;
use k8s_openapi::api::core::v1::ObjectReference;

use super::ledger::Ledger;
use super::revision_split::Split;
use crate::compile::CompiledDefinition;
use crate::gvk::{Gvk, Scopes};
use crate::labels;
use crate::metrics::{self, Metrics};
use crate::object_key::ObjectKey;
use crate::watch::{SharedWatch, WatchLease};

mod rollout;

/// Default seconds between resyncs when a definition sets none.
const DEFAULT_RESYNC_SECONDS: u32 = 300;

/// A parent's key in the per-parent maps.
pub(super) use super::ledger::ParentKey;

/// Everything one definition's controller needs.
pub struct Context {
    /// The API client.
    pub client: Client,
    /// The compiled definition.
    pub def: Arc<CompiledDefinition>,
    /// Where counts go.
    pub metrics: Arc<Metrics>,
    /// The parent kind's watch.
    pub parents: WatchLease,
    /// Managed watches of every kind the children have (now or before a definition change).
    pub children: Vec<WatchLease>,
    /// Watches of the lookup kinds.
    pub lookups: Vec<WatchLease>,
    /// Which kinds are namespaced, from discovery.
    pub scopes: Arc<Scopes>,
    /// The namespaces this Stencil serves (`--namespace`); empty: every namespace.
    pub served: Vec<String>,
    /// Where events on parents go.
    pub(super) events: Events,
    /// Everything kept about each parent between passes.
    pub(super) ledger: Mutex<Ledger>,
    /// The `stencil.dev/definition` label of this definition's children.
    definition_label: String,
    /// This member's name in a sharded ring: it reconciles only the parents labelled
    /// with it. None when Stencil runs unsharded.
    shard: Option<Arc<str>>,
    /// The rollout between the definition's revisions, when Stencil keeps them.
    pub(super) rollout: Option<Arc<Split>>,
    /// Parents to look at again, outside the watches (a rollout moved them).
    nudges: futures::channel::mpsc::UnboundedSender<ParentKey>,
    /// Where the controller takes the nudges from, once.
    nudged: Mutex<Option<futures::channel::mpsc::UnboundedReceiver<ParentKey>>>,
}

impl Context {
    /// A context for a definition whose watches are resolved.
    pub fn new(
        client: Client,
        def: Arc<CompiledDefinition>,
        metrics: Arc<Metrics>,
        parents: WatchLease,
        children: Vec<WatchLease>,
        lookups: Vec<WatchLease>,
    ) -> Self {
        let mut scopes = Scopes::default();
        for w in children.iter().chain(&lookups).chain(std::iter::once(&parents)) {
            scopes.insert(&w.gvk.group, &w.gvk.kind, w.resolved.namespaced);
        }
        let events = Events::new(
            client.clone(),
            Reporter {
                controller: labels::FIELD_MANAGER.into(),
                instance: None,
            },
        );
        let (nudges, nudged) = futures::channel::mpsc::unbounded();
        Context {
            client,
            metrics,
            parents,
            children,
            lookups,
            scopes: Arc::new(scopes),
            served: Vec::new(),
            events,
            ledger: Mutex::new(Ledger::default()),
            definition_label: crate::labels::label_value(&def.name),
            def,
            shard: None,
            rollout: None,
            nudges,
            nudged: Mutex::new(Some(nudged)),
        }
    }

    /// Asks for a pass of `parent`.
    pub(super) fn nudge(&self, parent: ParentKey) {
        let _ = self.nudges.unbounded_send(parent);
    }

    /// The nudges, for the controller to take once.
    pub(super) fn take_nudges(&self) -> Option<futures::channel::mpsc::UnboundedReceiver<ParentKey>> {
        self.nudged.lock().expect("nudges").take()
    }

    /// The same context in a Stencil that serves only `namespaces` (empty: every one).
    pub fn serving(self, namespaces: &[String]) -> Self {
        Context {
            served: namespaces.to_vec(),
            ..self
        }
    }

    /// This context with its events reported as coming from `instance` (the Pod's name).
    pub fn reporting_as(self, instance: Option<String>) -> Self {
        let reporter = Reporter {
            controller: labels::FIELD_MANAGER.into(),
            instance,
        };
        Context {
            events: Events::new(self.client.clone(), reporter),
            ..self
        }
    }

    /// The same context in member `member` of a sharded ring (none: unsharded).
    /// A decorator is never sharded: the leader serves it whole.
    pub fn sharded_as(self, member: Option<&str>) -> Self {
        let shard = member.filter(|_| !self.def.spec.is_decorator()).map(Arc::from);
        Context { shard, ..self }
    }

    /// The `stencil.dev/definition` label of this definition's children.
    pub(super) fn definition_label(&self) -> &str {
        &self.definition_label
    }

    /// This member's name when its parents are a share of a sharded ring.
    pub(super) fn shard(&self) -> Option<&str> {
        self.shard.as_deref()
    }

    /// Every watch this controller holds: parents, children, lookups.
    pub fn watched(&self) -> impl Iterator<Item = &SharedWatch> {
        std::iter::once(&self.parents)
            .chain(&self.children)
            .chain(&self.lookups)
            .map(|w| &**w)
    }

    /// Why this definition's controller cannot do its job, if it cannot: a failing watch
    /// or a refused request.
    pub fn problem(&self) -> Option<String> {
        self.watched().filter_map(SharedWatch::error).next().or_else(|| {
            let ledger = self.ledger();
            let (first, n) = ledger.refusals()?;
            Some(match n {
                1 => first.to_string(),
                n => format!("{first} (and {} more parents)", n - 1),
            })
        })
    }

    /// Drops the state of every parent that is no longer in the store: a deletion that
    /// happened while the watch was relisting is never reported one by one.
    pub fn sweep(&self) {
        let mut ledger = self.ledger();
        for parent in ledger.parents() {
            if !self.parents.holds(&parent) {
                ledger.forget(&parent);
            }
        }
    }

    /// The parent `key` names, as the watch holds it now.
    pub fn parent(&self, key: &ParentKey) -> Option<Arc<DynamicObject>> {
        self.parents.get(key)
    }

    /// How many parents the watch holds now.
    pub fn parent_count(&self) -> usize {
        self.parents.len()
    }

    /// The UIDs of the parents the watch holds now.
    pub fn parent_uids(&self) -> std::collections::HashSet<String> {
        self.parents.scan_metadata(|m| m.uid.clone()).into_iter().collect()
    }

    /// The ledger of this controller's parents, locked.
    pub(super) fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger.lock().expect("ledger lock")
    }

    /// Notes a reconcile request for a parent that exists (for the queue-duration
    /// metric); a request for a parent that is gone is dropped by the controller, so it
    /// is not recorded either.
    pub(super) fn requested(&self, parent: &ParentKey) {
        self.metrics
            .workqueue_adds_total
            .get_or_create(&metrics::queue(&self.def.name))
            .inc();
        if self.parents.holds(parent) {
            self.ledger().requested(parent);
        }
    }

    /// Whether the event of `object` (a child or the parent itself) is the echo of
    /// `parent`'s own last write, which tells its pass nothing new.
    pub(super) fn is_echo(&self, parent: &ParentKey, object: &ObjectMeta) -> bool {
        match (&object.uid, &object.resource_version) {
            (Some(uid), Some(version)) => self.ledger().echo(parent, uid, version),
            _ => false,
        }
    }

    /// How many parents have pending requests, backoff counts and lookup reads (tests).
    #[cfg(test)]
    pub(super) fn tracked(&self) -> super::ledger::Tracked {
        self.ledger().tracked()
    }

    /// Drops everything kept about a parent that is gone.
    pub(super) fn forget(&self, parent: &ParentKey) {
        self.ledger().forget(parent);
    }

    /// Whether this definition decorates a parent with this metadata now (always, for a
    /// composite one).
    pub(super) fn decorates(&self, parent: &ObjectMeta) -> bool {
        self.def.decorates(parent.labels.as_ref(), parent.annotations.as_ref())
    }

    pub(super) fn resync(&self) -> Duration {
        Duration::from_secs(u64::from(
            self.def.spec.resync_seconds.unwrap_or(DEFAULT_RESYNC_SECONDS),
        ))
    }

    pub(super) fn parent_key(&self, parent: &DynamicObject) -> ParentKey {
        ObjectRef::from_obj_with(parent, self.parents.resolved.resource.clone())
    }

    /// The watch of a child kind, matched by group and kind.
    pub(super) fn child_watch(&self, api_version: &str, kind: &str) -> Option<&WatchLease> {
        let gvk = Gvk::parse(api_version, kind).ok()?;
        self.children
            .iter()
            .find(|w| w.gvk.group == gvk.group && w.gvk.kind == gvk.kind)
    }

    /// The watch of a lookup kind, matched by group, version and kind.
    pub(super) fn lookup_watch(&self, gvk: &Gvk) -> Option<&WatchLease> {
        self.lookups.iter().find(|w| w.gvk == *gvk)
    }

    /// The API of a live child, when its kind is watched.
    pub(super) fn child_api(&self, child: &DynamicObject) -> Option<Api<DynamicObject>> {
        let t = child.types.as_ref()?;
        let ar = &self.child_watch(&t.api_version, &t.kind)?.resolved.resource;
        Some(crate::discovery::api(
            &self.client,
            child.metadata.namespace.as_deref(),
            ar,
        ))
    }

    pub(super) fn parent_api(&self, parent: &DynamicObject) -> Api<DynamicObject> {
        let ar = &self.parents.resolved.resource;
        crate::discovery::api(&self.client, parent.metadata.namespace.as_deref(), ar)
    }

    /// Publishes an event on the OperatorDefinition resource this controller serves (a
    /// definition from a file has none to carry it: its log says the same).
    pub async fn definition_event(&self, type_: EventType, reason: &str, note: String) {
        let reference = ObjectReference {
            api_version: Some("stencil.dev/v1alpha1".into()),
            kind: Some("OperatorDefinition".into()),
            name: Some(self.def.name.clone()),
            ..ObjectReference::default()
        };
        if let Err(e) = self.events.publish(&reference, type_, reason, note).await {
            tracing::debug!(error = %e, "could not publish event");
        }
    }

    /// Publishes an event on the parent; a failure to publish is only logged.
    pub(super) async fn event(&self, parent: &DynamicObject, type_: EventType, reason: &str, note: String) {
        let reference = parent.object_ref(&self.parents.resolved.resource);
        if let Err(e) = self.events.publish(&reference, type_, reason, note).await {
            tracing::debug!(error = %e, "could not publish event");
        }
    }

    /// Every live child of a parent from this definition, found by the parent-uid label
    /// (several decorators of one object each see only their own), and the children its
    /// passes created that the watches have not shown yet.
    pub(super) fn observed(&self, uid: &str) -> Vec<Arc<DynamicObject>> {
        let mut children: Vec<Arc<DynamicObject>> = self
            .children
            .iter()
            .flat_map(|w| w.children_of(&self.definition_label, uid))
            .collect();
        self.ledger().unseen.add_to(uid, &mut children);
        children
    }

    /// The UIDs of every parent that this definition's children name.
    pub(super) fn parents_named(&self) -> std::collections::BTreeSet<String> {
        self.children
            .iter()
            .flat_map(|w| w.parent_uids(&self.definition_label))
            .collect()
    }
}

fn uid(parent: &DynamicObject) -> &str {
    parent.metadata.uid.as_deref().unwrap_or_default()
}

/// `Kind namespace/name` of an object as JSON, for messages.
pub(super) fn describe(obj: &Value) -> String {
    ObjectKey::of_value(obj).map_or_else(|| "object".to_string(), |k| k.to_string())
}

/// `Kind namespace/name` of a stored object, for messages.
pub(super) fn describe_object(obj: &DynamicObject) -> String {
    ObjectKey::of_object(obj).map_or_else(|| "object".to_string(), |k| k.to_string())
}
