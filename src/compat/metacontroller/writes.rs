//! The writes of one sync: the planned children (created or applied server-side, deleted
//! by uid, a taken-over child's last-applied annotation removed), the parent's finalizer
//! (with its resourceVersion as precondition), a decorator's labels and annotations (only
//! the keys its hook named) and the parent's status.

use kube::ResourceExt as _;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use serde_json::{Value, json};

use super::served::Role;
use super::sync::{Sync, SyncError};
use crate::labels::FIELD_MANAGER;
use crate::metacontroller::LAST_APPLIED;
use crate::metacontroller::plan::Write;

impl Sync<'_> {
    /// Carries out one write of the plan.
    pub(super) async fn write(&self, write: Write) -> Result<(), SyncError> {
        let object = match &write {
            Write::Forget(o) | Write::Create(o) | Write::Apply(o) | Write::Recreate(o) | Write::Delete(o) => o,
        };
        let Some((resolved, _)) = self.ctx.children.iter().find(|(r, _)| {
            r.resource.api_version == field(object, "/apiVersion") && r.resource.kind == field(object, "/kind")
        }) else {
            return Ok(());
        };
        let api = self.api_of(resolved, object);
        let name = field(object, "/metadata/name");
        let result = match &write {
            Write::Forget(_) => {
                let patch = json!({"metadata": {"annotations": {LAST_APPLIED: null}}});
                api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(drop)
            }
            Write::Create(o) | Write::Apply(o) => {
                let params = PatchParams::apply(FIELD_MANAGER).force();
                api.patch(name, &params, &Patch::Apply(o)).await.map(drop)
            }
            Write::Recreate(o) | Write::Delete(o) => {
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: Some(field(o, "/metadata/uid").to_string()),
                        resource_version: None,
                    }),
                    ..DeleteParams::background()
                };
                match api.delete(name, &params).await {
                    Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
                    other => other.map(drop),
                }
            }
        };
        result.map_err(|e| self.api_error(e))
    }

    /// Replaces the parent's status with the hook's (a composite's with
    /// `observedGeneration`), through the status subresource when the kind has one;
    /// writes nothing when it holds that already.
    pub(super) async fn write_status(&self, mut status: Value) -> Result<(), SyncError> {
        let composite = matches!(self.ctx.served.role, Role::Composite { .. });
        if let (true, Some(map), Some(generation)) =
            (composite, status.as_object_mut(), self.parent.metadata.generation)
        {
            map.insert("observedGeneration".into(), generation.into());
        }
        if self.object.get("status") == Some(&status) {
            return Ok(());
        }
        let api = self.api(&self.ctx.parent);
        let patch = json!([{"op": "add", "path": "/status", "value": status}]);
        let patch = Patch::<Value>::Json(serde_json::from_value(patch).expect("a JSON patch"));
        let name = self.parent.name_any();
        let written = if self.ctx.parent.status_subresource {
            api.patch_status(&name, &PatchParams::default(), &patch).await
        } else {
            api.patch(&name, &PatchParams::default(), &patch).await
        };
        written.map_err(|e| self.api_error(e))?;
        Ok(())
    }

    /// Gives a decorator's object the labels and annotations its hook answered with.
    pub(super) async fn write_metadata(&self, patch: &Value) -> Result<(), SyncError> {
        self.api(&self.ctx.parent)
            .patch(&self.parent.name_any(), &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(|e| self.api_error(e))?;
        Ok(())
    }

    pub(super) async fn ensure_finalizer(&self, finalizer: &str) -> Result<(), SyncError> {
        if self.parent.finalizers().iter().any(|f| f == finalizer) {
            return Ok(());
        }
        let mut finalizers = self.parent.finalizers().to_vec();
        finalizers.push(finalizer.to_string());
        self.set_finalizers(finalizers).await
    }

    pub(super) async fn remove_finalizer(&self, finalizer: &str) -> Result<(), SyncError> {
        let finalizers = self
            .parent
            .finalizers()
            .iter()
            .filter(|f| *f != finalizer)
            .cloned()
            .collect();
        self.set_finalizers(finalizers).await
    }

    /// Sets the parent's finalizers, with its resourceVersion as precondition.
    pub(super) async fn set_finalizers(&self, finalizers: Vec<String>) -> Result<(), SyncError> {
        let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": self.parent.resource_version()}});
        self.api(&self.ctx.parent)
            .patch(&self.parent.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| self.api_error(e))?;
        Ok(())
    }
}

fn field<'v>(object: &'v Value, pointer: &str) -> &'v str {
    object.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}
