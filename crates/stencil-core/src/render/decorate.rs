//! Checking a rendered object against what its child declares, and giving it the
//! parent's namespace, Stencil's labels and, where the garbage collector may delete it with the
//! parent, the parent's ownerReference.

use serde_json::{Value, json};

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
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .ok_or("apiVersion is missing")?;
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .filter(|k| !k.is_empty())
        .ok_or("kind is missing")?
        .to_string();
    let gvk = Gvk::parse(api_version, &kind).map_err(|e| e.to_string())?;
    if !declared.iter().any(|d| d.group == gvk.group && d.kind == gvk.kind) {
        return Err(format!(
            "{gvk} is not among the kinds the template declares at the start of a line; Stencil watches only those"
        ));
    }
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
    let explicit_ns = metadata
        .get("namespace")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let namespaced = scopes.is_namespaced(&gvk);
    let namespace = match (namespaced, explicit_ns, info.namespace) {
        (false, Some(ns), _) => return Err(format!("{kind} is cluster-scoped; remove metadata.namespace ({ns})")),
        (false, None, _) => None,
        (true, Some(ns), _) => Some(ns),
        (true, None, Some(parent_ns)) => Some(parent_ns.to_string()),
        (true, None, None) => {
            return Err(format!(
                "{kind} {name} is namespaced and its parent is cluster-scoped; set metadata.namespace"
            ));
        }
    };
    if let Some(ns) = &namespace {
        if !info.may_use_namespace(ns) {
            return Err(format!(
                "{kind} {name} targets namespace `{ns}`, outside the parent's namespace; list it in spec.allowedNamespaces to allow it"
            ));
        }
        if !info.serves(ns) {
            return Err(format!(
                "{kind} {name} targets namespace `{ns}`, which this Stencil does not serve (--namespace {}): it could be neither watched nor pruned there; add `{ns}` to --namespace (the chart's watchNamespaces)",
                info.served.join(",")
            ));
        }
        metadata.insert("namespace".into(), Value::String(ns.clone()));
    }

    let parent_meta = info.object.get("metadata");
    let parent_field = |k: &str| parent_meta.and_then(|m| m.get(k)).and_then(Value::as_str);
    let labels_map = metadata.entry("labels").or_insert_with(|| json!({}));
    let labels_map = labels_map.as_object_mut().ok_or("metadata.labels must be a mapping")?;
    labels_map.insert(labels::MANAGED_BY.into(), labels::MANAGED_BY_VALUE.into());
    labels_map.insert(labels::DEFINITION.into(), labels::label_value(&info.def.name).into());
    labels_map.insert(labels::CHILD.into(), child.name.clone().into());
    labels_map.insert(
        labels::PARENT_NAME.into(),
        labels::label_value(parent_field("name").unwrap_or_default()).into(),
    );
    if let Some(ns) = info.namespace {
        labels_map.insert(labels::PARENT_NAMESPACE.into(), ns.into());
    }
    if let Some(uid) = parent_field("uid") {
        labels_map.insert(labels::PARENT_UID.into(), uid.into());
    }
    // A sharded member watches only the children of its own share.
    if let Some(shard) = parent_meta
        .and_then(|m| m.pointer(&format!("/labels/{}", labels::SHARD.replace('/', "~1"))))
        .and_then(Value::as_str)
    {
        labels_map.insert(labels::SHARD.into(), shard.into());
    }

    // An ownerReference may only point at an owner in the same namespace, or at a
    // cluster-scoped owner. A decorator's does not block its owner's deletion: that would
    // need a write on the decorated kind (its finalizers), which a decorator never has.
    let ownable = info.namespace.is_none() || (namespaced && namespace.as_deref() == info.namespace);
    if ownable && collected_by_garbage_collector(info.def, child) {
        let mut owner = json!({
            "apiVersion": info.def.spec.parent.api_version,
            "kind": info.def.spec.parent.kind,
            "name": parent_field("name").unwrap_or_default(),
            "controller": true,
            "blockOwnerDeletion": !info.def.spec.is_decorator(),
        });
        if let Some(uid) = parent_field("uid") {
            owner["uid"] = uid.into();
        }
        let refs = metadata.entry("ownerReferences").or_insert_with(|| json!([]));
        let refs = refs.as_array_mut().ok_or("metadata.ownerReferences must be a list")?;
        if refs.iter().any(|r| r.get("controller") == Some(&Value::Bool(true))) {
            return Err("the template sets a controller ownerReference; Stencil owns its children".into());
        }
        refs.push(owner);
    }
    Ok(doc)
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
