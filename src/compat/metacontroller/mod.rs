//! `--compat metacontroller`: every CompositeController and DecoratorController on the
//! cluster is served by a controller of its own, started when the object appears,
//! restarted when its spec changes and stopped when it goes. An object Stencil cannot
//! serve whole is not served, and the log says which fields stop it.

mod calls;
mod claims;
mod composite;
mod decorator;
mod metered;
mod related;
mod report;
mod resolve;
mod served;
mod sync;
mod watch;
mod writes;

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;

use futures::StreamExt as _;
use futures::future::BoxFuture;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, Resource, ResourceExt as _};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::hooks::HookClient;
use crate::metacontroller::api::{CompositeController, DecoratorController};
use crate::metacontroller::support::{composite_refusals, decorator_refusals};
use crate::metrics::Metrics;
use crate::tasks::Owned;

/// How hooks are called, and where their calls and the syncs are counted.
pub(super) struct Hooks {
    pub(super) client: HookClient,
    pub(super) metrics: Arc<Metrics>,
}

/// Serves every CompositeController and DecoratorController until dropped, counting
/// syncs and hook calls in `metrics`.
pub async fn serve(client: Client, hooks: HookClient, metrics: Arc<Metrics>) {
    let hooks = Arc::new(Hooks { client: hooks, metrics });
    tokio::join!(
        serve_kind::<CompositeController>(client.clone(), hooks.clone()),
        serve_kind::<DecoratorController>(client, hooks),
    );
}

/// A controller object kind Stencil serves.
trait ControllerObject:
    Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Serialize + Send + Sync + 'static
{
    /// What a change restarts its controller for.
    type Spec: PartialEq + Clone + Send + Sync + 'static;
    fn spec(&self) -> &Self::Spec;
    /// Why it is not served; empty when it is.
    fn refusals(&self) -> Vec<String>;
    /// Its controller, until dropped.
    fn run(self: Arc<Self>, client: Client, hooks: Arc<Hooks>) -> BoxFuture<'static, ()>;
}

impl ControllerObject for CompositeController {
    type Spec = crate::metacontroller::api::CompositeControllerSpec;
    fn spec(&self) -> &Self::Spec {
        &self.spec
    }
    fn refusals(&self) -> Vec<String> {
        composite_refusals(&self.spec)
    }
    fn run(self: Arc<Self>, client: Client, hooks: Arc<Hooks>) -> BoxFuture<'static, ()> {
        Box::pin(composite::run(client, hooks, self))
    }
}

impl ControllerObject for DecoratorController {
    type Spec = crate::metacontroller::api::DecoratorControllerSpec;
    fn spec(&self) -> &Self::Spec {
        &self.spec
    }
    fn refusals(&self) -> Vec<String> {
        decorator_refusals(&self.spec)
    }
    fn run(self: Arc<Self>, client: Client, hooks: Arc<Hooks>) -> BoxFuture<'static, ()> {
        Box::pin(decorator::run(client, hooks, self))
    }
}

/// Serves every controller object of kind `K`.
async fn serve_kind<K: ControllerObject>(client: Client, hooks: Arc<Hooks>) {
    let api: Api<K> = Api::all(client.clone());
    let reporter = Reporter {
        controller: crate::labels::FIELD_MANAGER.into(),
        instance: None,
    };
    let recorder = Recorder::new(client.clone(), reporter);
    let mut running: BTreeMap<String, (K::Spec, Owned<()>)> = BTreeMap::new();
    let mut events = watcher(api, watcher::Config::default()).default_backoff().boxed();
    let mut seen: Vec<String> = Vec::new();
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => {
                seen.push(object.name_any());
                start(&client, &hooks, &recorder, &mut running, object).await;
            }
            Ok(watcher::Event::Delete(object)) => {
                tracing::info!(kind = %K::kind(&()), controller = %object.name_any(), "controller object deleted; no longer served");
                running.remove(&object.name_any());
            }
            Ok(watcher::Event::Init) => seen.clear(),
            Ok(watcher::Event::InitDone) => running.retain(|name, _| seen.contains(name)),
            Err(e) => tracing::warn!(kind = %K::kind(&()), error = %e, "watching controller objects"),
        }
    }
}

/// Starts (or restarts, when its spec changed) the controller of `object`, and says on
/// it whether it is served.
async fn start<K: ControllerObject>(
    client: &Client,
    hooks: &Arc<Hooks>,
    events: &Recorder,
    running: &mut BTreeMap<String, (K::Spec, Owned<()>)>,
    object: K,
) {
    let name = object.name_any();
    if running.get(&name).is_some_and(|(spec, _)| spec == object.spec()) {
        return;
    }
    running.remove(&name);
    let refusals = object.refusals();
    report::report(client, events, &object, &refusals).await;
    if !refusals.is_empty() {
        return;
    }
    tracing::info!(kind = %K::kind(&()), controller = %name, "serving controller object");
    let spec = object.spec().clone();
    let task = Owned::spawn(Arc::new(object).run(client.clone(), hooks.clone()));
    running.insert(name, (spec, task));
}
