//! The writes that bring a parent's children to a hook's answer, purely: each desired
//! child gets the parent's controller reference (and a decorator's attachment its
//! annotation) and the parent's namespace when its kind is namespaced and it names none;
//! each is created, kept, applied or recreated as its kind's update method says; every
//! owned child the answer leaves out is deleted; a child metacontroller applied
//! client-side first loses its last-applied annotation.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::api::UpdateMethod;
use super::update::{ChildAction, decide};
use super::{DECORATOR_CONTROLLER, LAST_APPLIED};

/// A kind the hooks may answer with, as discovery resolved its rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildKind {
    /// `group/version` as the rule writes it.
    pub api_version: String,
    /// The kind.
    pub kind: String,
    /// Whether its objects live in a namespace.
    pub namespaced: bool,
    /// How an existing child of the kind is updated.
    pub method: UpdateMethod,
}

/// An answer Stencil will not act on.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    /// A desired child's kind is not among the controller's child kinds.
    #[error("desired child {0} is of a kind the controller does not list among its children")]
    UnknownKind(String),
    /// Two desired children are one object.
    #[error("the answer lists {0} twice")]
    Twice(String),
    /// A desired child has no name.
    #[error("a desired {0} has no metadata.name")]
    Unnamed(String),
}

/// One write of a plan.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// Remove metacontroller's last-applied annotation from this live child.
    Forget(Value),
    /// Create this object (it does not exist).
    Create(Value),
    /// Server-side apply this object over its live form.
    Apply(Value),
    /// Delete this live child (uid precondition); a later pass creates it anew.
    Recreate(Value),
    /// Delete this live child (uid precondition): the answer leaves it out.
    Delete(Value),
}

/// Who the children belong to.
pub struct Owner<'a> {
    /// The parent (or decorated object).
    pub parent: &'a Value,
    /// A DecoratorController's name, for its attachments' annotation.
    pub decorator: Option<&'a str>,
}

/// The writes that take `owned` (the parent's claimed children) to `desired`.
///
/// # Errors
///
/// A desired child of an unlisted kind, without a name, or listed twice: nothing is
/// written for an answer Stencil cannot follow whole.
pub fn plan(
    owner: &Owner<'_>,
    kinds: &[ChildKind],
    owned: &[Value],
    desired: Vec<Value>,
) -> Result<Vec<Write>, PlanError> {
    let mut by_identity: BTreeMap<String, &Value> = owned.iter().map(|o| (identity(o), o)).collect();
    let mut writes: Vec<Write> = owned
        .iter()
        .filter(|o| {
            o.pointer(&format!("/metadata/annotations/{}", LAST_APPLIED.replace('/', "~1")))
                .is_some()
        })
        .cloned()
        .map(Write::Forget)
        .collect();
    let mut seen = Vec::new();
    for mut child in desired {
        let kind = kinds
            .iter()
            .find(|k| k.api_version == field(&child, "/apiVersion") && k.kind == field(&child, "/kind"))
            .ok_or_else(|| PlanError::UnknownKind(describe(&child)))?;
        if field(&child, "/metadata/name").is_empty() {
            return Err(PlanError::Unnamed(field(&child, "/kind").to_string()));
        }
        place(owner.parent, kind, &mut child);
        let id = identity(&child);
        if seen.contains(&id) {
            return Err(PlanError::Twice(describe(&child)));
        }
        seen.push(id.clone());
        let live = by_identity.remove(&id);
        // The answer alone decides whether a child changed: the owner reference Stencil
        // adds is the claim's business, and another owner added by hand is no change.
        let action = decide(kind.method, live, &child);
        own(owner, &mut child);
        writes.push(match (action, live) {
            (ChildAction::Create, _) => Write::Create(child),
            (ChildAction::Apply, _) => Write::Apply(child),
            (ChildAction::Recreate, Some(live)) => Write::Recreate(live.clone()),
            (ChildAction::Recreate | ChildAction::Keep, _) => continue,
        });
    }
    writes.extend(
        by_identity
            .into_values()
            .filter(|o| o.pointer("/metadata/deletionTimestamp").is_none())
            .cloned()
            .map(Write::Delete),
    );
    Ok(writes)
}

/// Gives `child` the parent's namespace when its kind is namespaced and it names none.
fn place(parent: &Value, kind: &ChildKind, child: &mut Value) {
    let parent_ns = parent.pointer("/metadata/namespace").and_then(Value::as_str);
    let Some(meta) = child["metadata"].as_object_mut() else {
        return;
    };
    if kind.namespaced
        && meta.get("namespace").and_then(Value::as_str).is_none_or(str::is_empty)
        && let Some(ns) = parent_ns
    {
        meta.insert("namespace".into(), ns.into());
    }
}

/// Gives `child` the parent's controller reference, and a decorator's annotation.
fn own(owner: &Owner<'_>, child: &mut Value) {
    let parent = owner.parent;
    let Some(meta) = child["metadata"].as_object_mut() else {
        return;
    };
    let reference = json!({
        "apiVersion": parent["apiVersion"], "kind": parent["kind"],
        "name": parent.pointer("/metadata/name"), "uid": parent.pointer("/metadata/uid"),
        "controller": true, "blockOwnerDeletion": true,
    });
    let refs = meta.entry("ownerReferences").or_insert_with(|| json!([]));
    if let Some(refs) = refs.as_array_mut() {
        refs.retain(|r| r.get("uid") != reference.get("uid"));
        refs.push(reference);
    }
    if let Some(name) = owner.decorator {
        let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
        if let Some(a) = annotations.as_object_mut() {
            a.insert(DECORATOR_CONTROLLER.into(), name.into());
        }
    }
}

fn field<'v>(object: &'v Value, pointer: &str) -> &'v str {
    object.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

/// The API group of an `apiVersion`: a child's identity does not depend on its version.
fn group(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

fn identity(object: &Value) -> String {
    format!(
        "{}/{}/{}/{}",
        group(field(object, "/apiVersion")),
        field(object, "/kind"),
        field(object, "/metadata/namespace"),
        field(object, "/metadata/name")
    )
}

fn describe(object: &Value) -> String {
    match field(object, "/metadata/namespace") {
        "" => format!("{} {}", field(object, "/kind"), field(object, "/metadata/name")),
        ns => format!("{} {ns}/{}", field(object, "/kind"), field(object, "/metadata/name")),
    }
}

#[cfg(test)]
mod tests;
