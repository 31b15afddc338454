//! `--compat metacontroller`: every CompositeController on the cluster is served by a
//! controller of its own, started when the object appears, restarted when its spec
//! changes and stopped when it goes. An object Stencil cannot serve whole is not served,
//! and the log says which fields stop it.

mod composite;
mod sync;
mod writes;

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt as _;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt as _};

use crate::hooks::HookClient;
use crate::metacontroller::api::{CompositeController, CompositeControllerSpec};
use crate::metacontroller::support::composite_refusals;
use crate::tasks::Owned;

/// Serves every CompositeController until the returned future is dropped.
pub async fn serve(client: Client, hooks: HookClient) {
    let api: Api<CompositeController> = Api::all(client.clone());
    let hooks = Arc::new(hooks);
    let mut running: BTreeMap<String, (CompositeControllerSpec, Owned<()>)> = BTreeMap::new();
    let mut events = watcher(api, watcher::Config::default()).boxed();
    let mut seen: Vec<String> = Vec::new();
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Apply(cc) | watcher::Event::InitApply(cc)) => {
                seen.push(cc.name_any());
                start(&client, &hooks, &mut running, cc);
            }
            Ok(watcher::Event::Delete(cc)) => {
                tracing::info!(controller = %cc.name_any(), "CompositeController deleted; no longer served");
                running.remove(&cc.name_any());
            }
            Ok(watcher::Event::Init) => seen.clear(),
            Ok(watcher::Event::InitDone) => running.retain(|name, _| seen.contains(name)),
            Err(e) => tracing::warn!(error = %e, "watching CompositeControllers"),
        }
    }
}

/// Starts (or restarts, when its spec changed) the controller of `cc`.
fn start(
    client: &Client,
    hooks: &Arc<HookClient>,
    running: &mut BTreeMap<String, (CompositeControllerSpec, Owned<()>)>,
    cc: CompositeController,
) {
    let name = cc.name_any();
    if running.get(&name).is_some_and(|(spec, _)| *spec == cc.spec) {
        return;
    }
    running.remove(&name);
    let refusals = composite_refusals(&cc.spec);
    if !refusals.is_empty() {
        tracing::error!(controller = %name, refusals = %refusals.join("; "), "CompositeController not served");
        return;
    }
    tracing::info!(controller = %name, "serving CompositeController");
    let spec = cc.spec.clone();
    let task = Owned::spawn(composite::run(client.clone(), hooks.clone(), Arc::new(cc)));
    running.insert(name, (spec, task));
}
