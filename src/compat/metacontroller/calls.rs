//! The hook calls of one sync: the customize hook (once per parent generation) and the
//! objects its rules relate, then the sync or finalize hook with the parent, its
//! children and those related objects, each keyed as the called hook's version says.

use std::sync::Arc;

use kube::ResourceExt as _;
use serde_json::Value;

use super::metered;
use super::sync::{Sync, SyncError};
use crate::hooks::Target;
use crate::metacontroller::api::Hook;
use crate::metacontroller::hook::{self, SyncResponse};

/// Observed objects: the kinds they are grouped under (`(apiVersion, kind)`, each sent
/// even when empty) and the objects.
pub(super) type Observed = (Vec<(String, String)>, Vec<Value>);

impl Sync<'_> {
    /// Calls `hook` with the parent, its children (`owned`) and `related` objects.
    pub(super) async fn call(
        &self,
        hook: &Hook,
        owned: &[Value],
        related: &Observed,
        finalizing: bool,
    ) -> Result<SyncResponse, SyncError> {
        let version = hook.version.unwrap_or_default();
        let kinds: Vec<(String, String)> = self
            .ctx
            .children
            .iter()
            .map(|(_, k)| (k.api_version.clone(), k.kind.clone()))
            .collect();
        let body = hook::sync_request(
            self.ctx.served.shape(),
            &self.ctx.served.object,
            self.object,
            hook::object_map(version, self.object, &kinds, owned),
            hook::object_map(version, self.object, &related.0, &related.1),
            finalizing,
        );
        let answer = self
            .post(hook, if finalizing { "finalize" } else { "sync" }, &body)
            .await?;
        let mode = hook
            .webhook
            .as_ref()
            .and_then(|w| w.response_unmarshall_mode.as_deref());
        hook::sync_response(self.ctx.served.shape(), &answer, hook::strict(version, mode)).map_err(|e| self.refused(e))
    }

    /// The objects the customize hook's rules relate to the parent; none without one.
    pub(super) async fn related(&self) -> Result<Observed, SyncError> {
        let Some(customize) = &self.ctx.served.customize else {
            return Ok(Observed::default());
        };
        let uid = self.parent.uid().unwrap_or_default();
        let generation = self.parent.metadata.generation.unwrap_or_default();
        let rules = match self.ctx.related.cached(&uid, generation) {
            Some(rules) => rules,
            None => {
                let body = hook::customize_request(&self.ctx.served.object, self.object);
                let answer = self.post(customize, "customize", &body).await?;
                let rules = Arc::new(hook::customize_response(&answer).map_err(|e| self.refused(e))?);
                self.ctx.related.cache(uid, generation, rules.clone());
                rules
            }
        };
        self.ctx
            .related
            .objects(self.parent, &rules)
            .await
            .map_err(|message| SyncError::Related {
                controller: self.ctx.served.name.clone(),
                parent: self.describe(),
                message,
            })
    }

    /// Posts `body` to `hook` (named `name` in metrics); its answer's body.
    async fn post(&self, hook: &Hook, name: &str, body: &Value) -> Result<bytes::Bytes, SyncError> {
        let webhook = hook.webhook.clone().unwrap_or_default();
        let target = Target::of(&webhook).map_err(|e| self.refused(e))?;
        let started = std::time::Instant::now();
        let answer = self.ctx.hooks.client.call(&target, body).await;
        let metrics = &self.ctx.hooks.metrics;
        metered::called(metrics, &self.ctx.served.metric_name(), name, started, &answer);
        answer.map_err(|source| SyncError::Hook {
            controller: self.ctx.served.name.clone(),
            parent: self.describe(),
            source,
        })
    }
}
