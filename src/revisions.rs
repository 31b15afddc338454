//! A definition's revisions as `ControllerRevision`s (apps/v1) in Stencil's namespace: each
//! accepted version is kept once, named after the definition and the hash of what rolls
//! out, numbered in order, and the history is cut to `revisionHistoryLimit` without ever
//! removing a revision a rollout still serves.

use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};

use crate::definition::{DEFAULT_REVISION_HISTORY_LIMIT, OperatorDefinitionSpec, RolloutStatus};
use crate::labels;
use crate::rollout::{begin, revision_hash, revision_object};

/// Why a revision could not be read or kept.
#[derive(Debug, thiserror::Error)]
pub enum RevisionError {
    /// The API server refused or did not answer.
    #[error("{action} ControllerRevisions of {definition} in namespace {namespace}: {source}")]
    Kube {
        /// What was asked: `list`, `get`, `create`, `patch`, `delete`.
        action: &'static str,
        /// The definition's name.
        definition: String,
        /// Stencil's namespace.
        namespace: String,
        /// The API server's answer (boxed: it is large, and this error is returned often).
        #[source]
        source: Box<kube::Error>,
    },
    /// A revision holds something that is not a definition spec.
    #[error("ControllerRevision {name} holds no definition spec: {source}")]
    Data {
        /// The revision's name.
        name: String,
        /// Why its data did not read as a spec.
        #[source]
        source: serde_json::Error,
    },
}

/// One kept revision.
#[derive(Debug, Clone, PartialEq)]
pub struct Revision {
    /// The `ControllerRevision`'s name, `<definition>-<hash>`.
    pub name: String,
    /// Its number: 1 for the first revision, one more for each later one.
    pub number: i64,
    /// The spec it keeps.
    pub spec: OperatorDefinitionSpec,
    /// Where the definition's rollout stood when this was the newest revision
    /// (`stencil.dev/rollout`); the newest revision's is the rollout's state now.
    pub rollout: Option<RolloutStatus>,
}

/// A definition's rollout as its revisions keep it.
#[derive(Debug, Clone, PartialEq)]
pub struct Kept {
    /// Where the rollout stands.
    pub rollout: RolloutStatus,
    /// Every revision kept, oldest first.
    pub revisions: Vec<Revision>,
}

impl Kept {
    /// The spec of revision `name`, if it is kept.
    pub fn spec(&self, name: &str) -> Option<&OperatorDefinitionSpec> {
        self.revisions.iter().find(|r| r.name == name).map(|r| &r.spec)
    }

    /// The revision before the one parents render (the current one): the newest older
    /// than it other than the updated one.
    pub fn before_current(&self) -> Option<String> {
        let current = self
            .revisions
            .iter()
            .find(|r| r.name == self.rollout.current_revision)?;
        self.revisions
            .iter()
            .filter(|r| r.number < current.number && r.name != self.rollout.updated_revision)
            .max_by_key(|r| r.number)
            .map(|r| r.name.clone())
    }
}

/// The revisions of one definition.
pub struct Revisions {
    api: Api<ControllerRevision>,
    namespace: String,
    definition: String,
}

impl Revisions {
    /// The revisions of `definition`, kept in `namespace`.
    pub fn new(client: &Client, namespace: &str, definition: &str) -> Self {
        Revisions {
            api: Api::namespaced(client.clone(), namespace),
            namespace: namespace.to_string(),
            definition: definition.to_string(),
        }
    }

    fn failed(&self, action: &'static str) -> impl FnOnce(kube::Error) -> RevisionError + '_ {
        move |source| RevisionError::Kube {
            action,
            definition: self.definition.clone(),
            namespace: self.namespace.clone(),
            source: Box::new(source),
        }
    }

    /// Every kept revision, oldest first.
    ///
    /// # Errors
    ///
    /// The list is refused or fails, or a revision holds no spec.
    pub async fn list(&self) -> Result<Vec<Revision>, RevisionError> {
        let selector = format!("{}={}", labels::DEFINITION, labels::label_value(&self.definition));
        let list = self
            .api
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(self.failed("list"))?;
        let mut kept = Vec::new();
        for object in list.items {
            // The label can be shared by two long names cut to the same value.
            if object.name_any().starts_with(&self.definition) {
                kept.push(read_revision(object)?);
            }
        }
        kept.sort_by_key(|r| r.number);
        Ok(kept)
    }

    /// Keeps `spec` as the newest revision and says where the rollout to it stands: a new
    /// revision begins a rollout from where the newest kept state stood, an existing one
    /// keeps its own ([`crate::rollout::begin`]). A revision and its state are written in
    /// one request, so no failure between two writes leaves a newest revision without a
    /// state (which would read as a finished rollout and move every parent at once).
    /// Then cuts the history to `limit` (5 unless set) newest revisions, keeping every
    /// one the rollout serves. Writes nothing when the revision is the newest already, its
    /// state unchanged and the history within its limit (a restart).
    ///
    /// # Errors
    ///
    /// A list, get, create, patch or delete the API server refuses or does not answer.
    pub async fn keep(&self, spec: &OperatorDefinitionSpec, now: &str) -> Result<Kept, RevisionError> {
        let hash = revision_hash(spec);
        let mut kept = self.list().await?;
        // A revision an older Stencil created may have no state: the newest one that has.
        let before = kept.iter().rev().find_map(|r| r.rollout.clone());
        let existing = kept.iter().find(|r| revision_hash(&r.spec) == hash).cloned();
        let newest = kept.last().map_or(0, |r| r.number);
        let revision = match existing {
            Some(r) if r.number == newest => {
                let rollout = begin(&spec.rollout, r.rollout.as_ref().or(before.as_ref()), &r.name, now);
                if r.rollout.as_ref() != Some(&rollout) {
                    self.save(&r.name, &rollout, None).await?;
                }
                Revision {
                    rollout: Some(rollout),
                    ..r
                }
            }
            // An edit back to an earlier version: it becomes the newest again, as a
            // Deployment's rollback does, so the one before it is the one it replaced.
            Some(r) => {
                let rollout = begin(&spec.rollout, before.as_ref(), &r.name, now);
                let mut patch = state_patch(&rollout);
                patch["revision"] = (newest + 1).into();
                let patched = self
                    .api
                    .patch(&r.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(self.failed("patch"))?;
                read_revision(patched)?
            }
            None => self.create(spec, newest + 1, before.as_ref(), now).await?,
        };
        let rollout = revision.rollout.clone().expect("a kept revision has its state");
        kept.retain(|k| k.name != revision.name);
        kept.push(revision);
        let limit = spec.revision_history_limit.unwrap_or(DEFAULT_REVISION_HISTORY_LIMIT) as usize;
        let mut serving = vec![rollout.current_revision.clone(), rollout.updated_revision.clone()];
        serving.extend(rollout.carried.iter().map(|c| c.revision.clone()));
        let gone = pruned(&kept, limit, &serving);
        for old in &gone {
            match self.api.delete(old, &DeleteParams::default()).await {
                Ok(_) => {
                    tracing::info!(definition = %self.definition, revision = %old, "revision pruned from the history")
                }
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(self.failed("delete")(e)),
            }
        }
        kept.retain(|k| !gone.contains(&k.name));
        kept.sort_by_key(|r| r.number);
        Ok(Kept {
            rollout,
            revisions: kept,
        })
    }

    /// Creates revision `number` of `spec` with the state of the rollout to it, begun from
    /// `before`. One that another replica created first is taken as it is.
    async fn create(
        &self,
        spec: &OperatorDefinitionSpec,
        number: i64,
        before: Option<&RolloutStatus>,
        now: &str,
    ) -> Result<Revision, RevisionError> {
        let mut object = revision_object(&self.definition, &self.namespace, spec, number);
        let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let rollout = begin(&spec.rollout, before, &name, now);
        object["metadata"]["annotations"][labels::ROLLOUT] = state_text(&rollout).into();
        let object: ControllerRevision =
            serde_json::from_value(object).expect("a revision object is a ControllerRevision");
        let created = match self.api.create(&PostParams::default(), &object).await {
            Ok(created) => created,
            Err(kube::Error::Api(s)) if s.code == 409 => self.api.get(&name).await.map_err(self.failed("get"))?,
            Err(e) => return Err(self.failed("create")(e)),
        };
        let mut revision = read_revision(created)?;
        if revision.rollout.is_none() {
            self.save(&name, &rollout, None).await?;
            revision.rollout = Some(rollout);
        }
        Ok(revision)
    }

    /// The rollout as the newest revision keeps it, when that revision holds `spec`: what a
    /// replica that does not lead serves. None until the leader has kept it.
    ///
    /// # Errors
    ///
    /// The list is refused or fails.
    pub async fn read(&self, spec: &OperatorDefinitionSpec) -> Result<Option<Kept>, RevisionError> {
        let revisions = self.list().await?;
        let hash = revision_hash(spec);
        let rollout = revisions
            .last()
            .filter(|r| revision_hash(&r.spec) == hash)
            .and_then(|r| r.rollout.clone());
        Ok(rollout.map(|rollout| Kept { rollout, revisions }))
    }

    /// Where the rollout stands as revision `name` (the newest) keeps it, with the
    /// revision's resourceVersion; none when the revision or its state is missing.
    ///
    /// # Errors
    ///
    /// The read is refused or fails.
    pub async fn saved(&self, name: &str) -> Result<Option<(RolloutStatus, String)>, RevisionError> {
        let Some(object) = self.api.get_opt(name).await.map_err(self.failed("get"))? else {
            return Ok(None);
        };
        let version = object.resource_version().unwrap_or_default();
        let state = object
            .annotations()
            .get(labels::ROLLOUT)
            .and_then(|text| serde_json::from_str(text).ok());
        Ok(state.map(|s| (s, version)))
    }

    /// Saves where the rollout stands on revision `name` (the newest); with `version`,
    /// only if the revision is still at that resourceVersion (nobody saved meanwhile).
    ///
    /// # Errors
    ///
    /// The patch is refused or fails; a revision changed since `version` is a 409.
    pub async fn save(&self, name: &str, rollout: &RolloutStatus, version: Option<&str>) -> Result<(), RevisionError> {
        let mut patch = state_patch(rollout);
        if let Some(version) = version {
            patch["metadata"]["resourceVersion"] = version.into();
        }
        self.api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(self.failed("patch"))?;
        Ok(())
    }
}

/// A merge patch that saves `rollout` on a revision.
fn state_patch(rollout: &RolloutStatus) -> serde_json::Value {
    serde_json::json!({"metadata": {"annotations": {labels::ROLLOUT: state_text(rollout)}}})
}

/// `rollout` as the [`labels::ROLLOUT`] annotation keeps it.
fn state_text(rollout: &RolloutStatus) -> String {
    serde_json::to_string(rollout).expect("a rollout status is JSON")
}

/// A `ControllerRevision` read back: its name, number, spec and saved state.
fn read_revision(object: ControllerRevision) -> Result<Revision, RevisionError> {
    let name = object.name_any();
    let spec = serde_json::from_value(object.data.0["spec"].clone()).map_err(|source| RevisionError::Data {
        name: name.clone(),
        source,
    })?;
    let rollout = object
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(labels::ROLLOUT))
        .and_then(|text| serde_json::from_str(text).ok());
    Ok(Revision {
        name,
        number: object.revision.unwrap_or_default(),
        spec,
        rollout,
    })
}

/// The revisions past the history limit: all but the `limit` newest, never one named in
/// `serving`.
fn pruned(kept: &[Revision], limit: usize, serving: &[String]) -> Vec<String> {
    let mut candidates: Vec<&Revision> = kept.iter().collect();
    candidates.sort_by_key(|r| std::cmp::Reverse(r.number));
    candidates
        .into_iter()
        .skip(limit)
        .filter(|r| !serving.contains(&r.name))
        .map(|r| r.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn revision(name: &str, number: i64) -> Revision {
        let spec: OperatorDefinitionSpec =
            crate::yaml::document("parent: {apiVersion: example.org/v1, kind: App}\nchildren: []\n").unwrap();
        Revision {
            name: name.into(),
            number,
            spec,
            rollout: None,
        }
    }

    #[test]
    fn the_history_keeps_the_newest_and_every_revision_a_rollout_serves() {
        let kept: Vec<Revision> = (1..=7).map(|n| revision(&format!("r{n}"), n)).collect();
        let serving = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        assert_eq!(pruned(&kept, 5, &serving(&["r7"])), ["r2", "r1"]);
        assert_eq!(pruned(&kept, 2, &serving(&["r7", "r3"])), ["r5", "r4", "r2", "r1"]);
        assert_eq!(
            pruned(&kept, 1, &serving(&["r1", "r7"])),
            ["r6", "r5", "r4", "r3", "r2"],
            "the current one stays"
        );
        assert!(pruned(&kept, 10, &[]).is_empty());
    }

    #[test]
    fn each_undo_steps_one_revision_back_and_the_newest_keeps_the_state() {
        use crate::rollout::{Command, CommandError, command};
        let mut kept = Kept {
            rollout: begin(&Default::default(), None, "r2", "2026-12-05T00:00:00Z"),
            revisions: (0..=2).map(|n| revision(&format!("r{n}"), n + 1)).collect(),
        };
        let spec = kept.revisions[2].spec.rollout.clone();
        for back_to in ["r1", "r0"] {
            let undo = Command::Undo {
                previous: kept.before_current(),
            };
            let next = command(&spec, &kept.rollout, &undo, "2026-12-05T00:01:00Z").expect("undo");
            assert_eq!(next.current_revision, back_to, "parents render the revision before");
            assert_eq!(
                next.updated_revision, "r2",
                "the state names the newest revision, where it is saved and read"
            );
            assert_eq!(
                begin(&spec, Some(&next), "r2", "2026-12-05T00:02:00Z"),
                next,
                "a restart keeps the undo"
            );
            kept.rollout = next;
        }
        let undo = Command::Undo {
            previous: kept.before_current(),
        };
        assert_eq!(
            command(&spec, &kept.rollout, &undo, "2026-12-05T00:03:00Z"),
            Err(CommandError::NothingToUndo)
        );
    }
}
