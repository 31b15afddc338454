//! The sharder's full sync: every parent of every kind planned against one ring, and
//! each member's share counted. It runs beside the sharder's loop, not in it: at
//! 30,000 parents the list alone takes about half a minute, and meanwhile the loop
//! keeps taking in renewals and placing new parents.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::api::{DynamicObject, ListParams, PartialObjectMeta};

use super::placer::{Placer, placing_view};
use crate::discovery::{self, Resolved};
use crate::metrics::{MemberLabel, Metrics};
use crate::shard::Ring;

/// Parents listed per page: a sync holds one page of whole metadata (managedFields
/// included) at a time, not every parent's.
const PAGE: u32 = 500;

/// What a full sync needs, owned, so that it runs while the sharder's loop goes on.
pub(super) struct FullSync {
    pub(super) placer: Arc<Placer>,
    /// The parent kinds, as discovered.
    pub(super) kinds: Vec<Arc<Resolved>>,
    pub(super) metrics: Arc<Metrics>,
}

impl FullSync {
    /// Plans every parent of every kind against `ring`, and counts each member's share.
    pub(super) async fn run(self, ring: Ring) {
        let mut shares: BTreeMap<String, i64> = ring.ready().map(|m| (m.to_string(), 0)).collect();
        for resolved in &self.kinds {
            let parents = match self.list_parents(resolved).await {
                Ok(parents) => parents,
                Err(e) => {
                    tracing::warn!(kind = %resolved.resource.kind, error = %e, "cannot list the parents to assign");
                    continue;
                }
            };
            for member in self.placer.place_all(resolved, &parents, &ring).await {
                *shares.entry(member).or_insert(0) += 1;
            }
        }
        for (member, n) in shares {
            self.metrics.shard_parents.get_or_create(&MemberLabel { member }).set(n);
        }
    }

    /// Every parent of a kind, listed [`PAGE`] at a time, each cut to what placing reads
    /// ([`placing_view`]). The whole list is read before any is placed, so a sync that
    /// moves many parents never outlives its continue token.
    async fn list_parents(&self, resolved: &Resolved) -> Result<Vec<PartialObjectMeta<DynamicObject>>, kube::Error> {
        let api = discovery::api(&self.placer.client, self.placer.scope(resolved), &resolved.resource);
        let mut params = ListParams::default().limit(PAGE);
        let mut parents = Vec::new();
        loop {
            let page = api.list_metadata(&params).await?;
            parents.extend(page.items.into_iter().map(placing_view));
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => return Ok(parents),
            }
        }
    }
}
