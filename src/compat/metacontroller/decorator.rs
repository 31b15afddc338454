//! One DecoratorController's controllers: its resources and attachment kinds resolved,
//! then one controller per resource rule over that rule's objects. Without a finalize
//! hook only the objects the rule's label selector selects are watched; with one, every
//! object of the kind is, since an object that stops matching is finalized.

use std::sync::Arc;

use kube::{Client, ResourceExt as _};

use super::Hooks;
use super::resolve::resolve_until_served;
use super::served::Served;
use super::watch::serve_parents;
use crate::metacontroller::api::DecoratorController;
use crate::selector::Matcher;

/// Serves `dc` until dropped.
pub(super) async fn run(client: Client, hooks: Arc<Hooks>, dc: Arc<DecoratorController>) {
    let name = dc.name_any();
    let mut attachments = Vec::new();
    for rule in &dc.spec.attachments {
        let resolved = resolve_until_served(&client, &name, &rule.rule).await;
        let kind = resolved.child_kind(rule.update_strategy.as_ref().and_then(|s| s.method));
        attachments.push((resolved, kind));
    }
    let finalizes = dc.spec.hooks.as_ref().is_some_and(|h| h.finalize.is_some());
    let mut controllers = Vec::new();
    for rule in &dc.spec.resources {
        let labels = match rule.label_selector.as_ref().filter(|_| !finalizes).map(Matcher::new) {
            None => None,
            Some(Ok(m)) => Some(m.query().to_string()),
            Some(Err(e)) => {
                tracing::error!(controller = %name, resource = %rule.rule.resource, error = %e, "labelSelector does not parse; not served");
                return;
            }
        };
        let resolved = resolve_until_served(&client, &name, &rule.rule).await;
        let served = Served::decorator(&dc, rule.clone());
        controllers.push(serve_parents(
            client.clone(),
            hooks.clone(),
            served,
            resolved,
            attachments.clone(),
            labels,
        ));
    }
    futures::future::join_all(controllers).await;
}
