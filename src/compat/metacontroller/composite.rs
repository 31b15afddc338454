//! One CompositeController's controller: its parent and child resources resolved to kinds,
//! then one controller over its parents (only those `parentResource.labelSelector`
//! selects, when it is set).

use std::sync::Arc;

use kube::{Client, ResourceExt as _};

use super::Hooks;
use super::resolve::resolve_until_served;
use super::served::Served;
use super::watch::serve_parents;
use crate::metacontroller::api::CompositeController;
use crate::selector::Matcher;

/// Serves `cc` until dropped.
pub(super) async fn run(client: Client, hooks: Arc<Hooks>, cc: Arc<CompositeController>) {
    let name = cc.name_any();
    let labels = match cc.spec.parent_resource.label_selector.as_ref().map(Matcher::new) {
        None => None,
        Some(Ok(m)) => Some(m.query().to_string()),
        Some(Err(e)) => {
            tracing::error!(controller = %name, error = %e, "parentResource.labelSelector does not parse; not served");
            return;
        }
    };
    let parent = resolve_until_served(&client, &name, &cc.spec.parent_resource.rule).await;
    let mut children = Vec::new();
    for rule in &cc.spec.child_resources {
        let resolved = resolve_until_served(&client, &name, &rule.rule).await;
        let kind = resolved.child_kind(rule.update_strategy.as_ref().and_then(|s| s.method));
        children.push((resolved, kind));
    }
    serve_parents(client, hooks, Served::composite(&cc), parent, children, labels).await;
}
