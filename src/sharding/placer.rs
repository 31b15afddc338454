//! Labels a parent with its member as the plan says ([`crate::shard::plan`]): one merge
//! PATCH of its metadata under its resourceVersion, so it applies to the placement the
//! plan was made from or not at all. The sharder runs up to [`PLACING`] of them at once:
//! one at a time, a burst of 30,000 new parents took about 16 minutes to place.

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use kube::Client;
use kube::api::{DynamicObject, ObjectMeta, PartialObjectMeta, Patch, PatchParams};
use serde_json::json;

use crate::discovery::{self, Resolved};
use crate::labels;
use crate::shard::{Move, Placement, Ring, plan};

/// How many parents the sharder labels at once.
pub(super) const PLACING: usize = 16;

/// What labelling a parent needs: the client, and the namespaces served.
pub(super) struct Placer {
    pub(super) client: Client,
    /// The namespaces served; empty: every one.
    pub(super) namespaces: Vec<String>,
}

impl Placer {
    /// Whether a parent is in a namespace served.
    fn serves(&self, meta: &PartialObjectMeta<DynamicObject>) -> bool {
        self.namespaces.is_empty()
            || meta
                .metadata
                .namespace
                .as_ref()
                .is_none_or(|ns| self.namespaces.contains(ns))
    }

    /// The one namespace a namespaced kind is listed and watched in, as the member's
    /// watches are (least privilege); none: across the cluster, filtered.
    pub(super) fn scope(&self, resolved: &Resolved) -> Option<&str> {
        match self.namespaces.as_slice() {
            [only] if resolved.namespaced => Some(only),
            _ => None,
        }
    }

    /// Moves one parent if the plan says so; returns the member it is (or goes) to.
    pub(super) async fn place(
        &self,
        resolved: &Resolved,
        meta: &PartialObjectMeta<DynamicObject>,
        ring: &Ring,
    ) -> Option<String> {
        if !self.serves(meta) {
            return None;
        }
        let m = &meta.metadata;
        let uid = m.uid.as_deref()?;
        let placement = Placement::of(uid, m.labels.as_ref());
        let mut patch = json!({"metadata": {"resourceVersion": m.resource_version}});
        match plan(placement, ring) {
            None => return placement.shard.map(str::to_string),
            Some(Move::Assign(member)) => {
                patch["metadata"]["labels"] = json!({labels::SHARD: member, labels::DRAIN: null});
                // Moved from a member that is gone: its children still carry its name.
                if let Some(gone) = placement.shard {
                    patch["metadata"]["annotations"] = json!({labels::MOVED_FROM: gone});
                }
            }
            Some(Move::Drain) => patch["metadata"]["labels"] = json!({labels::DRAIN: "true"}),
        }
        let labels = &patch["metadata"]["labels"];
        let api = discovery::api(&self.client, m.namespace.as_deref(), &resolved.resource);
        let name = m.name.as_deref()?;
        match api
            .patch_metadata(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => tracing::warn!(parent = name, error = %e, "could not label a parent with its member"),
        }
        labels
            .get(labels::SHARD)
            .and_then(|v| v.as_str())
            .or(placement.shard)
            .map(str::to_string)
    }

    /// Moves each of `parents` the plan says to, [`PLACING`] at once; returns the
    /// member each is (or goes) to.
    pub(super) async fn place_all(
        &self,
        resolved: &Resolved,
        parents: &[PartialObjectMeta<DynamicObject>],
        ring: &Ring,
    ) -> Vec<String> {
        let mut waiting = parents.iter();
        let mut placing = FuturesUnordered::new();
        let mut members = Vec::new();
        loop {
            while placing.len() < PLACING
                && let Some(meta) = waiting.next()
            {
                placing.push(self.place(resolved, meta, ring));
            }
            match placing.next().await {
                Some(member) => members.extend(member),
                None => return members,
            }
        }
    }
}

/// A parent's metadata cut to what placing reads: its name, namespace, uid,
/// resourceVersion and labels. Its managedFields and annotations, most of its size, go.
pub(super) fn placing_view(meta: PartialObjectMeta<DynamicObject>) -> PartialObjectMeta<DynamicObject> {
    let m = meta.metadata;
    PartialObjectMeta {
        metadata: ObjectMeta {
            name: m.name,
            namespace: m.namespace,
            uid: m.uid,
            resource_version: m.resource_version,
            labels: m.labels,
            ..ObjectMeta::default()
        },
        ..meta
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::Leases;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    use std::collections::BTreeMap;
    use std::time::{Duration, Instant};

    #[test]
    fn the_placing_view_keeps_what_the_plan_reads_and_drops_the_rest() {
        let labels = BTreeMap::from([(labels::SHARD.to_string(), "a".to_string())]);
        let meta = PartialObjectMeta::<DynamicObject> {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                uid: Some("u1".into()),
                resource_version: Some("42".into()),
                labels: Some(labels),
                annotations: Some(BTreeMap::from([("a".into(), "b".repeat(1000))])),
                managed_fields: Some(vec![ManagedFieldsEntry::default(); 3]),
                ..ObjectMeta::default()
            },
            types: None,
            _phantom: std::marker::PhantomData,
        };
        let mut leases = Leases::new(Duration::from_secs(15));
        leases.observe("a", Some("a"), "t0", Instant::now());
        leases.observe("b", Some("b"), "t0", Instant::now());
        let ring = leases.ring(Instant::now());
        let whole = plan(Placement::of("u1", meta.metadata.labels.as_ref()), &ring);
        let view = placing_view(meta.clone());
        let cut = plan(Placement::of("u1", view.metadata.labels.as_ref()), &ring);
        assert_eq!(whole, cut, "the same plan from the view");
        let m = &view.metadata;
        assert_eq!(
            (m.name.as_deref(), m.namespace.as_deref(), m.resource_version.as_deref()),
            (Some("p"), Some("ns"), Some("42"))
        );
        assert!(m.managed_fields.is_none() && m.annotations.is_none());
    }
}
