//! What every controller task of the registry shares (the [`Dependencies`]), and building one
//! definition's controller context from it: the supervisor starts controllers with it,
//! and releasing a kind's parents reads them through it.

use std::sync::Arc;

use kube::Client;

use super::definition_status::Reports;
use crate::compile::CompiledDefinition;
use crate::gvk::Gvk;
use crate::labels;
use crate::metrics::Metrics;
use crate::reconcile::Context;
use crate::watch::{WatchError, WatchLease, WatchSelection, Watches};

/// What every controller task shares.
#[derive(Clone)]
pub struct Dependencies {
    /// The API client.
    pub client: Client,
    /// The process's watches.
    pub watches: Arc<Watches>,
    /// Parents reconciled at once per definition.
    pub concurrency: u16,
    /// Where counts go.
    pub metrics: Arc<Metrics>,
    /// Where status reports go.
    pub reports: Reports,
    /// The conversion webhook CRDs point at, when this process serves one.
    pub webhook: Option<tokio::sync::watch::Receiver<crate::crd::Webhook>>,
    /// Who stores objects anew when a storage version changes.
    pub storage_migration: crate::migrate::Method,
    /// Who reports this process's events (the Pod's name), when known.
    pub instance: Option<String>,
    /// Stencil's own namespace, where definition revisions are kept; none keeps none.
    pub home: Option<String>,
    /// This member when parents are sharded between replicas; it watches and reconciles
    /// only its own share.
    pub shard: Option<crate::sharding::Member>,
    /// Whether this process installs CRDs, migrates storage and serves decorators.
    pub leadership: crate::leader::Leadership,
}

/// Builds a controller context, or says which kind is not served or not allowed yet.
pub(super) async fn resolve(
    deps: &Dependencies,
    def: &Arc<CompiledDefinition>,
    kinds_seen: &[Gvk],
) -> Result<Context, (&'static str, String)> {
    let watches = &deps.watches;
    let owner = def.name.as_str();
    let fail = |e: WatchError| (e.reason(), e.to_string());
    let parents = watches
        .acquire(&def.parent, parent_selection(deps, def), owner)
        .await
        .map_err(fail)?;
    let current = def.all_child_kinds();
    let mut children = Vec::new();
    for gvk in kinds_seen {
        match watches.acquire(gvk, child_selection(deps, def), owner).await {
            Ok(w) => children.push(w),
            // A kind only an earlier version used may be gone; the current ones must exist.
            Err(e) if current.contains(gvk) => return Err(fail(e)),
            Err(_) => {}
        }
    }
    let mut lookups: Vec<WatchLease> = Vec::new();
    for gvk in def.lookup_kinds() {
        lookups.push(watches.acquire(&gvk, WatchSelection::All, owner).await.map_err(fail)?);
    }
    Ok(Context::new(
        deps.client.clone(),
        def.clone(),
        deps.metrics.clone(),
        parents,
        children,
        lookups,
    )
    .serving(watches.namespaces())
    .reporting_as(deps.instance.clone())
    .sharded_as(sharded(deps, def).map(|m| m.name.as_str())))
}

/// This member when the definition's parents are sharded: a composite's are, a
/// decorator's are not (its parents belong to others, and the sharder would have to
/// label them; the leader serves it whole).
pub(super) fn sharded<'s>(deps: &'s Dependencies, def: &CompiledDefinition) -> Option<&'s crate::sharding::Member> {
    deps.shard.as_ref().filter(|_| !def.spec.is_decorator())
}

/// Which parents a definition's watch sees, selected by the API server so nothing else
/// is held in memory: a decorator's label selector, or this member's share.
fn parent_selection(deps: &Dependencies, def: &CompiledDefinition) -> WatchSelection {
    match def.parent_label_query() {
        Some(query) => WatchSelection::Labels(query.to_string()),
        None => share(deps, def),
    }
}

/// Every parent of the definition's kind this member answers for: all of them, or its
/// share when sharded.
pub(super) fn share(deps: &Dependencies, def: &CompiledDefinition) -> WatchSelection {
    match sharded(deps, def) {
        Some(member) => WatchSelection::Labels(format!("{}={}", labels::SHARD, member.name)),
        None => WatchSelection::All,
    }
}

/// Which children a definition's watches see: every object Stencil manages, or those of
/// this member's share (rendering copies the parent's shard label onto its children).
fn child_selection(deps: &Dependencies, def: &CompiledDefinition) -> WatchSelection {
    match sharded(deps, def) {
        Some(member) => WatchSelection::Labels(format!(
            "{}={},{}={}",
            labels::MANAGED_BY,
            labels::MANAGED_BY_VALUE,
            labels::SHARD,
            member.name
        )),
        None => WatchSelection::Managed,
    }
}
