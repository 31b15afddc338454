//! Resolves a group/version/kind to the API resource the server serves, with its scope,
//! and gives the one way to reach objects of a resolved kind ([`api`]).

use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::discovery::{Scope, pinned_kind};
use kube::{Api, Client};

use crate::gvk::Gvk;

/// A kind the API server does not serve (yet).
#[derive(Debug, thiserror::Error)]
#[error("the API server does not serve {gvk}: {source}")]
pub struct DiscoveryError {
    /// The kind asked for.
    pub gvk: Gvk,
    /// What the server said.
    #[source]
    pub source: kube::Error,
}

/// A served kind: how to reach it and whether it is namespaced.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The resource (plural, group, version).
    pub resource: ApiResource,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
}

/// The API of `resource` in `namespace`, or across the cluster (a cluster-scoped kind,
/// or every namespace) without one.
pub fn api(client: &Client, namespace: Option<&str>, resource: &ApiResource) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    }
}

/// Asks the API server for one kind.
///
/// # Errors
///
/// The API server does not serve the kind, or cannot be reached.
pub async fn resolve(client: &Client, gvk: &Gvk) -> Result<Resolved, DiscoveryError> {
    let wanted = GroupVersionKind::gvk(&gvk.group, &gvk.version, &gvk.kind);
    let (resource, caps) = pinned_kind(client, &wanted).await.map_err(|source| DiscoveryError {
        gvk: gvk.clone(),
        source,
    })?;
    Ok(Resolved {
        resource,
        namespaced: caps.scope == Scope::Namespaced,
    })
}
