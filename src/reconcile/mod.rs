//! The controller of one definition: a thin shell around the pure renderer. For each
//! parent, in order: finalize or ensure the finalizer, render, apply, prune, write status.

mod apply;
mod collect;
pub mod diff;
mod finalize;
mod prune;
pub use finalize::release;
mod status;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::{Client, Resource, ResourceExt as _};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::compile::CompiledDefinition;
use crate::gvk::{Gvk, Scopes};
use crate::labels;
use crate::metrics::{self, METRICS};
use crate::render::{self, RenderInput};
use crate::watch::SharedWatch;

/// Children of one parent applied at once.
const APPLY_CONCURRENCY: usize = 8;

/// Default seconds between resyncs when a definition sets none.
pub const DEFAULT_RESYNC_SECONDS: u32 = 300;

/// Why a reconcile failed; it is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The API server refused or failed a request.
    #[error("{action} {object}: {source}")]
    Kube {
        /// What Stencil was doing.
        action: &'static str,
        /// The object, as `Kind namespace/name`.
        object: String,
        /// The server's answer.
        #[source]
        source: kube::Error,
    },
    /// A rendered child has a kind this controller does not watch (`apiVersion/kind`).
    #[error("child kind {0} is not watched")]
    UnknownKind(String),
    /// Children are still being deleted; not an error, a wait.
    #[error("waiting for {0}")]
    Waiting(String),
}

impl ReconcileError {
    /// True when the request never got an answer from the API server (it is down or
    /// unreachable), as opposed to an answer that refused it.
    pub fn unreachable(&self) -> bool {
        matches!(self, ReconcileError::Kube { source, .. } if !matches!(source, kube::Error::Api(_)))
    }

    /// For a request the API server refused (403): what was refused and how to allow it.
    pub fn forbidden(&self) -> Option<String> {
        let ReconcileError::Kube {
            action,
            object,
            source: kube::Error::Api(status),
        } = self
        else {
            return None;
        };
        (status.code == 403).then(|| {
            let rule = status
                .details
                .as_ref()
                .map(|d| {
                    let verb = match *action {
                        "delete" | "prune" => "delete",
                        _ => "patch",
                    };
                    crate::rbac::missing_rule(&d.group, &d.kind, verb)
                })
                .unwrap_or_default();
            format!(
                "forbidden to {action} {object}: {}; add the rule {rule}",
                status.message
            )
        })
    }
}

/// Everything one definition's controller needs.
pub struct Context {
    /// The API client.
    pub client: Client,
    /// The compiled definition.
    pub def: Arc<CompiledDefinition>,
    /// The parent kind's watch.
    pub parents: Arc<SharedWatch>,
    /// Managed watches of every kind the children have (now or before a definition change).
    pub children: Vec<Arc<SharedWatch>>,
    /// Watches of the lookup kinds.
    pub lookups: Vec<Arc<SharedWatch>>,
    /// Which kinds are namespaced, from discovery.
    pub scopes: Scopes,
    /// Event recorder.
    pub recorder: Recorder,
    failures: Mutex<HashMap<String, u32>>,
    /// The last request the API server refused, with the rule that is missing.
    forbidden: Mutex<Option<String>>,
    /// When the oldest unserved reconcile request of each parent arrived.
    pending: Mutex<HashMap<String, std::time::Instant>>,
    /// Parents that read each lookup object: `kind/namespace/name` → parent refs.
    lookup_readers: Mutex<HashMap<String, Vec<ObjectRef<DynamicObject>>>>,
}

impl Context {
    /// A context for a definition whose watches are resolved.
    pub fn new(
        client: Client,
        def: Arc<CompiledDefinition>,
        parents: Arc<SharedWatch>,
        children: Vec<Arc<SharedWatch>>,
        lookups: Vec<Arc<SharedWatch>>,
    ) -> Self {
        let mut scopes = Scopes::default();
        for w in children.iter().chain(&lookups).chain(std::iter::once(&parents)) {
            scopes.insert(&w.gvk.group, &w.gvk.kind, w.resolved.namespaced);
        }
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: labels::FIELD_MANAGER.into(),
                instance: std::env::var("POD_NAME").ok(),
            },
        );
        Context {
            client,
            def,
            parents,
            children,
            lookups,
            scopes,
            recorder,
            failures: Mutex::new(HashMap::new()),
            forbidden: Mutex::new(None),
            pending: Mutex::new(HashMap::new()),
            lookup_readers: Mutex::new(HashMap::new()),
        }
    }

    /// Why this definition's controller cannot do its job, if it cannot: a failing watch
    /// or a refused request.
    pub fn problem(&self) -> Option<String> {
        let watches = std::iter::once(&self.parents)
            .chain(&self.children)
            .chain(&self.lookups);
        watches
            .filter_map(|w| w.error())
            .next()
            .or_else(|| self.forbidden.lock().expect("forbidden lock").clone())
    }

    /// Notes a reconcile request for a parent (for the queue-duration metric).
    fn requested(&self, key: String) {
        METRICS
            .workqueue_adds_total
            .get_or_create(&metrics::queue(&self.def.name))
            .inc();
        self.pending
            .lock()
            .expect("pending lock")
            .entry(key)
            .or_insert_with(std::time::Instant::now);
    }

    fn resync(&self) -> Duration {
        Duration::from_secs(u64::from(
            self.def.spec.resync_seconds.unwrap_or(DEFAULT_RESYNC_SECONDS),
        ))
    }

    fn child_watch(&self, api_version: &str, kind: &str) -> Option<&Arc<SharedWatch>> {
        let gvk = Gvk::parse(api_version, kind).ok()?;
        self.children
            .iter()
            .find(|w| w.gvk.group == gvk.group && w.gvk.kind == gvk.kind)
    }

    /// The API of a live child, when its kind is watched.
    fn child_api(&self, child: &DynamicObject) -> Option<Api<DynamicObject>> {
        let t = child.types.as_ref()?;
        let ar = &self.child_watch(&t.api_version, &t.kind)?.resolved.resource;
        Some(match child.metadata.namespace.as_deref() {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, ar),
            None => Api::all_with(self.client.clone(), ar),
        })
    }

    fn parent_api(&self, parent: &DynamicObject) -> Api<DynamicObject> {
        let ar = &self.parents.resolved.resource;
        match parent.metadata.namespace.as_deref() {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, ar),
            None => Api::all_with(self.client.clone(), ar),
        }
    }

    /// Publishes an event on the parent; a failure to publish is only logged.
    async fn event(&self, parent: &DynamicObject, type_: EventType, reason: &str, note: String) {
        let reference = parent.object_ref(&self.parents.resolved.resource);
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note.chars().take(1000).collect()),
            action: reason.into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &reference).await {
            tracing::debug!(error = %e, "could not publish event");
        }
    }

    /// Every live child of a parent, found by the parent-uid label.
    fn observed(&self, uid: &str) -> Vec<Arc<DynamicObject>> {
        self.children.iter().flat_map(|w| w.children_of(uid)).collect()
    }
}

/// `Kind namespace/name` of an object, for messages.
fn describe(obj: &Value) -> String {
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("object");
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("?");
    match obj.pointer("/metadata/namespace").and_then(Value::as_str) {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

fn to_json(obj: &DynamicObject) -> Value {
    serde_json::to_value(obj).unwrap_or_default()
}

/// Reconciles one parent.
pub async fn reconcile(parent: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let key = parent_key(&parent);
    let name = ctx.def.name.clone();
    if let Some(since) = ctx.pending.lock().expect("pending lock").remove(&key) {
        METRICS
            .workqueue_queue_duration_seconds
            .get_or_create(&metrics::queue(&name))
            .observe(since.elapsed().as_secs_f64());
    }
    let depth = METRICS.workqueue_depth.get_or_create(&metrics::queue(&name)).clone();
    depth.inc();
    let started = std::time::Instant::now();
    let span = tracing::info_span!("reconcile", definition = %name, parent = %key);
    let result = tracing::Instrument::instrument(reconcile_inner(&parent, &ctx), span).await;
    depth.dec();
    METRICS
        .reconcile_time_seconds
        .get_or_create(&metrics::controller(&name))
        .observe(started.elapsed().as_secs_f64());
    let outcome = if result.is_ok() { "success" } else { "error" };
    METRICS
        .reconcile_total
        .get_or_create(&metrics::ResultLabels {
            controller: name.clone(),
            result: outcome.into(),
        })
        .inc();
    if result.is_err() {
        METRICS
            .reconcile_errors_total
            .get_or_create(&metrics::controller(&name))
            .inc();
    }
    match &result {
        Ok(_) => {
            ctx.failures.lock().expect("failures lock").remove(&key);
            ctx.forbidden.lock().expect("forbidden lock").take();
        }
        Err(e) => {
            if let Some(message) = e.forbidden() {
                *ctx.forbidden.lock().expect("forbidden lock") = Some(message);
            }
        }
    }
    result
}

async fn reconcile_inner(parent: &DynamicObject, ctx: &Context) -> Result<Action, ReconcileError> {
    if parent.metadata.deletion_timestamp.is_some() {
        return finalize::run(ctx, parent).await;
    }
    let parent_json = to_json(parent);
    let uid = parent.metadata.uid.clone().unwrap_or_default();
    let observed_objects = ctx.observed(&uid);
    let mut observed: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for o in &observed_objects {
        if let Some(child) = o.labels().get(labels::CHILD) {
            observed.entry(child.clone()).or_default().push(to_json(o));
        }
    }
    let lookups = match fetch_lookups(ctx, parent, &parent_json) {
        Ok(l) => l,
        Err(failure) => return render_failed(ctx, parent, &parent_json, failure).await,
    };
    let input = RenderInput {
        parent: &parent_json,
        observed: &observed,
        lookups: &lookups,
        scopes: &ctx.scopes,
    };
    let render_started = std::time::Instant::now();
    let rendered = render::render(&ctx.def, input);
    METRICS
        .template_render_seconds
        .get_or_create(&metrics::definition(&ctx.def.name))
        .observe(render_started.elapsed().as_secs_f64());
    let out = match rendered {
        Ok(out) => out,
        Err(failure) => return render_failed(ctx, parent, &parent_json, failure).await,
    };
    tracing::debug!(
        definition = %ctx.def.name,
        parent = %parent_key(parent),
        observed = observed_objects.len(),
        desired = out.children.len(),
        waiting = out.waiting.len(),
        "rendered"
    );
    // The garbage collector removes children that carry the parent's ownerReference; the
    // finalizer is needed only for the others, and to orphan children on deletion.
    let orphaning = ctx.def.spec.finalize.deletion_policy == crate::definition::DeletionPolicy::Orphan;
    if orphaning || out.children.iter().any(|c| !finalize::owned_by_parent(&c.object)) {
        finalize::ensure(ctx, parent).await?;
    }
    // Children that are rendered together do not depend on each other (dependsOn holds
    // a child back until its dependencies are ready), so they are applied concurrently.
    let mut requeue_soon = false;
    for batch in out.children.chunks(APPLY_CONCURRENCY) {
        let applies: Vec<_> = batch.iter().map(|child| apply::child(ctx, parent, child)).collect();
        for result in futures::future::join_all(applies).await {
            match result {
                Ok(soon) => requeue_soon |= soon,
                Err(e) => {
                    // The parent says why it is not Ready; the error is retried with backoff.
                    let failed = status::apply_failed(&out.status, &e.to_string());
                    if let Err(status_error) = status::write(ctx, parent, &failed).await {
                        tracing::warn!(error = %status_error, "could not write the status");
                    }
                    return Err(e);
                }
            }
        }
    }
    prune::run(ctx, parent, &out, &observed_objects).await?;
    status::write(ctx, parent, &out.status).await?;
    Ok(if requeue_soon {
        Action::requeue(Duration::from_secs(1))
    } else {
        Action::requeue(ctx.resync())
    })
}

/// A render that failed: the parent's status says why, an Error event is published, and
/// nothing else in the cluster changes.
async fn render_failed(
    ctx: &Context,
    parent: &DynamicObject,
    parent_json: &Value,
    failure: render::RenderFailure,
) -> Result<Action, ReconcileError> {
    tracing::warn!(definition = %ctx.def.name, parent = %describe(parent_json), error = %failure, "render failed");
    ctx.event(parent, EventType::Warning, "Error", failure.to_string())
        .await;
    status::write(ctx, parent, &render::failure_status(parent_json, &failure)).await?;
    Ok(Action::requeue(ctx.resync()))
}

/// The lookups of a parent from the lookup watches; records which parent reads what.
fn fetch_lookups(
    ctx: &Context,
    parent: &DynamicObject,
    parent_json: &Value,
) -> Result<BTreeMap<String, Value>, render::RenderFailure> {
    let requests = render::lookup_requests(&ctx.def, parent_json, &ctx.scopes)?;
    let mut found = Vec::new();
    let me = ObjectRef::from_obj_with(parent, ctx.parents.resolved.resource.clone());
    let mut readers = ctx.lookup_readers.lock().expect("lookup readers lock");
    for r in &requests {
        let key = lookup_key(&r.kind, r.namespace.as_deref(), &r.name);
        let entry = readers.entry(key).or_default();
        if !entry.contains(&me) {
            entry.push(me.clone());
        }
        let Some(w) = ctx.lookups.iter().find(|w| w.gvk.kind == r.kind) else {
            continue;
        };
        let mut oref = ObjectRef::new_with(&r.name, w.resolved.resource.clone());
        if let Some(ns) = &r.namespace {
            oref = oref.within(ns);
        }
        if let Some(obj) = w.store.get(&oref) {
            found.push(to_json(&obj));
        }
    }
    Ok(render::match_lookups(&requests, &found))
}

fn lookup_key(kind: &str, namespace: Option<&str>, name: &str) -> String {
    format!("{kind}/{}/{name}", namespace.unwrap_or_default())
}

fn parent_key(parent: &DynamicObject) -> String {
    format!(
        "{}/{}",
        parent.metadata.namespace.as_deref().unwrap_or_default(),
        parent.name_any()
    )
}

/// Requeues a failed parent with exponential backoff: 0.5 s doubling to 5 minutes.
pub fn error_policy(parent: Arc<DynamicObject>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    let key = parent_key(&parent);
    let mut failures = ctx.failures.lock().expect("failures lock");
    let n = failures.entry(key.clone()).or_insert(0);
    *n = (*n + 1).min(10);
    // An unreachable API server is everyone's problem and costs nothing to retry: parents
    // come back within seconds of it, instead of after a backoff grown during the outage.
    let cap = if error.unreachable() {
        Duration::from_secs(5)
    } else {
        Duration::from_secs(300)
    };
    let delay = Duration::from_millis(500u64 << (*n - 1)).min(cap);
    METRICS
        .workqueue_retries_total
        .get_or_create(&metrics::queue(&ctx.def.name))
        .inc();
    match error {
        ReconcileError::Waiting(what) => {
            tracing::info!(definition = %ctx.def.name, parent = %key, "waiting for {what}")
        }
        _ => {
            tracing::warn!(definition = %ctx.def.name, parent = %key, error = %error, retry_in = ?delay, "reconcile failed")
        }
    }
    Action::requeue(delay)
}

/// Turns a watch's events into parent references for this definition.
fn triggers(
    ctx: &Arc<Context>,
    events: UnboundedReceiver<Arc<DynamicObject>>,
    role: Role,
) -> impl futures::Stream<Item = ObjectRef<DynamicObject>> + Send + 'static {
    let ctx = ctx.clone();
    tokio_stream_from(events).flat_map(move |obj| {
        let refs = match role {
            Role::Child => child_parent(&ctx, &obj).into_iter().collect::<Vec<_>>(),
            Role::Lookup => {
                let key = lookup_key(&ctx_kind(&obj), obj.metadata.namespace.as_deref(), &obj.name_any());
                ctx.lookup_readers
                    .lock()
                    .expect("lookup readers lock")
                    .get(&key)
                    .cloned()
                    .unwrap_or_default()
            }
        };
        for r in &refs {
            ctx.requested(format!("{}/{}", r.namespace.as_deref().unwrap_or_default(), r.name));
        }
        futures::stream::iter(refs)
    })
}

fn ctx_kind(obj: &DynamicObject) -> String {
    obj.types.as_ref().map(|t| t.kind.clone()).unwrap_or_default()
}

#[derive(Clone, Copy)]
enum Role {
    Child,
    Lookup,
}

/// The parent of a child, from its `stencil.dev/` labels, when it belongs to this definition.
fn child_parent(ctx: &Context, child: &DynamicObject) -> Option<ObjectRef<DynamicObject>> {
    let l = child.labels();
    if l.get(labels::DEFINITION).map(String::as_str) != Some(crate::render::label_value(&ctx.def.name).as_str()) {
        return None;
    }
    let name = l.get(labels::PARENT_NAME)?;
    let mut r = ObjectRef::new_with(name, ctx.parents.resolved.resource.clone());
    if let Some(ns) = l.get(labels::PARENT_NAMESPACE) {
        r = r.within(ns);
    }
    Some(r)
}

fn tokio_stream_from<T: Send + 'static>(
    mut rx: UnboundedReceiver<T>,
) -> impl futures::Stream<Item = T> + Send + 'static {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// Runs the controller until `stop` resolves.
pub async fn run(
    ctx: Arc<Context>,
    concurrency: u16,
    stop: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let counting = ctx.clone();
    let parent_events = tokio_stream_from(ctx.parents.subscribe()).map(move |o| {
        counting.requested(parent_key(&o));
        Ok((*o).clone())
    });
    let collecting = ctx.clone();
    let mut deletions = ctx.parents.subscribe_deletions();
    let collector = tokio::spawn(async move {
        while let Some(parent) = deletions.recv().await {
            if collect::is_gone(&collecting, &parent) {
                tokio::spawn(collect::children(collecting.clone(), parent));
            }
        }
    });
    let mut controller = Controller::for_stream_with(
        parent_events,
        ctx.parents.store.clone(),
        ctx.parents.resolved.resource.clone(),
    )
    .with_config(Config::default().concurrency(concurrency))
    .graceful_shutdown_on(stop);
    for w in &ctx.children {
        controller = controller.reconcile_on(triggers(&ctx, w.subscribe(), Role::Child));
    }
    for w in &ctx.lookups {
        controller = controller.reconcile_on(triggers(&ctx, w.subscribe(), Role::Lookup));
    }
    let name = ctx.def.name.clone();
    controller
        .run(reconcile, error_policy, ctx)
        .for_each(|result| {
            if let Err(e) = result {
                tracing::debug!(definition = %name, error = %e, "controller");
            }
            futures::future::ready(())
        })
        .await;
    collector.abort();
}
