//! Runs one controller per definition: starts, replaces and stops them as sources report
//! changes, keeps the first definition of a parent kind and marks later ones in conflict,
//! installs parent CRDs, and writes each OperatorDefinition's status.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::compile::CompiledDefinition;
use crate::definition::OperatorDefinition;
use crate::gvk::Gvk;
use crate::labels;
use crate::reconcile::{self, Context, diff};
use crate::source::{Origin, SourceEvent};
use crate::watch::{Selection, Watches};

/// How often a waiting definition retries (a missing kind, an unestablished CRD).
const RETRY: Duration = Duration::from_secs(3);

/// What the registry knows of one definition.
struct Entry {
    /// Order of arrival: the first definition of a parent kind keeps it.
    seq: u64,
    good: Option<Arc<CompiledDefinition>>,
    /// Every child kind any version of this definition had, so removed templates' children
    /// are still seen and pruned.
    kinds_seen: Vec<Gvk>,
    running: Option<Running>,
}

struct Running {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

/// The set of running definitions.
pub struct Registry {
    client: Client,
    watches: Arc<Watches>,
    concurrency: u16,
    entries: BTreeMap<Origin, Entry>,
    next_seq: u64,
}

fn parent_key(def: &CompiledDefinition) -> (String, String) {
    (def.parent.group.clone(), def.parent.kind.clone())
}

impl Registry {
    /// An empty registry.
    pub fn new(client: Client, watches: Arc<Watches>, concurrency: u16) -> Self {
        Registry {
            client,
            watches,
            concurrency,
            entries: BTreeMap::new(),
            next_seq: 0,
        }
    }

    /// Applies source events until every source is gone.
    pub async fn run(mut self, mut events: UnboundedReceiver<SourceEvent>) {
        while let Some(event) = events.recv().await {
            self.handle(event).await;
            self.count_states();
        }
        self.shutdown().await;
    }

    fn count_states(&self) {
        let mut counts: BTreeMap<&str, i64> = [("running", 0), ("conflict", 0), ("invalid", 0)].into();
        for e in self.entries.values() {
            let state = match (&e.running, &e.good) {
                (Some(_), _) => "running",
                (None, Some(_)) => "conflict",
                (None, None) => "invalid",
            };
            *counts.entry(state).or_default() += 1;
        }
        for (state, n) in counts {
            crate::metrics::METRICS
                .definitions
                .get_or_create(&crate::metrics::StateLabel { state: state.into() })
                .set(n);
        }
    }

    /// Stops every controller, leaving parents and their finalizers in place for the next
    /// Stencil process.
    pub async fn shutdown(&mut self) {
        for entry in self.entries.values_mut() {
            if let Some(r) = entry.running.take() {
                let _ = r.stop.send(true);
                let _ = r.task.await;
            }
        }
    }

    async fn handle(&mut self, event: SourceEvent) {
        match event {
            SourceEvent::Upsert(origin, def) => self.upsert(origin, Arc::new(*def)).await,
            SourceEvent::Invalid(origin, diags) => {
                let message = diags.to_string();
                tracing::error!(definition = %origin, "{message}");
                let running = self.entries.get(&origin).is_some_and(|e| e.running.is_some());
                let note = if running {
                    "the last good version keeps running"
                } else {
                    "not started"
                };
                report(&self.client, &origin, status_compile_error(&message, note)).await;
            }
            SourceEvent::FileInvalid(file, diags) => {
                tracing::error!(file = %file, "{diags}; definitions from this file keep their last good version");
            }
            SourceEvent::Remove(origin) => self.remove(&origin).await,
        }
    }

    /// The origin that serves a parent kind, other than `except`.
    fn owner_of(&self, key: &(String, String), except: &Origin) -> Option<Origin> {
        self.entries
            .iter()
            .filter(|(o, e)| {
                *o != except && e.running.is_some() && e.good.as_ref().is_some_and(|d| parent_key(d) == *key)
            })
            .map(|(o, _)| o.clone())
            .next()
    }

    async fn upsert(&mut self, origin: Origin, def: Arc<CompiledDefinition>) {
        let seq = self.entries.get(&origin).map(|e| e.seq).unwrap_or_else(|| {
            self.next_seq += 1;
            self.next_seq
        });
        let entry = self.entries.entry(origin.clone()).or_insert_with(|| Entry {
            seq,
            good: None,
            kinds_seen: Vec::new(),
            running: None,
        });
        for k in def.all_child_kinds() {
            if !entry.kinds_seen.contains(&k) {
                entry.kinds_seen.push(k);
            }
        }
        entry.good = Some(def.clone());
        if let Some(holder) = self.owner_of(&parent_key(&def), &origin) {
            let message = format!("{} is already served by {holder}", def.parent);
            tracing::warn!(definition = %origin, "conflict: {message}");
            report(&self.client, &origin, status_conflict(&message)).await;
            return;
        }
        self.start(&origin).await;
    }

    async fn start(&mut self, origin: &Origin) {
        let Some(entry) = self.entries.get_mut(origin) else {
            return;
        };
        if let Some(r) = entry.running.take() {
            let _ = r.stop.send(true);
            let _ = r.task.await;
        }
        let Some(def) = entry.good.clone() else { return };
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(serve(
            self.client.clone(),
            self.watches.clone(),
            origin.clone(),
            def,
            entry.kinds_seen.clone(),
            self.concurrency,
            stopped,
        ));
        entry.running = Some(Running { stop, task });
        tracing::info!(definition = %origin, "started");
    }

    async fn remove(&mut self, origin: &Origin) {
        let Some(mut entry) = self.entries.remove(origin) else {
            return;
        };
        if let Some(r) = entry.running.take() {
            let _ = r.stop.send(true);
            let _ = r.task.await;
            if let Some(def) = &entry.good {
                release_parents(&self.client, &self.watches, def).await;
            }
            tracing::info!(definition = %origin, "removed; its parents were released");
            // A definition waiting in conflict for this parent kind takes over.
            if let Some(def) = &entry.good {
                let key = parent_key(def);
                let next = self
                    .entries
                    .iter()
                    .filter(|(_, e)| e.running.is_none() && e.good.as_ref().is_some_and(|d| parent_key(d) == key))
                    .min_by_key(|(_, e)| e.seq)
                    .map(|(o, _)| o.clone());
                if let Some(next) = next {
                    self.start(&next).await;
                }
            }
        }
    }
}

/// Removes Stencil's finalizer from every parent of a definition that stops being served,
/// so no parent is left undeletable.
async fn release_parents(client: &Client, watches: &Watches, def: &CompiledDefinition) {
    let Ok(parents) = watches.get(&def.parent, Selection::All).await else {
        return;
    };
    for parent in parents.store.state() {
        let api = match parent.namespace() {
            Some(ns) => Api::namespaced_with(client.clone(), &ns, &parents.resolved.resource),
            None => Api::all_with(client.clone(), &parents.resolved.resource),
        };
        if let Err(e) = reconcile::release(&api, &parent).await {
            tracing::warn!(parent = %parent.name_any(), error = %e, "could not release the finalizer");
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

/// One definition's life: install its CRD, resolve its kinds (waiting for any that is not
/// served yet), then run its controller and keep its status current until stopped.
async fn serve(
    client: Client,
    watches: Arc<Watches>,
    origin: Origin,
    def: Arc<CompiledDefinition>,
    kinds_seen: Vec<Gvk>,
    concurrency: u16,
    stop: watch::Receiver<bool>,
) {
    loop {
        match install_crd(&client, &def).await {
            Ok(()) => break,
            Err(message) => {
                report(&client, &origin, status_waiting(&message)).await;
                if !pause(&stop, RETRY).await {
                    return;
                }
            }
        }
    }
    let ctx = loop {
        match resolve(&client, &watches, &def, &kinds_seen).await {
            Ok(ctx) => break Arc::new(ctx),
            Err(message) => {
                tracing::info!(definition = %origin, "waiting: {message}");
                report(&client, &origin, status_waiting(&message)).await;
                if !pause(&stop, RETRY).await {
                    return;
                }
            }
        }
    };
    let mut watched: Vec<String> = std::iter::once(&ctx.parents)
        .chain(&ctx.children)
        .chain(&ctx.lookups)
        .map(|w| format!("{}", w.gvk))
        .collect();
    watched.dedup();
    let controller = tokio::spawn(reconcile::run(ctx.clone(), concurrency, stopped(stop.clone())));
    let mut last = None;
    loop {
        let now = (ctx.parents.store.state().len(), ctx.problem());
        if last.as_ref() != Some(&now) {
            match &now.1 {
                None => report(&client, &origin, status_ready(&watched, now.0)).await,
                Some(problem) => {
                    tracing::warn!(definition = %origin, "{problem}");
                    report(&client, &origin, status_failing(&watched, now.0, problem)).await
                }
            }
            last = Some(now);
        }
        if !pause(&stop, Duration::from_secs(5)).await {
            break;
        }
    }
    let _ = controller.await;
}

/// Builds a controller context, or says which kind is not served yet.
async fn resolve(
    client: &Client,
    watches: &Watches,
    def: &Arc<CompiledDefinition>,
    kinds_seen: &[Gvk],
) -> Result<Context, String> {
    let parents = watches
        .get(&def.parent, Selection::All)
        .await
        .map_err(|e| e.to_string())?;
    let mut children = Vec::new();
    for gvk in kinds_seen {
        match watches.get(gvk, Selection::Managed).await {
            Ok(w) => children.push(w),
            // A kind only an earlier version used may be gone; the current ones must exist.
            Err(e) if def.all_child_kinds().contains(gvk) => return Err(e.to_string()),
            Err(_) => {}
        }
    }
    let mut lookups = Vec::new();
    for gvk in def.lookup_kinds() {
        lookups.push(watches.get(&gvk, Selection::All).await.map_err(|e| e.to_string())?);
    }
    Ok(Context::new(client.clone(), def.clone(), parents, children, lookups))
}

/// Applies the definition's parent CRD and waits until it is Established.
async fn install_crd(client: &Client, def: &CompiledDefinition) -> Result<(), String> {
    let crd = match crate::crd::parent_crd(def) {
        Ok(Some(crd)) => crd,
        Ok(None) => return Ok(()),
        Err(e) => return Err(e.to_string()),
    };
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd.name_any();
    let (desired, hash) = diff::with_hash(serde_json::to_value(&crd).map_err(|e| e.to_string())?);
    // A restart finds the CRD as it left it and writes nothing.
    let live = api
        .get_opt(&name)
        .await
        .ok()
        .flatten()
        .and_then(|c| serde_json::to_value(c).ok());
    let current = live.is_some_and(|l| diff::live_hash(&l) == Some(hash.as_str()) && diff::live_contains(&l, &desired));
    if !current {
        let params = PatchParams::apply(labels::FIELD_MANAGER).force();
        api.patch(&name, &params, &Patch::Apply(&desired))
            .await
            .map_err(|e| format!("cannot apply CRD {name}: {e}"))?;
    }
    for _ in 0..100 {
        let established = api
            .get(&name)
            .await
            .ok()
            .and_then(|c| c.status)
            .and_then(|s| s.conditions)
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Established" && c.status == "True"));
        if established {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!("CRD {name} is not Established yet"))
}

fn condition(type_: &str, status: bool, reason: &str, message: &str) -> Value {
    json!({"type": type_, "status": if status { "True" } else { "False" }, "reason": reason, "message": message,
        "lastTransitionTime": k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()})
}

fn status_ready(watched: &[String], parents: usize) -> Value {
    json!({"conditions": [condition("Ready", true, "Serving", "the definition is running"), condition("Conflict", false, "NoConflict", "")],
        "watchedKinds": watched, "parentCount": parents, "lastError": null})
}

fn status_failing(watched: &[String], parents: usize, problem: &str) -> Value {
    json!({"conditions": [condition("Ready", false, "Failing", problem)],
        "watchedKinds": watched, "parentCount": parents, "lastError": problem})
}

fn status_waiting(message: &str) -> Value {
    json!({"conditions": [condition("Ready", false, "Waiting", message)], "lastError": message})
}

fn status_conflict(message: &str) -> Value {
    json!({"conditions": [condition("Ready", false, "Conflict", message), condition("Conflict", true, "ParentKindTaken", message)],
        "lastError": message})
}

fn status_compile_error(message: &str, note: &str) -> Value {
    json!({"conditions": [condition("Compiled", false, "CompileError", &format!("{message} ({note})"))], "lastError": message})
}

/// Writes an OperatorDefinition's status; file definitions only log.
async fn report(client: &Client, origin: &Origin, status: Value) {
    let Origin::Cluster { name } = origin else { return };
    let api: Api<OperatorDefinition> = Api::all(client.clone());
    // Conditions are merged by type so a compile error does not erase Ready.
    let current: Vec<Value> = api
        .get_status(name)
        .await
        .ok()
        .and_then(|o| o.status)
        .map(|s| {
            s.conditions
                .iter()
                .filter_map(|c| serde_json::to_value(c).ok())
                .collect()
        })
        .unwrap_or_default();
    let mut conditions: HashMap<String, Value> = current
        .into_iter()
        .map(|c| (c["type"].as_str().unwrap_or_default().to_string(), c))
        .collect();
    let mut status = status;
    for c in status["conditions"].as_array().cloned().unwrap_or_default() {
        let t = c["type"].as_str().unwrap_or_default().to_string();
        let keep_time = conditions
            .get(&t)
            .filter(|old| old["status"] == c["status"])
            .map(|old| old["lastTransitionTime"].clone());
        let mut c = c;
        if let Some(time) = keep_time {
            c["lastTransitionTime"] = time;
        }
        conditions.insert(t, c);
    }
    let mut merged: Vec<Value> = conditions.into_values().collect();
    merged.sort_by(|a, b| a["type"].as_str().cmp(&b["type"].as_str()));
    status["conditions"] = Value::Array(merged);
    let patch = json!({"status": status});
    if let Err(e) = api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        tracing::warn!(definition = %name, error = %e, "could not write the definition's status");
    }
}
