//! Lookups: which objects a parent's lookups name (their name and namespace templates
//! rendered), and which fetched object answers which lookup.

use std::collections::BTreeMap;

use minijinja::value::{Serde, Value as JinjaValue};
use serde::Serialize;
use serde_json::{Value, json};

use super::*;

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
    /// The object's namespace; none for cluster-scoped kinds.
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
    /// Whether the parent renders without it.
    pub optional: bool,
}

/// The objects to fetch as lookups for this parent, with their names rendered.
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
        let name_t = names::lookup_name(&lookup.name);
        let name = info
            .render_template(&name_t, &lookup.name_template, &ctx)
            .map(|s| s.trim().to_string());
        let ns_t = names::lookup_namespace(&lookup.name);
        let namespace = match &lookup.namespace_template {
            Some(source) => info
                .render_template(&ns_t, source, &ctx)
                .map(|s| Some(s.trim().to_string())),
            None => Ok(info.namespace.map(str::to_string)),
        };
        let (name, namespace) = match (name, namespace) {
            (Ok(n), Ok(ns)) => (n, ns),
            (n, ns) => {
                errors.extend(n.err());
                errors.extend(ns.err());
                continue;
            }
        };
        let namespaced = Gvk::parse(&lookup.api_version, &lookup.kind).is_ok_and(|g| scopes.is_namespaced(&g));
        let namespace = if namespaced { namespace } else { None };
        if name.is_empty() {
            errors.push(RenderError::Object {
                at: info.place(&name_t, None),
                message: "the lookup's name rendered empty".into(),
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
            name,
            optional: lookup.optional,
        });
    }
    if errors.is_empty() {
        Ok(requests)
    } else {
        Err(RenderFailure(errors))
    }
}

/// Assigns fetched objects to the lookup requests they answer (by group, kind,
/// namespace and name).
pub fn match_lookups(requests: &[LookupRequest], objects: &[Value]) -> BTreeMap<String, Value> {
    requests
        .iter()
        .filter_map(|r| {
            let want = ObjectKey::new(
                &Gvk::parse(&r.api_version, &r.kind).ok()?,
                r.namespace.as_deref(),
                &r.name,
            );
            // A request without a namespace (a cluster-scoped kind) matches by name alone.
            let found = objects.iter().find(|o| {
                ObjectKey::of_value(o).is_some_and(|k| {
                    (k.group == want.group && k.kind == want.kind && k.name == want.name)
                        && (want.namespace.is_none() || k.namespace == want.namespace)
                })
            })?;
            Some((r.lookup.clone(), found.clone()))
        })
        .collect()
}
