//! Lookups: which objects a parent's lookups name (their name and namespace templates
//! rendered), and which fetched object answers which lookup.

use std::collections::BTreeMap;

use minijinja::value::{Serde, Value as JinjaValue};
use serde::Serialize;
use serde_json::{Value, json};

use super::*;
use crate::definition::Lookup;
use crate::selector::{self, Matcher};

/// What a lookup asks for: one object by name, or every object a selector matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Target {
    /// The object of this name.
    Name(String),
    /// Every object the selector matches (its query form), a list in `lookups.<name>`.
    Selector(#[serde(serialize_with = "query")] Matcher),
}

fn query<S: serde::Serializer>(m: &Matcher, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(m.query())
}

/// A lookup to fetch for a parent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LookupRequest {
    /// The lookup's name in the definition.
    pub lookup: String,
    /// The object's apiVersion.
    pub api_version: String,
    /// The object's kind.
    pub kind: String,
    /// The namespace; none for cluster-scoped kinds, and for a selector over every
    /// namespace.
    pub namespace: Option<String>,
    /// The name or the selector.
    pub target: Target,
    /// Whether the parent renders without it.
    pub optional: bool,
}

impl LookupRequest {
    /// Whether a live object (as JSON) answers this request.
    pub fn answers(&self, obj: &Value) -> bool {
        let Some(k) = ObjectKey::of_value(obj) else {
            return false;
        };
        let Ok(want) = Gvk::parse(&self.api_version, &self.kind) else {
            return false;
        };
        // A request without a namespace (a cluster-scoped kind, or every namespace)
        // matches whatever the object's namespace.
        if k.group != want.group || k.kind != want.kind || (self.namespace.is_some() && k.namespace != self.namespace) {
            return false;
        }
        match &self.target {
            Target::Name(name) => k.name == *name,
            Target::Selector(m) => m.matches(string_map(obj.pointer("/metadata/labels")).as_ref()),
        }
    }
}

/// A JSON map of strings (labels, annotations) as a map; `None` when absent.
pub fn string_map(v: Option<&Value>) -> Option<BTreeMap<String, String>> {
    v.and_then(Value::as_object).map(|m| {
        m.iter()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
            .collect()
    })
}

/// The objects to fetch as lookups for this parent, with their names, namespaces and
/// selectors rendered.
///
/// # Errors
///
/// A name, namespace or selector template fails, or a lookup names a namespace the
/// definition may not read.
pub fn lookup_requests(
    def: &CompiledDefinition,
    parent: &Value,
    scopes: &Scopes,
) -> Result<Vec<LookupRequest>, RenderFailure> {
    let info = ParentInfo::new(def, parent);
    let ctx = JinjaValue::from(Serde(json!({"parent": parent, "definition": definition_value(def)})));
    let mut requests = Vec::new();
    let mut errors = Vec::new();
    for lookup in &def.spec.lookups {
        let ns_t = names::lookup_namespace(&lookup.name);
        let every_namespace = lookup.namespace_template.as_deref().map(str::trim) == Some("*");
        let namespace = match &lookup.namespace_template {
            _ if every_namespace => Ok(None),
            Some(source) => info
                .render_template(&ns_t, source, &ctx)
                .map(|s| Some(s.trim().to_string())),
            None => Ok(info.namespace.map(str::to_string)),
        };
        let target = target(&info, lookup, &ctx);
        let (target, namespace) = match (target, namespace) {
            (Ok(t), Ok(ns)) => (t, ns),
            (t, ns) => {
                errors.extend(t.err());
                errors.extend(ns.err());
                continue;
            }
        };
        let namespaced = Gvk::parse(&lookup.api_version, &lookup.kind).is_ok_and(|g| scopes.is_namespaced(&g));
        let namespace = if namespaced { namespace } else { None };
        if namespaced && every_namespace && !info.may_use_namespace("*") {
            errors.push(RenderError::Object {
                at: info.place(&ns_t, None),
                message: "namespaceTemplate `*` reads every namespace; a namespaced parent needs spec.allowedNamespaces: [\"*\"] for it".into(),
            });
            continue;
        }
        if let Some(ns) = &namespace
            && !info.may_use_namespace(ns)
        {
            errors.push(RenderError::Object {
                at: info.place(&ns_t, None),
                message: format!("lookup namespace `{ns}` is outside the parent's namespace; list it in spec.allowedNamespaces to allow it"),
            });
            continue;
        }
        requests.push(LookupRequest {
            lookup: lookup.name.clone(),
            api_version: lookup.api_version.clone(),
            kind: lookup.kind.clone(),
            namespace,
            target,
            optional: lookup.optional,
        });
    }
    if errors.is_empty() {
        Ok(requests)
    } else {
        Err(RenderFailure(errors))
    }
}

/// Renders a lookup's name, or its selector's templated values.
fn target(info: &ParentInfo<'_>, lookup: &Lookup, ctx: &JinjaValue) -> Result<Target, RenderError> {
    if let Some(sel) = &lookup.selector {
        let mut rendered = BTreeMap::new();
        for (path, value) in selector::values(sel) {
            if selector::is_template(value) {
                let t = names::lookup_selector(&lookup.name, &path);
                rendered.insert(path, info.render_template(&t, value, ctx)?.trim().to_string());
            }
        }
        return Matcher::new(&selector::with_values(sel, &rendered))
            .map(Target::Selector)
            .map_err(|e| RenderError::Object {
                at: info.place(&names::lookup_selector(&lookup.name, "matchLabels"), None),
                message: format!("the lookup's selector rendered invalid: {e}"),
            });
    }
    let name_t = names::lookup_name(&lookup.name);
    let name = info
        .render_template(&name_t, lookup.name_template.as_deref().unwrap_or_default(), ctx)?
        .trim()
        .to_string();
    if name.is_empty() {
        return Err(RenderError::Object {
            at: info.place(&name_t, None),
            message: "the lookup's name rendered empty".into(),
        });
    }
    Ok(Target::Name(name))
}

/// Assigns fetched objects to the lookup requests they answer: a name lookup gets its
/// object (when found), a selector lookup the list of matches sorted by namespace and
/// name (possibly empty).
pub fn match_lookups(requests: &[LookupRequest], objects: &[Value]) -> BTreeMap<String, Value> {
    requests
        .iter()
        .filter_map(|r| {
            let value = match &r.target {
                Target::Name(_) => objects.iter().find(|o| r.answers(o))?.clone(),
                Target::Selector(_) => {
                    let mut found: Vec<&Value> = objects.iter().filter(|o| r.answers(o)).collect();
                    found.sort_by_key(|o| ObjectKey::of_value(o).map(|k| (k.namespace, k.name)));
                    found.dedup_by_key(|o| ObjectKey::of_value(o));
                    Value::Array(found.into_iter().cloned().collect())
                }
            };
            Some((r.lookup.clone(), value))
        })
        .collect()
}
