//! An RGD's `resources` as children and lookups: a `template` as a child written as an
//! object, an `externalRef` as a lookup, and the references between resources as
//! `dependsOn`, as kro orders them.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::Refusal;
use crate::cel_dialect;

/// The children and lookups of one RGD, with what the translation chose for each.
#[derive(Debug, Clone, Default)]
pub(crate) struct Graph {
    /// Each child entry, as `spec.children[]`.
    pub children: Vec<Value>,
    /// Each lookup, as `spec.lookups[]`.
    pub lookups: Vec<Value>,
    /// The comment lines for each child and lookup, by id.
    pub notes: Vec<(String, Vec<String>)>,
    /// The namespaces the resources name (`*` for one an expression computes), which a
    /// definition must allow.
    pub namespaces: BTreeSet<String>,
}

const KEYS: [&str; 6] = ["id", "template", "externalRef", "readyWhen", "includeWhen", "forEach"];

/// The children and lookups `resources` declares.
pub(super) fn translate(resources: Option<&Value>, refusals: &mut Vec<Refusal>) -> Graph {
    let resources: Vec<&Map<String, Value>> = resources
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_object).collect())
        .unwrap_or_default();
    let templated: BTreeSet<&str> = resources
        .iter()
        .filter(|r| r.contains_key("template"))
        .filter_map(|r| r.get("id").and_then(Value::as_str))
        .collect();
    let mut graph = Graph::default();
    for resource in resources {
        let Some(id) = resource.get("id").and_then(Value::as_str) else {
            refusals.push(Refusal::of(None, "resources", "a resource without an `id`"));
            continue;
        };
        for key in resource.keys().filter(|k| !KEYS.contains(&k.as_str())) {
            refusals.push(Refusal::of(Some(id), key, "Stencil has no such resource field"));
        }
        match (resource.get("template"), resource.get("externalRef")) {
            (Some(template), None) => child(id, template, resource, &templated, &mut graph, refusals),
            (None, Some(reference)) => lookup(id, reference, resource, &mut graph, refusals),
            _ => refusals.push(Refusal::of(
                Some(id),
                "template",
                "a resource has a `template` or an `externalRef`",
            )),
        }
    }
    graph
}

/// A `template` resource as a child written as an object.
fn child(
    id: &str,
    template: &Value,
    resource: &Map<String, Value>,
    templated: &BTreeSet<&str>,
    graph: &mut Graph,
    refusals: &mut Vec<Refusal>,
) {
    let mut notes = vec![format!("resources[{id}]: its template, as an object")];
    let mut reads = BTreeSet::new();
    check_strings(id, "template", template, &mut reads, refusals);
    let mut entry = json!({"name": id});
    if let Some(rule) = joined_rule(id, "includeWhen", resource.get("includeWhen"), &mut reads, refusals) {
        entry["includeWhen"] = rule.into();
    }
    if let Some(for_each) = resource.get("forEach") {
        check_strings(id, "forEach", for_each, &mut reads, refusals);
        entry["collection"] = true.into();
        entry["forEach"] = for_each.clone();
        notes.push("forEach: a collection, one object per combination".to_string());
    }
    if let Some(rule) = joined_rule(
        id,
        "readyWhen",
        resource.get("readyWhen"),
        &mut BTreeSet::new(),
        refusals,
    ) {
        entry["readyWhen"] = rule.into();
    }
    let depends_on: Vec<&str> = reads
        .iter()
        .map(String::as_str)
        .filter(|r| *r != id && templated.contains(r))
        .collect();
    if !depends_on.is_empty() {
        notes.push(format!(
            "dependsOn from the resources it reads: {}",
            depends_on.join(", ")
        ));
        entry["dependsOn"] = json!(depends_on);
    }
    if let Some(namespace) = template.pointer("/metadata/namespace").and_then(Value::as_str) {
        graph.namespaces.insert(allowed(namespace));
    }
    entry["adopt"] = "IfUnowned".into();
    notes.push("adopt: IfUnowned takes over the object kro made (kro sets no owner reference)".to_string());
    entry["object"] = template.clone();
    graph.children.push(entry);
    graph.notes.push((id.to_string(), notes));
}

/// The `${...}` strings under `value`, compiled to check them; the names they read are
/// added to `reads`.
fn check_strings(id: &str, field: &str, value: &Value, reads: &mut BTreeSet<String>, refusals: &mut Vec<Refusal>) {
    match value {
        Value::String(text) if text.contains("${") => match cel_dialect::parse(text) {
            Ok(cel) => reads.extend(cel.variables().map(str::to_string)),
            Err(e) => refusals.push(Refusal::of(Some(id), field, e.to_string())),
        },
        Value::Object(members) => {
            for (key, v) in members {
                if key.contains("${") {
                    refusals.push(Refusal::of(
                        Some(id),
                        field,
                        format!("the key `{key}` is written in CEL; Stencil's keys are literal"),
                    ));
                }
                check_strings(id, field, v, reads, refusals);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| check_strings(id, field, v, reads, refusals)),
        _ => {}
    }
}

/// kro's list of conditions, each one `${...}`, as one CEL rule that holds when all do.
fn joined_rule(
    id: &str,
    field: &str,
    rules: Option<&Value>,
    reads: &mut BTreeSet<String>,
    refusals: &mut Vec<Refusal>,
) -> Option<String> {
    let rules = rules?.as_array().cloned().unwrap_or_default();
    let mut expressions = Vec::new();
    for rule in &rules {
        let text = rule.as_str().unwrap_or_default();
        match cel_dialect::segments(text).as_deref() {
            Ok([cel_dialect::Segment::Expression(e)]) => {
                check_strings(id, field, rule, reads, refusals);
                expressions.push(e.clone());
            }
            _ => refusals.push(Refusal::of(
                Some(id),
                field,
                format!("`{text}` is not one `${{...}}` expression"),
            )),
        }
    }
    match expressions.as_slice() {
        [] => None,
        [one] => Some(format!("${{{one}}}")),
        many => Some(format!("${{({})}}", many.join(") && ("))),
    }
}

/// An `externalRef` as a lookup: by name (a plain field of the instance may name it), in
/// the instance's namespace unless it names one; or by a label selector, in every
/// namespace unless it names one, as kro reads a collection.
fn lookup(id: &str, reference: &Value, resource: &Map<String, Value>, graph: &mut Graph, refusals: &mut Vec<Refusal>) {
    for key in ["readyWhen", "includeWhen", "forEach"]
        .into_iter()
        .filter(|k| resource.contains_key(*k))
    {
        refusals.push(Refusal::of(
            Some(id),
            key,
            "a lookup reads an object as it is; Stencil has no condition on it",
        ));
    }
    let text = |pointer: &str| reference.pointer(pointer).and_then(Value::as_str);
    let (Some(api_version), Some(kind)) = (text("/apiVersion"), text("/kind")) else {
        refusals.push(Refusal::of(
            Some(id),
            "externalRef",
            "an externalRef needs apiVersion and kind",
        ));
        return;
    };
    let mut entry = json!({"name": id, "apiVersion": api_version, "kind": kind});
    let selector = reference.pointer("/metadata/selector").filter(|s| !s.is_null());
    match (text("/metadata/name"), selector) {
        (Some(name), None) => match minijinja_of(name) {
            Some(template) => entry["nameTemplate"] = template.into(),
            None => refusals.push(Refusal::of(
                Some(id),
                "externalRef.metadata.name",
                "only literal text and fields of the instance (`${schema.spec.x}`) are translated",
            )),
        },
        (None, Some(selector)) => match label_selector(selector) {
            Some(selector) => entry["selector"] = selector,
            None => refusals.push(Refusal::of(
                Some(id),
                "externalRef.metadata.selector",
                "only a selector written out (matchLabels, matchExpressions) whose values are literal text or fields of the instance is translated",
            )),
        },
        (Some(_), Some(_)) => {
            refusals.push(Refusal::of(
                Some(id),
                "externalRef.metadata.selector",
                "an externalRef names its object or selects objects, not both",
            ));
            return;
        }
        (None, None) => {
            refusals.push(Refusal::of(
                Some(id),
                "externalRef.metadata",
                "an externalRef needs metadata.name or metadata.selector",
            ));
            return;
        }
    }
    match text("/metadata/namespace") {
        Some(namespace) => {
            graph.namespaces.insert(allowed(namespace));
            match minijinja_of(namespace) {
                Some(template) => entry["namespaceTemplate"] = template.into(),
                None => refusals.push(Refusal::of(
                    Some(id),
                    "externalRef.metadata.namespace",
                    "only literal text and fields of the instance are translated",
                )),
            }
        }
        None if selector.is_some() => {
            graph.namespaces.insert("*".to_string());
            entry["namespaceTemplate"] = "*".into();
        }
        None => {}
    }
    let what = if selector.is_some() {
        "its externalRef by selector, as a lookup of the list of matching objects"
    } else {
        "its externalRef, as a lookup the children wait for"
    };
    graph
        .notes
        .push((id.to_string(), vec![format!("resources[{id}]: {what}")]));
    graph.lookups.push(entry);
}

/// A label selector kro writes out, with its values (literal text or fields of the
/// instance) as minijinja templates; `None` for a selector an expression computes.
fn label_selector(selector: &Value) -> Option<Value> {
    let selector = selector.as_object()?;
    let mut out = Map::new();
    for (key, value) in selector {
        let translated = match key.as_str() {
            "matchLabels" => Value::Object(
                value
                    .as_object()?
                    .iter()
                    .map(|(k, v)| Some((k.clone(), minijinja_of(v.as_str()?)?.into())))
                    .collect::<Option<Map<_, _>>>()?,
            ),
            "matchExpressions" => Value::Array(
                value
                    .as_array()?
                    .iter()
                    .map(|e| {
                        let mut e = e.as_object()?.clone();
                        let literal = |k: &str| e.get(k).and_then(Value::as_str).is_some_and(|t| !t.contains("${"));
                        if !literal("key") || !literal("operator") {
                            return None;
                        }
                        if let Some(values) = e.get("values") {
                            let values: Option<Vec<Value>> = values
                                .as_array()?
                                .iter()
                                .map(|v| Some(minijinja_of(v.as_str()?)?.into()))
                                .collect();
                            e.insert("values".into(), Value::Array(values?));
                        }
                        Some(Value::Object(e))
                    })
                    .collect::<Option<Vec<_>>>()?,
            ),
            _ => return None,
        };
        out.insert(key.clone(), translated);
    }
    Some(Value::Object(out))
}

/// What `allowedNamespaces` must hold for a resource that names `namespace`: the
/// namespace, or `*` when an expression computes it.
fn allowed(namespace: &str) -> String {
    if namespace.contains("${") {
        "*".to_string()
    } else {
        namespace.to_string()
    }
}

/// A lookup name kro writes (literal text, and `${schema.a.b}` reads of the instance) as
/// the minijinja template of a lookup's name; `None` for any other expression.
fn minijinja_of(text: &str) -> Option<String> {
    let segments = cel_dialect::segments(text).ok()?;
    let mut out = String::new();
    for segment in segments {
        match segment {
            cel_dialect::Segment::Text(t) if !t.contains("{{") && !t.contains("{%") => out.push_str(&t),
            cel_dialect::Segment::Expression(e) => {
                let path = e.strip_prefix("schema.")?;
                let plain = path.split('.').all(crate::compile::is_identifier);
                if !plain {
                    return None;
                }
                out.push_str(&format!("{{{{ parent.{path} }}}}"));
            }
            cel_dialect::Segment::Text(_) => return None,
        }
    }
    Some(out)
}
