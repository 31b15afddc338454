//! A controller object's resource rules (`apiVersion` and plural `resource`) resolved to
//! the kinds the API server serves, through discovery, asked again until it serves them
//! (a controller object may be applied before the CRD of its parents).

use std::time::Duration;

use kube::Client;
use kube::core::{ApiResource, DynamicObject, GroupVersion};
use kube::discovery::{ApiCapabilities, Scope, pinned_group};
use serde_json::Value;

use crate::metacontroller::api::{ResourceRule, UpdateMethod};
use crate::metacontroller::plan::ChildKind;

/// How long an unserved resource waits before discovery is asked again.
const RETRY: Duration = Duration::from_secs(5);

/// A resource rule resolved.
#[derive(Clone, Debug)]
pub(super) struct Resolved {
    pub(super) resource: ApiResource,
    pub(super) namespaced: bool,
    /// Its status is written through the `status` subresource.
    pub(super) status_subresource: bool,
}

impl Resolved {
    /// Its kind as a child that `method` updates (`OnDelete` when none).
    pub(super) fn child_kind(&self, method: Option<UpdateMethod>) -> ChildKind {
        ChildKind {
            api_version: self.resource.api_version.clone(),
            kind: self.resource.kind.clone(),
            namespaced: self.namespaced,
            method: method.unwrap_or_default(),
        }
    }

    /// `object` of this kind as JSON with its apiVersion and kind (a list's items may
    /// lack them).
    pub(super) fn typed(&self, object: &DynamicObject) -> Value {
        let mut value = serde_json::to_value(object).unwrap_or_default();
        value["apiVersion"] = self.resource.api_version.clone().into();
        value["kind"] = self.resource.kind.clone().into();
        value
    }
}

/// `rule` resolved, asking again every [`RETRY`] until the API server serves it.
pub(super) async fn resolve_until_served(client: &Client, controller: &str, rule: &ResourceRule) -> Resolved {
    loop {
        match resolve(client, rule).await {
            Ok(resolved) => return resolved,
            Err(e) => {
                tracing::warn!(controller, resource = %rule.resource, api_version = %rule.api_version, error = %e, "waiting for the resource to be served");
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

/// The kind the API server serves as `rule.resource` in `rule.apiVersion`.
pub(super) async fn resolve(client: &Client, rule: &ResourceRule) -> Result<Resolved, String> {
    let gv: GroupVersion = rule.api_version.parse().map_err(|e| format!("{e}"))?;
    let group = pinned_group(client, &gv).await.map_err(|e| e.to_string())?;
    group
        .versioned_resources(&gv.version)
        .into_iter()
        .find(|(r, _)| r.plural == rule.resource)
        .map(|(resource, caps): (ApiResource, ApiCapabilities)| Resolved {
            resource,
            namespaced: caps.scope == Scope::Namespaced,
            status_subresource: caps.subresources.iter().any(|(s, _)| s.plural == "status"),
        })
        .ok_or_else(|| format!("{} serves no resource {}", rule.api_version, rule.resource))
}
