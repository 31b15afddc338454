//! Reads the converting CRDs for the conversion table: one watch for each CRD the table
//! names (by name, so RBAC can name them too), and, when a CRD carries no definition this
//! process has loaded (a restart after an edit refused as breaking, or after its
//! definition was removed), the definition's kept revisions.

use std::collections::HashMap;

use futures::StreamExt as _;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt as _;
use kube::api::Api;
use kube::runtime::{WatchStreamExt as _, watcher};

use super::Conversions;
use crate::compile::CompiledDefinition;
use crate::definition::OperatorDefinition;
use crate::revisions::Revisions;
use crate::tasks::Owned;

/// Keeps `conversions` told of every CRD it names, until the table is dropped. `home` is
/// Stencil's namespace, where revisions are kept (none: no revision is looked at).
pub async fn follow(client: kube::Client, home: Option<String>, conversions: Conversions) {
    let mut names = conversions.names();
    let mut watches: HashMap<String, Owned<()>> = HashMap::new();
    loop {
        let wanted = names.borrow_and_update().clone();
        watches.retain(|name, _| wanted.contains(name));
        for name in wanted {
            if let std::collections::hash_map::Entry::Vacant(slot) = watches.entry(name) {
                let task = watch_one(client.clone(), home.clone(), conversions.clone(), slot.key().clone());
                slot.insert(Owned::spawn(task));
            }
        }
        if names.changed().await.is_err() {
            return;
        }
    }
}

/// Watches CRD `name` and tells the table each state it reads.
async fn watch_one(client: kube::Client, home: Option<String>, conversions: Conversions, name: String) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = std::pin::pin!(watcher(api, config).default_backoff());
    let mut listed = false;
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Init) => listed = false,
            Ok(watcher::Event::InitApply(crd) | watcher::Event::Apply(crd)) => {
                listed = true;
                conversions.observe_crd(&name, Some(crd));
            }
            Ok(watcher::Event::InitDone) if !listed => conversions.observe_crd(&name, None),
            Ok(watcher::Event::InitDone) => {}
            Ok(watcher::Event::Delete(_)) => conversions.observe_crd(&name, None),
            Err(e) => tracing::warn!(crd = %name, error = %e, "watching a converting CRD; retrying"),
        }
        if let Some(live) = conversions.unknown(&name) {
            let found = match &home {
                Some(home) => recall(&client, home, &live).await,
                None => None,
            };
            conversions.recall(&name, found);
        }
    }
}

/// The definition `live` carries among its definition's kept revisions, newest first.
async fn recall(client: &kube::Client, home: &str, live: &CustomResourceDefinition) -> Option<CompiledDefinition> {
    let crd = live.name_any();
    let definition = live.labels().get(crate::labels::DEFINITION)?;
    let kept = match Revisions::new(client, home, definition).list().await {
        Ok(kept) => kept,
        Err(e) => {
            tracing::warn!(crd, error = %e, "cannot read the revisions of the definition the CRD carries");
            return None;
        }
    };
    let found = kept.into_iter().rev().find_map(|revision| {
        let resource = OperatorDefinition::new(definition, revision.spec);
        crate::compile::compile_resource(&resource)
            .ok()
            .filter(|def| crate::crd::carries(live, def))
    });
    if found.is_none() {
        tracing::warn!(crd, definition = %definition, "no kept revision of the definition matches the CRD; its objects are not converted");
    }
    found
}
