//! One sync of one CompositeController parent, as metacontroller does it: the children
//! claimed (orphans that match adopted, strays released), the sync hook (or, while the
//! parent is deleted and a finalize hook exists, the finalize hook) called with them, its
//! children applied by their update methods and the ones it leaves out deleted, its
//! status written in place of the parent's with `observedGeneration`, and the parent's
//! finalizer kept while a finalize hook has not answered `finalized: true`. A failed hook
//! writes nothing and is retried with backoff (a 429 after its Retry-After).

use std::sync::Arc;
use std::time::Duration;

use kube::api::{ListParams, Patch, PatchParams};
use kube::core::DynamicObject;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Api, Client, ResourceExt as _};
use serde_json::{Value, json};

use super::composite::Resolved;
use crate::hooks::{CallError, HookClient, Target};
use crate::metacontroller::api::{CompositeController, Hook, HookVersion};
use crate::metacontroller::claim::{self, Claims};
use crate::metacontroller::composite_finalizer;
use crate::metacontroller::hook::{self, Shape, SyncResponse};
use crate::metacontroller::plan::{self, ChildKind, Owner};

/// How soon a failed sync is tried again.
const RETRY: Duration = Duration::from_secs(5);

/// Why a sync stopped.
#[derive(Debug, thiserror::Error)]
pub(super) enum SyncError {
    /// The hook gave no answer.
    #[error("{controller}: {parent}: {source}")]
    Hook {
        controller: String,
        parent: String,
        #[source]
        source: CallError,
    },
    /// The hook cannot be called, or its answer cannot be followed.
    #[error("{controller}: {parent}: {message}")]
    Refused {
        controller: String,
        parent: String,
        message: String,
    },
    /// The API server refused a read or write.
    #[error("{controller}: {parent}: {source}")]
    Api {
        controller: String,
        parent: String,
        #[source]
        source: kube::Error,
    },
}

/// What every sync of one CompositeController shares.
pub(super) struct Context {
    client: Client,
    hooks: Arc<HookClient>,
    cc: Arc<CompositeController>,
    /// The controller object as hooks receive it.
    controller: Value,
    pub(super) parent: Resolved,
    pub(super) children: Vec<(Resolved, ChildKind)>,
    /// Where a failed sync is said, on its parent.
    events: Recorder,
}

impl Context {
    pub(super) fn new(
        client: Client,
        hooks: Arc<HookClient>,
        cc: Arc<CompositeController>,
        parent: Resolved,
        children: Vec<(Resolved, ChildKind)>,
    ) -> Context {
        let controller = serde_json::to_value(cc.as_ref()).unwrap_or_default();
        let reporter = Reporter {
            controller: crate::labels::FIELD_MANAGER.into(),
            instance: None,
        };
        Context {
            events: Recorder::new(client.clone(), reporter),
            client,
            hooks,
            cc,
            controller,
            parent,
            children,
        }
    }

    fn name(&self) -> String {
        self.cc.name_any()
    }

    fn generate_selector(&self) -> bool {
        self.cc.spec.generate_selector.unwrap_or(false)
    }

    fn hooks(&self) -> crate::metacontroller::api::CompositeHooks {
        self.cc.spec.hooks.clone().unwrap_or_default()
    }
}

/// The error policy: a busy hook is asked again after its Retry-After, anything else
/// after [`RETRY`].
pub(super) fn error_policy(_: Arc<DynamicObject>, error: &SyncError, _: Arc<Context>) -> Action {
    tracing::warn!(error = %error, "sync failed; nothing was deleted");
    match error {
        SyncError::Hook {
            source: CallError::RetryAfter { after, .. },
            ..
        } => Action::requeue(*after),
        _ => Action::requeue(RETRY),
    }
}

/// Syncs one parent.
pub(super) async fn reconcile(parent: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, SyncError> {
    let object = serde_json::to_value(parent.as_ref()).unwrap_or_default();
    let sync = Sync {
        ctx: &ctx,
        parent: &parent,
        object: &object,
    };
    let outcome = sync.run().await;
    if let Err(error) = &outcome {
        let reason = match error {
            SyncError::Hook { .. } => "HookFailed",
            SyncError::Refused { .. } => "HookRefused",
            SyncError::Api { .. } => "WriteFailed",
        };
        let event = Event {
            type_: EventType::Warning,
            reason: reason.into(),
            note: Some(error.to_string().chars().take(1000).collect()),
            action: "Sync".into(),
            secondary: None,
        };
        let regarding = kube::Resource::object_ref(parent.as_ref(), &ctx.parent.resource);
        if let Err(e) = ctx.events.publish(&event, &regarding).await {
            tracing::debug!(error = %e, "the event of a failed sync was not published");
        }
    }
    outcome
}

/// One sync in progress.
pub(super) struct Sync<'a> {
    pub(super) ctx: &'a Context,
    pub(super) parent: &'a DynamicObject,
    pub(super) object: &'a Value,
}

impl Sync<'_> {
    async fn run(&self) -> Result<Action, SyncError> {
        let hooks = self.ctx.hooks();
        let deleting = self.parent.metadata.deletion_timestamp.is_some();
        let finalizer = composite_finalizer(&self.ctx.name());
        if deleting && (hooks.finalize.is_none() || !self.parent.finalizers().contains(&finalizer)) {
            return Ok(Action::await_change());
        }
        if hooks.finalize.is_some() && !deleting {
            self.ensure_finalizer(&finalizer).await?;
        }
        let selector =
            claim::parent_selector(self.object, self.ctx.generate_selector()).map_err(|e| self.refused(e))?;
        let claims = self.claim(&selector).await?;
        let hook = if deleting { hooks.finalize } else { hooks.sync };
        let hook = hook.ok_or_else(|| self.refused("no hook to call"))?;
        let mut answer = self.call(&hook, &claims.owned, deleting).await?;
        claim::label_desired(
            self.object,
            &selector,
            self.ctx.generate_selector(),
            &mut answer.children,
        )
        .map_err(|e| self.refused(e))?;
        let kinds: Vec<ChildKind> = self.ctx.children.iter().map(|(_, k)| k.clone()).collect();
        let owner = Owner {
            parent: self.object,
            decorator: None,
        };
        let writes = plan::plan(&owner, &kinds, &claims.owned, std::mem::take(&mut answer.children))
            .map_err(|e| self.refused(e))?;
        for write in writes {
            self.write(write).await?;
        }
        if let Some(status) = answer.status.take() {
            self.write_status(status).await?;
        }
        if deleting && answer.finalized {
            self.remove_finalizer(&finalizer).await?;
        }
        Ok(self.next(&answer))
    }

    /// When to sync again: after the hook's `resyncAfterSeconds`, else the controller's
    /// resync period, else on the next change.
    fn next(&self, answer: &SyncResponse) -> Action {
        if answer.resync_after_seconds > 0.0 {
            // An answer too large for a Duration waits for the next change instead.
            return Duration::try_from_secs_f64(answer.resync_after_seconds)
                .map_or(Action::await_change(), Action::requeue);
        }
        match self.ctx.cc.spec.resync_period_seconds {
            Some(s) if s > 0 => Action::requeue(Duration::from_secs(s.unsigned_abs().into())),
            _ => Action::await_change(),
        }
    }

    fn describe(&self) -> String {
        match self.parent.namespace() {
            Some(ns) => format!("{} {ns}/{}", self.ctx.parent.resource.kind, self.parent.name_any()),
            None => format!("{} {}", self.ctx.parent.resource.kind, self.parent.name_any()),
        }
    }

    fn refused(&self, message: impl ToString) -> SyncError {
        SyncError::Refused {
            controller: self.ctx.name(),
            parent: self.describe(),
            message: message.to_string(),
        }
    }

    pub(super) fn api_error(&self, source: kube::Error) -> SyncError {
        SyncError::Api {
            controller: self.ctx.name(),
            parent: self.describe(),
            source,
        }
    }

    /// The API of `resource` where the parent's children live.
    pub(super) fn api(&self, resolved: &Resolved) -> Api<DynamicObject> {
        match (resolved.namespaced, self.parent.namespace()) {
            (true, Some(ns)) => Api::namespaced_with(self.ctx.client.clone(), &ns, &resolved.resource),
            _ => Api::all_with(self.ctx.client.clone(), &resolved.resource),
        }
    }

    /// The parent's children of every kind: claimed, adopted or released as the
    /// ControllerRef rules say.
    async fn claim(&self, selector: &crate::selector::Matcher) -> Result<Claims, SyncError> {
        let mut all = Claims::default();
        for (resolved, _) in &self.ctx.children {
            let api = self.api(resolved);
            let listed = api.list(&ListParams::default()).await.map_err(|e| self.api_error(e))?;
            let candidates: Vec<Value> = listed.items.iter().map(|o| with_type(o, &resolved.resource)).collect();
            let claims = claim::claim(self.object, selector, &candidates);
            for orphan in &claims.adopt {
                self.set_controller(&api, orphan, true).await?;
            }
            for stray in &claims.release {
                self.set_controller(&api, stray, false).await?;
            }
            all.owned.extend(claims.owned);
            all.owned.extend(claims.adopt);
        }
        Ok(all)
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
            refs.push(
                json!({"apiVersion": self.object["apiVersion"], "kind": self.object["kind"],
                "name": self.parent.name_any(), "uid": uid, "controller": true, "blockOwnerDeletion": true}),
            );
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

    /// Calls `hook` with the parent and its children.
    async fn call(&self, hook: &Hook, owned: &[Value], finalizing: bool) -> Result<SyncResponse, SyncError> {
        let webhook = hook.webhook.clone().unwrap_or_default();
        let target = Target::of(&webhook).map_err(|e| self.refused(e))?;
        let version = hook.version.unwrap_or(HookVersion::V1);
        let kinds: Vec<(String, String)> = self
            .ctx
            .children
            .iter()
            .map(|(_, k)| (k.api_version.clone(), k.kind.clone()))
            .collect();
        let children = hook::object_map(version, self.object, &kinds, owned);
        let body = hook::sync_request(
            Shape::Composite,
            &self.ctx.controller,
            self.object,
            children,
            json!({}),
            finalizing,
        );
        let answer = self
            .ctx
            .hooks
            .call(&target, &body)
            .await
            .map_err(|source| SyncError::Hook {
                controller: self.ctx.name(),
                parent: self.describe(),
                source,
            })?;
        let strict = hook::strict(version, webhook.response_unmarshall_mode.as_deref());
        hook::sync_response(Shape::Composite, &answer, strict).map_err(|e| self.refused(e))
    }
}

/// A listed object as JSON with its apiVersion and kind (a list's items may lack them).
fn with_type(object: &DynamicObject, resource: &kube::core::ApiResource) -> Value {
    let mut value = serde_json::to_value(object).unwrap_or_default();
    value["apiVersion"] = resource.api_version.clone().into();
    value["kind"] = resource.kind.clone().into();
    value
}
