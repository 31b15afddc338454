//! What RBAC children need beyond the child verbs. The API server lets Stencil write a
//! Role or ClusterRole only with permissions it holds itself (or `escalate`), and a
//! binding only to a role whose permissions it holds (or with `bind` on that role). So:
//! - a role child whose rules are written literally: Stencil holds those rules (a
//!   templated `resourceNames` is held on every name);
//! - a role child with templated rules: `escalate` on it when its name is literal;
//!   otherwise nothing is granted and a note gives the rule an admin must add;
//! - a binding with a literal `roleRef`: `bind` on that role; with a templated one,
//!   nothing: binding the definition's own literal roles needs nothing more (Stencil
//!   holds their rules), and a note gives the rule for any other.

use serde_json::Value;

use stencil::compile::CompiledDefinition;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
/// What a template expression becomes when a rules block is read without rendering it.
const TEMPLATED: &str = "__stencil_templated__";

/// One rule Stencil must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// Cluster-wide (for a ClusterRole or its binding), or in the namespaces Stencil
    /// serves (for a Role).
    pub cluster_wide: bool,
    /// API group.
    pub group: String,
    /// Resource (plural).
    pub resource: String,
    /// Verbs.
    pub verbs: Vec<String>,
    /// Resource names; empty for every object.
    pub names: Vec<String>,
}

/// What the RBAC children of `def` need: the grants, and notes on what `stencil rbac`
/// cannot derive with the rule an admin must add for it.
pub fn rbac_children(def: &CompiledDefinition) -> (Vec<Grant>, Vec<String>) {
    let mut grants = Vec::new();
    let mut notes = Vec::new();
    for (i, child) in def.entries() {
        let at = format!("definition {}, children[{}]", def.name, child.name);
        for gvk in def.child_kinds[i].iter().filter(|g| g.group == RBAC_GROUP) {
            let cluster_wide = gvk.kind == "ClusterRole";
            let resource = if cluster_wide { "clusterroles" } else { "roles" };
            match gvk.kind.as_str() {
                "Role" | "ClusterRole" => match literal_rules(&child.template) {
                    Some(rules) => grants.extend(rules.into_iter().map(|mut g| {
                        g.cluster_wide = cluster_wide;
                        g
                    })),
                    None => match literal_name(&child.template) {
                        Some(name) => grants.push(escalate(cluster_wide, resource, vec![name])),
                        None => notes.push(format!(
                            "{at}: the rules and the name of its {} are templated, so Stencil cannot hold them in advance; write the rules literally, or have an admin grant {}",
                            gvk.kind,
                            stencil::gvk::missing_rule(RBAC_GROUP, resource, "escalate")
                        )),
                    },
                },
                "RoleBinding" | "ClusterRoleBinding" => {
                    let refs = role_refs(&child.template);
                    for (kind, name) in &refs {
                        let cluster_wide = kind.as_deref() == Some("ClusterRole");
                        let resource = if cluster_wide { "clusterroles" } else { "roles" };
                        match (kind, name) {
                            (Some(_), Some(name)) => grants.push(Grant {
                                cluster_wide,
                                group: RBAC_GROUP.into(),
                                resource: resource.into(),
                                verbs: vec!["bind".into()],
                                names: vec![name.clone()],
                            }),
                            _ => notes.push(format!(
                                "{at}: its roleRef is templated; Stencil binds this definition's own literal roles with the permissions it holds, and any other role only if an admin grants {}",
                                stencil::gvk::missing_rule(RBAC_GROUP, if kind.is_some() { resource } else { "roles, clusterroles" }, "bind")
                            )),
                        }
                    }
                }
                _ => {}
            }
        }
    }
    (grants, notes)
}

fn escalate(cluster_wide: bool, resource: &str, names: Vec<String>) -> Grant {
    Grant {
        cluster_wide,
        group: RBAC_GROUP.into(),
        resource: resource.into(),
        verbs: vec!["escalate".into()],
        names,
    }
}

/// The top-level `rules:` block of a role template as grants, when it is literal but for
/// templated `resourceNames` (held on every name); `None` when anything else in it is
/// templated, it uses `nonResourceURLs`, or there is no such block.
fn literal_rules(template: &str) -> Option<Vec<Grant>> {
    let lines: Vec<&str> = template.lines().collect();
    let start = lines.iter().position(|l| l.trim_end() == "rules:")?;
    let block: Vec<&str> = lines[start + 1..]
        .iter()
        .take_while(|l| l.starts_with(' ') || l.starts_with('-') || l.trim().is_empty())
        .copied()
        .collect();
    let text = block.join("\n");
    if text.contains("{%") || text.contains("{#") {
        return None;
    }
    let text = replace_expressions(&text)?;
    let rules: Vec<Value> = match stencil::yaml::document(&text).ok()? {
        Value::Array(rules) => rules,
        _ => return None,
    };
    // A list of literal strings; `None` for anything else (a templated list, a number).
    let strings = |rule: &Value, key: &str| -> Option<Vec<String>> {
        let list = rule.get(key)?.as_array()?;
        let items: Vec<String> = list.iter().filter_map(Value::as_str).map(str::to_string).collect();
        (items.len() == list.len() && items.iter().all(|s| !s.contains(TEMPLATED))).then_some(items)
    };
    let mut grants = Vec::new();
    for rule in &rules {
        if rule.get("nonResourceURLs").is_some() {
            return None;
        }
        let (groups, resources, verbs) = (
            strings(rule, "apiGroups")?,
            strings(rule, "resources")?,
            strings(rule, "verbs")?,
        );
        // A templated `resourceNames` is held on every name.
        let names = strings(rule, "resourceNames").unwrap_or_default();
        for group in &groups {
            for resource in &resources {
                grants.push(Grant {
                    cluster_wide: false,
                    group: group.clone(),
                    resource: resource.clone(),
                    verbs: verbs.clone(),
                    names: names.clone(),
                });
            }
        }
    }
    Some(grants)
}

/// `text` with each `{{ … }}` replaced by a marker string, so it parses as YAML.
fn replace_expressions(text: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        let close = rest[open..].find("}}")? + open;
        out.push_str(&rest[..open]);
        out.push_str(TEMPLATED);
        rest = &rest[close + 2..];
    }
    out.push_str(rest);
    Some(out)
}

/// The literal `metadata.name` of a template, if it has one.
fn literal_name(template: &str) -> Option<String> {
    let mut in_metadata = false;
    for line in template.lines() {
        if !line.starts_with(' ') {
            in_metadata = line.trim_end() == "metadata:";
        } else if in_metadata && let Some(v) = line.strip_prefix("  name:") {
            return literal(v);
        }
    }
    None
}

fn literal(v: &str) -> Option<String> {
    let v = v.trim().trim_matches(|c| c == '"' || c == '\'');
    (!v.contains("{{") && !v.contains("{%") && !v.is_empty()).then(|| v.to_string())
}

/// The `roleRef` blocks of a binding template: kind and name, each when literal.
fn role_refs(template: &str) -> Vec<(Option<String>, Option<String>)> {
    let mut found = Vec::new();
    let lines: Vec<&str> = template.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if line.trim() != "roleRef:" {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let (mut kind, mut name) = (None, None);
        for next in lines[i + 1..]
            .iter()
            .take_while(|l| l.len() - l.trim_start().len() > indent)
        {
            if let Some(v) = next.trim().strip_prefix("kind:") {
                kind = literal(v);
            } else if let Some(v) = next.trim().strip_prefix("name:") {
                name = literal(v);
            }
        }
        found.push((kind, name));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(children: &str) -> CompiledDefinition {
        let text = format!(
            "apiVersion: stencil.dev/v1alpha1\nkind: OperatorDefinition\nmetadata:\n  name: apps.example.com\nspec:\n  parent:\n    apiVersion: example.com/v1\n    kind: App\n  children:\n{children}"
        );
        let (mut defs, diags) = stencil::compile::compile_file("a.yaml", &text);
        assert!(diags.0.is_empty(), "{diags}");
        defs.remove(0)
    }

    fn child(name: &str, template: &str) -> String {
        let body: String = template.lines().map(|l| format!("        {l}\n")).collect();
        format!("    - name: {name}\n      template: |\n{body}")
    }

    const LITERAL: &str = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {{ parent.metadata.name }}-reader\nrules:\n  - apiGroups: [\"\", apps]\n    resources: [configmaps]\n    verbs: [get, list]\n  - apiGroups: [\"\"]\n    resources: [secrets]\n    resourceNames: [\"{{ parent.metadata.name }}-db\"]\n    verbs: [get]";

    fn grant(cluster_wide: bool, group: &str, resource: &str, verbs: &[&str], names: &[&str]) -> Grant {
        Grant {
            cluster_wide,
            group: group.into(),
            resource: resource.into(),
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            names: names.iter().map(|v| v.to_string()).collect(),
        }
    }

    #[test]
    fn a_role_with_literal_rules_is_held_and_a_templated_name_held_on_every_object() {
        let (grants, notes) = rbac_children(&def(&child("reader", LITERAL)));
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(
            grants,
            [
                grant(true, "", "configmaps", &["get", "list"], &[]),
                grant(true, "apps", "configmaps", &["get", "list"], &[]),
                grant(true, "", "secrets", &["get"], &[]),
            ]
        );
        let role = LITERAL.replace("kind: ClusterRole", "kind: Role");
        let (grants, _) = rbac_children(&def(&child("reader", &role)));
        assert!(grants.iter().all(|g| !g.cluster_wide));
    }

    #[test]
    fn a_role_with_templated_rules_gets_escalate_by_name_or_a_note() {
        let templated = LITERAL.replace("verbs: [get, list]", "verbs: {{ parent.spec.verbs | tojson }}");
        let (grants, notes) = rbac_children(&def(&child("reader", &templated)));
        assert!(grants.is_empty(), "{grants:?}");
        assert!(
            notes[0].contains("children[reader]") && notes[0].contains("\"escalate\""),
            "{notes:?}"
        );
        let named = templated.replace("{{ parent.metadata.name }}-reader", "reader");
        let (grants, notes) = rbac_children(&def(&child("reader", &named)));
        assert!(notes.is_empty());
        assert_eq!(
            grants,
            [grant(true, RBAC_GROUP, "clusterroles", &["escalate"], &["reader"])]
        );
        let urls = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: metrics\nrules:\n  - nonResourceURLs: [/metrics]\n    verbs: [get]";
        let (grants, _) = rbac_children(&def(&child("m", urls)));
        assert_eq!(grants[0].verbs, ["escalate"]);
    }

    #[test]
    fn a_binding_gets_bind_on_a_literal_role_and_a_note_for_a_templated_one() {
        let binding = |name: &str| {
            format!(
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: b\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: {name}\nsubjects: []"
            )
        };
        let (grants, notes) = rbac_children(&def(&child("b", &binding("edit"))));
        assert!(notes.is_empty());
        assert_eq!(grants, [grant(true, RBAC_GROUP, "clusterroles", &["bind"], &["edit"])]);
        let (grants, notes) = rbac_children(&def(&child("b", &binding("{{ parent.spec.role }}"))));
        assert!(grants.is_empty());
        assert!(
            notes[0].contains("roleRef is templated") && notes[0].contains("\"bind\""),
            "{notes:?}"
        );
    }
}
