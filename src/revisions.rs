//! A definition's revisions as `ControllerRevision`s (apps/v1) in Stencil's namespace: each
//! accepted version is kept once, named after the definition and the hash of what rolls
//! out, numbered in order, and the history is cut to `revisionHistoryLimit` without ever
//! removing a revision a rollout still serves.

use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};

use crate::definition::{DEFAULT_REVISION_HISTORY_LIMIT, OperatorDefinitionSpec};
use crate::labels;
use crate::rollout::{revision_hash, revision_object};

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
        /// The API server's answer.
        #[source]
        source: kube::Error,
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
            source,
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
            let name = object.name_any();
            // The label can be shared by two long names cut to the same value.
            if !name.starts_with(&self.definition) {
                continue;
            }
            let data = object.data.0;
            let spec = serde_json::from_value(data["spec"].clone()).map_err(|source| RevisionError::Data {
                name: name.clone(),
                source,
            })?;
            kept.push(Revision {
                name,
                number: object.revision.unwrap_or_default(),
                spec,
            });
        }
        kept.sort_by_key(|r| r.number);
        Ok(kept)
    }

    /// Keeps `spec` as a revision unless one holds it already, then cuts the history to
    /// `limit` (5 unless set) newest revisions plus those named in `keep`. Returns the
    /// revision that holds `spec`. Writes nothing when the revision exists and the
    /// history is within its limit.
    ///
    /// # Errors
    ///
    /// A list, create or delete the API server refuses or does not answer.
    pub async fn record(
        &self,
        spec: &OperatorDefinitionSpec,
        limit: Option<u32>,
        keep: &[String],
    ) -> Result<Revision, RevisionError> {
        let hash = revision_hash(spec);
        let mut kept = self.list().await?;
        let existing = kept.iter().find(|r| revision_hash(&r.spec) == hash).cloned();
        let newest = kept.last().map_or(0, |r| r.number);
        let revision = match existing {
            Some(r) if r.number == newest => r,
            // An edit back to an earlier version: it becomes the newest again, as a
            // Deployment's rollback does, so the one before it is the one it replaced.
            Some(r) => {
                let patch = serde_json::json!({"revision": newest + 1});
                let patched = self
                    .api
                    .patch(&r.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(self.failed("patch"))?;
                let revision = Revision {
                    number: patched.revision.unwrap_or_default(),
                    ..r
                };
                kept.retain(|k| k.name != revision.name);
                kept.push(revision.clone());
                revision
            }
            None => {
                let number = newest + 1;
                let object: ControllerRevision =
                    serde_json::from_value(revision_object(&self.definition, &self.namespace, spec, number))
                        .expect("a revision object is a ControllerRevision");
                let created = match self.api.create(&PostParams::default(), &object).await {
                    Ok(created) => created,
                    // Another replica kept it first.
                    Err(kube::Error::Api(s)) if s.code == 409 => {
                        self.api.get(&object.name_any()).await.map_err(self.failed("get"))?
                    }
                    Err(e) => return Err(self.failed("create")(e)),
                };
                let revision = Revision {
                    name: created.name_any(),
                    number: created.revision.unwrap_or_default(),
                    spec: spec.clone(),
                };
                kept.push(revision.clone());
                revision
            }
        };
        let limit = limit.unwrap_or(DEFAULT_REVISION_HISTORY_LIMIT) as usize;
        for old in pruned(&kept, limit, &revision.name, keep) {
            match self.api.delete(&old, &DeleteParams::default()).await {
                Ok(_) => {
                    tracing::info!(definition = %self.definition, revision = %old, "revision pruned from the history")
                }
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(self.failed("delete")(e)),
            }
        }
        Ok(revision)
    }
}

/// The revisions past the history limit: all but the `limit` newest, never `current` nor
/// one named in `keep`.
fn pruned(kept: &[Revision], limit: usize, current: &str, keep: &[String]) -> Vec<String> {
    let mut candidates: Vec<&Revision> = kept.iter().collect();
    candidates.sort_by_key(|r| std::cmp::Reverse(r.number));
    candidates
        .into_iter()
        .skip(limit)
        .filter(|r| r.name != current && !keep.contains(&r.name))
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
        }
    }

    #[test]
    fn the_history_keeps_the_newest_and_every_revision_a_rollout_serves() {
        let kept: Vec<Revision> = (1..=7).map(|n| revision(&format!("r{n}"), n)).collect();
        assert_eq!(pruned(&kept, 5, "r7", &[]), ["r2", "r1"]);
        assert_eq!(pruned(&kept, 2, "r7", &["r3".into()]), ["r5", "r4", "r2", "r1"]);
        assert_eq!(
            pruned(&kept, 1, "r1", &[]),
            ["r6", "r5", "r4", "r3", "r2"],
            "the current one stays"
        );
        assert!(pruned(&kept, 10, "r7", &[]).is_empty());
    }
}
