//! One sync of one object a controller object serves (a composite's parent, a
//! decorator's object), as metacontroller does it: the controller's finalizer added or
//! taken away as the object's life says (`lifecycle`), its children found, the sync hook
//! (or the finalize hook, for an object being deleted or, for a decorator, no longer
//! selected) called with them, the children applied by their update methods and the ones
//! it leaves out deleted, a decorator's labels and annotations set, the hook's status
//! written in place of the object's, and the finalizer removed once the finalize hook
//! answers `finalized: true`. A failed hook writes nothing and is retried with backoff
//! (a 429 after its Retry-After).

use std::sync::Arc;
use std::time::Duration;

use kube::core::DynamicObject;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Api, Client, ResourceExt as _};
use serde_json::Value;

use super::Hooks;
use super::related::Related;
use super::resolve::Resolved;
use super::served::{Role, Served};
use crate::hooks::CallError;
use crate::metacontroller::hook::SyncResponse;
use crate::metacontroller::lifecycle::{self, Call, Finalizer, Observed};
use crate::metacontroller::plan::{self, ChildKind, Owner};
use crate::metacontroller::{claim, decorate};

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
    /// The customize hook's related objects cannot be read yet.
    #[error("{controller}: {parent}: {message}")]
    Related {
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

/// What every sync of one parent resource of a controller object shares.
pub(super) struct Context {
    pub(super) client: Client,
    pub(super) hooks: Arc<Hooks>,
    pub(super) served: Served,
    pub(super) parent: Resolved,
    pub(super) children: Vec<(Resolved, ChildKind)>,
    pub(super) related: Related,
    /// Where a failed sync is said, on its parent.
    events: Recorder,
}

impl Context {
    pub(super) fn new(
        client: Client,
        hooks: Arc<Hooks>,
        served: Served,
        parent: Resolved,
        children: Vec<(Resolved, ChildKind)>,
        related: Related,
    ) -> Context {
        let reporter = Reporter {
            controller: crate::labels::FIELD_MANAGER.into(),
            instance: None,
        };
        Context {
            events: Recorder::new(client.clone(), reporter),
            client,
            hooks,
            served,
            parent,
            children,
            related,
        }
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
    // Typed: a listed object of a built-in kind has no apiVersion or kind of its own,
    // and the children's owner references need them.
    let object = ctx.parent.typed(&parent);
    let sync = Sync {
        ctx: &ctx,
        parent: &parent,
        object: &object,
    };
    let started = std::time::Instant::now();
    let outcome = sync.run().await;
    ctx.hooks.metrics.reconciled(
        &ctx.served.metric_name(),
        started.elapsed().as_secs_f64(),
        outcome.is_ok(),
    );
    if let Err(error) = &outcome {
        let reason = match error {
            SyncError::Hook { .. } => "HookFailed",
            SyncError::Refused { .. } => "HookRefused",
            SyncError::Api { .. } => "WriteFailed",
            SyncError::Related { .. } => "RelatedUnavailable",
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
        let served = &self.ctx.served;
        let finalizer = served.finalizer();
        let steps = lifecycle::steps(Observed {
            finalize_hook: served.finalize.is_some(),
            finalizer: self.parent.finalizers().contains(&finalizer),
            deleting: self.parent.metadata.deletion_timestamp.is_some(),
            selected: served.selects(self.object).map_err(|e| self.refused(e))?,
        });
        match steps.finalizer {
            Finalizer::Add => self.ensure_finalizer(&finalizer).await?,
            Finalizer::Remove => self.remove_finalizer(&finalizer).await?,
            Finalizer::Keep => {}
        }
        let Some(call) = steps.call else {
            return Ok(Action::await_change());
        };
        let finalizing = call == Call::Finalize;
        let hook = if finalizing { &served.finalize } else { &served.sync };
        let hook = hook.as_ref().ok_or_else(|| self.refused("no hook to call"))?;
        let (owned, selector) = self.owned().await?;
        let related = self.related().await?;
        let mut answer = self.call(hook, &owned, &related, finalizing).await?;
        if let (Some(selector), Role::Composite { generate_selector }) = (&selector, &served.role) {
            claim::label_desired(self.object, selector, *generate_selector, &mut answer.children)
                .map_err(|e| self.refused(e))?;
        }
        let kinds: Vec<ChildKind> = self.ctx.children.iter().map(|(_, k)| k.clone()).collect();
        let owner = Owner {
            parent: self.object,
            decorator: served.decorator_name(),
        };
        let writes =
            plan::plan(&owner, &kinds, &owned, std::mem::take(&mut answer.children)).map_err(|e| self.refused(e))?;
        for write in writes {
            self.write(write).await?;
        }
        if let Some(patch) = decorate::metadata_patch(self.object, &answer) {
            self.write_metadata(&patch).await?;
        }
        if let Some(status) = answer.status.take() {
            self.write_status(status).await?;
        }
        if finalizing && answer.finalized {
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
        match self.ctx.served.resync_period_seconds {
            Some(s) if s > 0 => Action::requeue(Duration::from_secs(s.unsigned_abs().into())),
            _ => Action::await_change(),
        }
    }

    pub(super) fn describe(&self) -> String {
        match self.parent.namespace() {
            Some(ns) => format!("{} {ns}/{}", self.ctx.parent.resource.kind, self.parent.name_any()),
            None => format!("{} {}", self.ctx.parent.resource.kind, self.parent.name_any()),
        }
    }

    pub(super) fn refused(&self, message: impl ToString) -> SyncError {
        SyncError::Refused {
            controller: self.ctx.served.name.clone(),
            parent: self.describe(),
            message: message.to_string(),
        }
    }

    pub(super) fn api_error(&self, source: kube::Error) -> SyncError {
        SyncError::Api {
            controller: self.ctx.served.name.clone(),
            parent: self.describe(),
            source,
        }
    }

    /// The API of `resource` where the parent's children live: the parent's namespace, or
    /// every namespace under a cluster-scoped parent.
    pub(super) fn api(&self, resolved: &Resolved) -> Api<DynamicObject> {
        self.api_in(resolved, self.parent.namespace().as_deref())
    }

    /// The API of `resource` where `object` lives (a cluster-scoped parent's children are
    /// written in their own namespaces).
    pub(super) fn api_of(&self, resolved: &Resolved, object: &Value) -> Api<DynamicObject> {
        self.api_in(resolved, object.pointer("/metadata/namespace").and_then(Value::as_str))
    }

    fn api_in(&self, resolved: &Resolved, namespace: Option<&str>) -> Api<DynamicObject> {
        match (resolved.namespaced, namespace) {
            (true, Some(ns)) => Api::namespaced_with(self.ctx.client.clone(), ns, &resolved.resource),
            _ => Api::all_with(self.ctx.client.clone(), &resolved.resource),
        }
    }
}
