//! The children a sync works on: a composite's claimed by the ControllerRef rules (orphans
//! its selector matches adopted, owned ones it stops matching released), a decorator's
//! attachments found by its controller reference and annotation (never adopted).

use kube::ResourceExt as _;
use kube::api::{ListParams, Patch, PatchParams};
use kube::core::DynamicObject;
use kube::{Api, Resource as _};
use serde_json::{Value, json};

use super::resolve::Resolved;
use super::served::Role;
use super::sync::{Sync, SyncError};
use crate::metacontroller::{claim, decorate};
use crate::selector::Matcher;

impl Sync<'_> {
    /// The parent's children of every kind, and for a composite the parent's selector.
    pub(super) async fn owned(&self) -> Result<(Vec<Value>, Option<Matcher>), SyncError> {
        let selector = match &self.ctx.served.role {
            Role::Composite { generate_selector } => {
                Some(claim::parent_selector(self.object, *generate_selector).map_err(|e| self.refused(e))?)
            }
            Role::Decorator { .. } => None,
        };
        let mut owned = Vec::new();
        for (resolved, _) in &self.ctx.children {
            let api = self.api(resolved);
            let listed = api.list(&ListParams::default()).await.map_err(|e| self.api_error(e))?;
            let candidates: Vec<Value> = listed.items.iter().map(|o| resolved.typed(o)).collect();
            match &selector {
                Some(selector) => owned.extend(self.claim(resolved, selector, &candidates).await?),
                None => owned.extend(decorate::attachments_of(
                    &self.ctx.served.name,
                    self.object,
                    &candidates,
                )),
            }
        }
        Ok((owned, selector))
    }

    /// The candidates the parent owns once orphans are adopted and strays released.
    async fn claim(
        &self,
        resolved: &Resolved,
        selector: &Matcher,
        candidates: &[Value],
    ) -> Result<Vec<Value>, SyncError> {
        let claims = claim::claim(self.object, selector, candidates);
        for orphan in &claims.adopt {
            self.set_controller(&self.api_of(resolved, orphan), orphan, true)
                .await?;
        }
        for stray in &claims.release {
            self.set_controller(&self.api_of(resolved, stray), stray, false).await?;
        }
        Ok(claims.owned.into_iter().chain(claims.adopt).collect())
    }

    /// Gives `object` the parent's controller reference (`adopt`) or takes it away, with
    /// its resourceVersion as precondition.
    async fn set_controller(&self, api: &Api<DynamicObject>, object: &Value, adopt: bool) -> Result<(), SyncError> {
        let uid = self.parent.uid().unwrap_or_default();
        let mut refs: Vec<Value> = object
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(&uid));
        if adopt {
            let owner = self.parent.controller_owner_ref(&self.ctx.parent.resource);
            refs.push(serde_json::to_value(owner).unwrap_or_default());
        }
        let patch = json!({"metadata": {"ownerReferences": refs,
            "resourceVersion": object.pointer("/metadata/resourceVersion")}});
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| self.api_error(e))?;
        Ok(())
    }
}
