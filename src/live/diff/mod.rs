//! `stencil diff`: what a new definition would do to each existing parent, compared with
//! what is live. Every write is a server-side apply with `dryRun=All`, so defaulting,
//! admission and schema validation run as they would for real, and nothing is written.

use kube::Client;
use kube::api::{Patch, PatchParams};
use serde::Serialize;
use serde_json::Value;

use super::compare::{comparable, comparable_status, unified};
use super::{Kinds, LiveError, Snapshot};
use crate::applied::{live_hash, with_hash};
use crate::compile::CompiledDefinition;
use crate::definition::UpdatePolicy;
use crate::immutable;
use crate::labels;
use crate::object_key::ObjectKey;
use crate::ownership::{self, OwnershipVerdict};
use crate::render::{DesiredChild, RenderOutput};

/// What the new definition would do to one child.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "change", rename_all = "lowercase")]
pub enum Change {
    /// It does not exist and would be created.
    Created {
        /// `Kind namespace/name`.
        object: String,
    },
    /// Its fields would change; `diff` is a unified diff of the live object and the
    /// object after the apply, as the API server would store it.
    Updated {
        /// `Kind namespace/name`.
        object: String,
        /// The unified diff.
        diff: String,
    },
    /// It would be deleted and created again.
    Recreated {
        /// `Kind namespace/name`.
        object: String,
        /// The update policy, or the immutable field the server names.
        why: String,
    },
    /// The change needs a field the API server holds immutable and the child is not
    /// `Recreate`: the controller would write nothing and the parent would say
    /// `Immutable`.
    Refused {
        /// `Kind namespace/name`.
        object: String,
        /// The immutable field the server names.
        why: String,
    },
    /// It is no longer rendered and would be deleted.
    Pruned {
        /// `Kind namespace/name`.
        object: String,
    },
    /// It exists, nobody controls it, and the child may adopt it.
    Adopted {
        /// `Kind namespace/name`.
        object: String,
    },
}

/// What the new definition would do to one parent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ParentDiff {
    /// `Kind namespace/name`.
    pub parent: String,
    /// Its children's changes.
    pub changes: Vec<Change>,
    /// A unified diff of its status, when the status would change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Children that would wait, with what they wait for.
    pub waiting: Vec<String>,
    /// Objects it would not take, with who holds them.
    pub conflicts: Vec<String>,
    /// What could not be computed (a render or apply the server refuses).
    pub errors: Vec<String>,
}

/// Counts over every parent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Parents compared.
    pub parents: usize,
    /// Children created.
    pub created: usize,
    /// Children updated.
    pub updated: usize,
    /// Children recreated.
    pub recreated: usize,
    /// Children whose change the API server refuses as immutable.
    pub refused: usize,
    /// Children pruned.
    pub pruned: usize,
    /// Children adopted.
    pub adopted: usize,
    /// Parents whose status changes.
    pub status: usize,
    /// Conflicts.
    pub conflicts: usize,
    /// Errors.
    pub errors: usize,
}

impl Summary {
    /// The counts of `diffs`.
    pub fn of(diffs: &[ParentDiff]) -> Summary {
        let mut s = Summary {
            parents: diffs.len(),
            ..Summary::default()
        };
        for d in diffs {
            for c in &d.changes {
                match c {
                    Change::Created { .. } => s.created += 1,
                    Change::Updated { .. } => s.updated += 1,
                    Change::Recreated { .. } => s.recreated += 1,
                    Change::Refused { .. } => s.refused += 1,
                    Change::Pruned { .. } => s.pruned += 1,
                    Change::Adopted { .. } => s.adopted += 1,
                }
            }
            s.status += usize::from(d.status.is_some());
            s.conflicts += d.conflicts.len();
            s.errors += d.errors.len();
        }
        s
    }

    /// Whether anything would change.
    pub fn changes(&self) -> bool {
        self.created + self.updated + self.recreated + self.refused + self.pruned + self.adopted + self.status > 0
    }

    /// `12 parents: 3 children created, 40 updated, 0 recreated, 2 pruned`, and the rest
    /// when there is any.
    pub fn line(&self) -> String {
        let mut line = format!(
            "{} parents: {} children created, {} updated, {} recreated, {} pruned",
            self.parents, self.created, self.updated, self.recreated, self.pruned
        );
        for (n, what) in [
            (self.adopted, "adopted"),
            (self.refused, "refused as immutable"),
            (self.status, "status changes"),
            (self.conflicts, "conflicts"),
            (self.errors, "errors"),
        ] {
            if n > 0 {
                line.push_str(&format!(", {n} {what}"));
            }
        }
        line
    }
}

/// The report as text: one section per parent with changes, then the summary line.
pub fn text(diffs: &[ParentDiff]) -> String {
    let mut out = String::new();
    for d in diffs {
        let quiet = d.changes.is_empty()
            && d.status.is_none()
            && d.waiting.is_empty()
            && d.conflicts.is_empty()
            && d.errors.is_empty();
        if quiet {
            continue;
        }
        out.push_str(&format!("{}:\n", d.parent));
        for c in &d.changes {
            match c {
                Change::Created { object } => out.push_str(&format!("  + {object} (created)\n")),
                Change::Adopted { object } => out.push_str(&format!("  + {object} (adopted)\n")),
                Change::Pruned { object } => out.push_str(&format!("  - {object} (pruned)\n")),
                Change::Recreated { object, why } => out.push_str(&format!("  ! {object} (recreated: {why})\n")),
                Change::Refused { object, why } => out.push_str(&format!(
                    "  x {object} (refused, nothing written: {why}; updatePolicy: Recreate would replace it)\n"
                )),
                Change::Updated { object, diff } => {
                    out.push_str(&format!("  ~ {object} (updated)\n"));
                    out.push_str(&indent(diff, "      "));
                }
            }
        }
        if let Some(status) = &d.status {
            out.push_str("  ~ status\n");
            out.push_str(&indent(status, "      "));
        }
        for w in &d.waiting {
            out.push_str(&format!("  waiting: {w}\n"));
        }
        for c in &d.conflicts {
            out.push_str(&format!("  conflict: {c}\n"));
        }
        for e in &d.errors {
            out.push_str(&format!("  error: {e}\n"));
        }
    }
    out.push_str(&Summary::of(diffs).line());
    out.push('\n');
    out
}

fn indent(text: &str, by: &str) -> String {
    text.lines().map(|l| format!("{by}{l}\n")).collect()
}

/// Compares one parent: renders it with the new definition over its live world, and
/// asks the API server (dry run) what each apply would store.
///
/// # Errors
///
/// The cluster cannot be read; a render failure or a refused dry run is part of the diff,
/// not an error.
pub async fn parent(
    client: &Client,
    def: &CompiledDefinition,
    kinds: &Kinds,
    parent: Value,
    children: Vec<Value>,
) -> Result<ParentDiff, LiveError> {
    let mut diff = ParentDiff {
        parent: ObjectKey::of_value(&parent).map_or_else(String::new, |k| k.to_string()),
        ..ParentDiff::default()
    };
    let snapshot = match Snapshot::read(client, def, kinds, parent, children).await? {
        Ok(s) => s,
        Err(failure) => {
            diff.errors
                .push(format!("the new definition fails to render: {failure}"));
            return Ok(diff);
        }
    };
    let out = match snapshot.render(def, &kinds.scopes) {
        Ok(out) => out,
        Err(failure) => {
            diff.errors
                .push(format!("the new definition fails to render: {failure}"));
            return Ok(diff);
        }
    };
    let owner = Owner {
        uid: snapshot
            .parent
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default(),
        definition: &def.name,
        decorator: def.spec.is_decorator(),
    };
    let ours: Vec<&Value> = snapshot.observed.children.values().flatten().collect();
    let existing: Vec<&Value> = snapshot.observed.existing.iter().collect();
    for desired in &out.children {
        let Some(key) = ObjectKey::of_value(&desired.object) else {
            continue;
        };
        let (live, is_ours) = match find(&key, &ours) {
            Some(l) => (Some(l), true),
            None => (find(&key, &existing), false),
        };
        match child(client, kinds, &owner, desired, &key, live.as_ref(), is_ours).await {
            Ok(Some(change)) => diff.changes.push(change),
            Ok(None) => {}
            Err(e) => diff.errors.push(e),
        }
    }
    diff.changes.extend(pruned(&ours, &out));
    diff.status = unified(
        &comparable_status(snapshot.parent.get("status")),
        &comparable_status(Some(&out.status)),
    );
    diff.waiting = out
        .waiting
        .iter()
        .map(|w| format!("{} (on {})", w.child, w.on.join(", ")))
        .collect();
    diff.conflicts = out.conflicts;
    Ok(diff)
}

/// The parent whose children are compared, as ownership judges a live object.
struct Owner<'a> {
    uid: &'a str,
    definition: &'a str,
    decorator: bool,
}

/// The object among `among` with `key`.
fn find(key: &ObjectKey, among: &[&Value]) -> Option<Value> {
    among
        .iter()
        .find(|o| ObjectKey::of_value(o).as_ref() == Some(key))
        .map(|o| (*o).clone())
}

/// The parent's children the render no longer wants: pruned, unless they are going
/// already or their entry waits on `dependsOn`.
fn pruned(ours: &[&Value], out: &RenderOutput) -> Vec<Change> {
    let waiting: Vec<&str> = out.waiting.iter().map(|w| w.child.as_str()).collect();
    let mut changes = Vec::new();
    for obj in ours {
        let Some(key) = ObjectKey::of_value(obj) else {
            continue;
        };
        let entry = obj
            .pointer("/metadata/labels")
            .and_then(|l| l.get(labels::CHILD))
            .and_then(Value::as_str)
            .unwrap_or_default();
        let desired = out
            .children
            .iter()
            .any(|c| ObjectKey::of_value(&c.object).as_ref() == Some(&key));
        let terminating = obj.pointer("/metadata/deletionTimestamp").is_some();
        if !desired && !terminating && !waiting.contains(&entry) {
            changes.push(Change::Pruned {
                object: key.to_string(),
            });
        }
    }
    changes
}

/// What applying one desired child would do; `None` for no change.
async fn child(
    client: &Client,
    kinds: &Kinds,
    owner: &Owner<'_>,
    desired: &DesiredChild,
    key: &ObjectKey,
    live: Option<&Value>,
    is_ours: bool,
) -> Result<Option<Change>, String> {
    let object = key.to_string();
    if !is_ours && live.is_some() {
        // Not ours: a conflict (reported with the render) or an adoption.
        return Ok(
            match ownership::judge(live, owner.uid, owner.definition, owner.decorator, desired.adopt) {
                OwnershipVerdict::Adopt => Some(Change::Adopted { object }),
                _ => None,
            },
        );
    }
    let (applied, hash) = with_hash(desired.object.clone());
    if let Some(live) = live {
        let same_hash = live_hash(live) == Some(hash.as_str());
        match desired.update_policy {
            UpdatePolicy::OnCreate => return Ok(None),
            UpdatePolicy::Recreate if !same_hash => {
                return Ok(Some(Change::Recreated {
                    object,
                    why: "updatePolicy: Recreate".into(),
                }));
            }
            _ => {}
        }
    }
    let api_version = applied["apiVersion"].as_str().unwrap_or_default();
    let Ok(gvk) = crate::gvk::Gvk::parse(api_version, &key.kind) else {
        return Err(format!("{object}: bad apiVersion {api_version}"));
    };
    let Some(resolved) = kinds.kind(&gvk) else {
        return Err(format!("{object}: the API server does not serve {gvk}"));
    };
    let api = crate::discovery::api(
        client,
        key.namespace.as_deref().filter(|_| resolved.namespaced),
        &resolved.resource,
    );
    let params = PatchParams::apply(labels::FIELD_MANAGER).force().dry_run();
    match api.patch(&key.name, &params, &Patch::Apply(&applied)).await {
        Ok(result) => {
            let Some(live) = live else {
                return Ok(Some(Change::Created { object }));
            };
            let after = super::to_value(result, &resolved.resource);
            Ok(unified(&comparable(live), &comparable(&after)).map(|diff| Change::Updated { object, diff }))
        }
        Err(kube::Error::Api(status)) if live.is_some() && immutable::refusal(&status).is_some() => {
            let why = immutable::refusal(&status).unwrap_or_default();
            Ok(Some(if desired.update_policy == UpdatePolicy::Recreate {
                Change::Recreated { object, why }
            } else {
                Change::Refused { object, why }
            }))
        }
        Err(e) => Err(format!("{object}: the API server refuses the apply: {e}")),
    }
}

#[cfg(test)]
mod tests;
