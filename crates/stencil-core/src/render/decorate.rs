//! Checking a rendered object against what its child declares, and giving it the
//! parent's namespace, Stencil's labels and, where the garbage collector may delete it with the
//! parent, the parent's ownerReference.

use serde_json::{Map, Value, json};

use crate::definition::DeletionPolicy;

use super::*;

/// Checks a rendered document and adds its namespace, labels and ownerReference.
pub(super) fn decorate(
    info: &ParentInfo<'_>,
    child: &Child,
    declared: &[Gvk],
    mut doc: Value,
    scopes: &Scopes,
) -> Result<Value, String> {
    let obj = doc.as_object_mut().ok_or("a child must be a YAML mapping")?;
    let gvk = declared_kind(obj, declared)?;
    let kind = gvk.kind.clone();
    let metadata = obj.entry("metadata").or_insert_with(|| json!({}));
    let metadata = metadata.as_object_mut().ok_or("metadata must be a mapping")?;
    let name = metadata
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if name.is_empty() {
        return Err(format!("{kind} has no metadata.name"));
    }
    let namespaced = scopes.is_namespaced(&gvk);
    let namespace = namespace(info, metadata, namespaced, &kind, &name)?;
    if let Some(ns) = &namespace {
        metadata.insert("namespace".into(), Value::String(ns.clone()));
    }
    add_labels(info, child, metadata)?;
    // An ownerReference may only point at an owner in the same namespace, or at a
    // cluster-scoped owner.
    let ownable = info.namespace.is_none() || (namespaced && namespace.as_deref() == info.namespace);
    if ownable && collected_by_garbage_collector(info.def, child) {
        add_owner(info, metadata)?;
    }
    Ok(doc)
}

/// The object's kind, which the template must declare (Stencil watches only those).
fn declared_kind(obj: &Map<String, Value>, declared: &[Gvk]) -> Result<Gvk, String> {
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .ok_or("apiVersion is missing")?;
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .filter(|k| !k.is_empty())
        .ok_or("kind is missing")?;
    let gvk = Gvk::parse(api_version, kind).map_err(|e| e.to_string())?;
    if !declared.iter().any(|d| d.group == gvk.group && d.kind == gvk.kind) {
        return Err(format!(
            "{gvk} is not among the kinds the template declares at the start of a line; Stencil watches only those"
        ));
    }
    Ok(gvk)
}

/// The namespace the object goes to: none for a cluster-scoped kind; its own, or else
/// the parent's, for a namespaced one, which the parent may use and this Stencil serves.
fn namespace(
    info: &ParentInfo<'_>,
    metadata: &Map<String, Value>,
    namespaced: bool,
    kind: &str,
    name: &str,
) -> Result<Option<String>, String> {
    let explicit = metadata
        .get("namespace")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let ns = match (namespaced, explicit, info.namespace) {
        (false, Some(ns), _) => return Err(format!("{kind} is cluster-scoped; remove metadata.namespace ({ns})")),
        (false, None, _) => return Ok(None),
        (true, Some(ns), _) => ns,
        (true, None, Some(parent_ns)) => parent_ns.to_string(),
        (true, None, None) => {
            return Err(format!(
                "{kind} {name} is namespaced and its parent is cluster-scoped; set metadata.namespace"
            ));
        }
    };
    if !info.may_use_namespace(&ns) {
        return Err(format!(
            "{kind} {name} targets namespace `{ns}`, outside the parent's namespace; list it in spec.allowedNamespaces to allow it"
        ));
    }
    if !info.serves(&ns) {
        return Err(format!(
            "{kind} {name} targets namespace `{ns}`, which this Stencil does not serve (--namespace {}): it could be neither watched nor pruned there; add `{ns}` to --namespace (the chart's watchNamespaces)",
            info.served.join(",")
        ));
    }
    Ok(Some(ns))
}

/// The parent's metadata field `key`, when it is a string.
fn parent_field<'a>(info: &'a ParentInfo<'_>, key: &str) -> Option<&'a str> {
    info.object
        .get("metadata")
        .and_then(|m| m.get(key))
        .and_then(Value::as_str)
}

/// Adds Stencil's labels: managed by, definition, child, the parent's name, namespace
/// and UID, and a sharded member's label (it watches only the children of its share).
fn add_labels(info: &ParentInfo<'_>, child: &Child, metadata: &mut Map<String, Value>) -> Result<(), String> {
    let labels_map = metadata.entry("labels").or_insert_with(|| json!({}));
    let labels_map = labels_map.as_object_mut().ok_or("metadata.labels must be a mapping")?;
    labels_map.insert(labels::MANAGED_BY.into(), labels::MANAGED_BY_VALUE.into());
    labels_map.insert(labels::DEFINITION.into(), labels::label_value(&info.def.name).into());
    labels_map.insert(labels::CHILD.into(), child.name.clone().into());
    let parent_name = labels::label_value(parent_field(info, "name").unwrap_or_default());
    labels_map.insert(labels::PARENT_NAME.into(), parent_name.into());
    if let Some(ns) = info.namespace {
        labels_map.insert(labels::PARENT_NAMESPACE.into(), ns.into());
    }
    if let Some(uid) = parent_field(info, "uid") {
        labels_map.insert(labels::PARENT_UID.into(), uid.into());
    }
    if let Some(shard) = info
        .object
        .pointer(&format!("/metadata/labels/{}", labels::SHARD.replace('/', "~1")))
        .and_then(Value::as_str)
    {
        labels_map.insert(labels::SHARD.into(), shard.into());
    }
    Ok(())
}

/// Adds the parent's controller ownerReference. A decorator's does not block its
/// owner's deletion: that would need a write on the decorated kind (its finalizers),
/// which a decorator never has.
fn add_owner(info: &ParentInfo<'_>, metadata: &mut Map<String, Value>) -> Result<(), String> {
    let mut owner = json!({
        "apiVersion": info.def.spec.parent.api_version,
        "kind": info.def.spec.parent.kind,
        "name": parent_field(info, "name").unwrap_or_default(),
        "controller": true,
        "blockOwnerDeletion": !info.def.spec.is_decorator(),
    });
    if let Some(uid) = parent_field(info, "uid") {
        owner["uid"] = uid.into();
    }
    let refs = metadata.entry("ownerReferences").or_insert_with(|| json!([]));
    let refs = refs.as_array_mut().ok_or("metadata.ownerReferences must be a list")?;
    if refs.iter().any(|r| r.get("controller") == Some(&Value::Bool(true))) {
        return Err("the template sets a controller ownerReference; Stencil owns its children".into());
    }
    refs.push(owner);
    Ok(())
}

/// Whether the garbage collector may delete this child with its parent: it may not when
/// the child outlives its parent (`deletionPolicy: Orphan`), nor when Stencil orders the
/// teardown (dependsOn waves, a finalize step that may need the children). A foreground
/// deletion (`kubectl delete --cascade=foreground`) has the collector delete every
/// dependent at once; without an ownerReference the child is Stencil's to delete, under
/// its finalizer, in order.
pub fn collected_by_garbage_collector(def: &CompiledDefinition, child: &Child) -> bool {
    let spec = &def.spec;
    let orphan = child.deletion_policy.unwrap_or(spec.finalize.deletion_policy) == DeletionPolicy::Orphan;
    let ordered =
        !spec.is_decorator() && (spec.finalize.has_step() || spec.children.iter().any(|c| !c.depends_on.is_empty()));
    !orphan && !ordered
}
