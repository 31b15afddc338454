//! Definitions from OperatorDefinition resources. A resource is recompiled when its
//! generation changes (or its `stencil.dev/allow-breaking-changes` annotation, the one
//! piece of metadata a definition reads), so Stencil's own status writes do not restart
//! its controller.

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::mpsc::UnboundedSender;

use super::{Origin, SourceEvent};
use crate::compile::compile_resource;
use crate::definition::OperatorDefinition;
use crate::gvk::Gvk;

/// Watches the OperatorDefinitions `selector` matches (all without one) and sends their
/// changes; waits for the CRD if it is absent. `synced` is called once the first list is
/// sent (or the CRD is found absent). A definition whose labels stop matching is removed.
pub async fn watch(
    client: Client,
    selector: Option<String>,
    tx: UnboundedSender<SourceEvent>,
    synced: impl Fn() + Send,
) {
    let gvk = Gvk::parse("stencil.dev/v1alpha1", "OperatorDefinition").expect("a valid apiVersion");
    let mut warned = false;
    while crate::discovery::resolve(&client, &gvk).await.is_err() {
        if !warned {
            tracing::warn!("the OperatorDefinition CRD is not installed; serving file definitions only until it is");
            warned = true;
            synced();
        }
        tokio::time::sleep(Duration::from_secs(10)).await;
    }
    let api: Api<OperatorDefinition> = Api::all(client);
    let mut generations: HashMap<String, Seen> = HashMap::new();
    let mut listed: Vec<String> = Vec::new();
    let config = match &selector {
        Some(selector) => watcher::Config::default().labels(selector),
        None => watcher::Config::default(),
    };
    let mut events = watcher(api, config).default_backoff().boxed();
    while let Some(event) = events.next().await {
        match event {
            Ok(Event::Init) => listed.clear(),
            Ok(Event::InitApply(od)) => {
                listed.push(od.name_any());
                upsert(&od, &mut generations, &tx);
            }
            Ok(Event::InitDone) => {
                synced();
                // Definitions deleted while the watch was down.
                let gone: Vec<String> = generations.keys().filter(|n| !listed.contains(n)).cloned().collect();
                for name in gone {
                    generations.remove(&name);
                    let _ = tx.send(SourceEvent::Remove(Origin::Cluster { name }));
                }
            }
            Ok(Event::Apply(od)) => upsert(&od, &mut generations, &tx),
            Ok(Event::Delete(od)) => {
                generations.remove(&od.name_any());
                let _ = tx.send(SourceEvent::Remove(Origin::Cluster { name: od.name_any() }));
            }
            Err(e) => tracing::warn!(error = %e, "OperatorDefinition watch failed; retrying"),
        }
    }
}

/// What a definition resource was compiled from: its generation, whether it allows
/// breaking CRD changes, and whether it is paused.
type Seen = (Option<i64>, bool, bool);

fn upsert(od: &OperatorDefinition, generations: &mut HashMap<String, Seen>, tx: &UnboundedSender<SourceEvent>) {
    let name = od.name_any();
    let allows = od
        .annotations()
        .get(crate::labels::ALLOW_BREAKING_CHANGES)
        .map(String::as_str)
        == Some("true");
    let paused = crate::labels::paused(od.metadata.annotations.as_ref());
    let seen = (od.metadata.generation, allows, paused);
    if generations.get(&name) == Some(&seen) {
        return;
    }
    generations.insert(name.clone(), seen);
    let origin = Origin::Cluster { name };
    let event = match compile_resource(od) {
        Ok(def) => SourceEvent::Upsert(origin, Box::new(def)),
        Err(diags) => SourceEvent::Invalid(origin, diags),
    };
    let _ = tx.send(event);
}
