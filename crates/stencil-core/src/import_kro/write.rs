//! The translated OperatorDefinition as YAML text, with a comment at each choice the
//! translation made.

use serde_json::{Map, Value, json};

use super::resources::Graph;
use super::schema::Parent;

/// kro's `status.state` from Stencil's readiness, for whoever reads it.
const STATE_TEMPLATE: &str = "state: {{ \"ACTIVE\" if ready else \"IN_PROGRESS\" }}\n";

/// The finalizer kro puts on each instance it serves.
const KRO_FINALIZER: &str = "kro.run/finalizer";

/// The OperatorDefinition for the RGD `rgd` of `file`.
pub(super) fn definition(file: &str, rgd: &str, parent: &Parent, graph: &Graph) -> String {
    let mut out = format!(
        "# Imported from {file} (ResourceGraphDefinition {rgd}) by `stencil import kro`.\n\
         # The CRD is {name}: its plural is formed from the kind as kro forms it; check it\n\
         # against `kubectl get crd` before a takeover.\n\
         apiVersion: stencil.dev/v1alpha1\nkind: OperatorDefinition\nmetadata:\n  name: {name}\nspec:\n",
        name = parent.definition_name()
    );
    out.push_str(&block(
        "  ",
        &json!({"parent": {"apiVersion": format!("{}/{}", parent.group, parent.version), "kind": parent.kind}}),
    ));
    if !graph.namespaces.is_empty() {
        out.push_str(
            "  # kro's resources name their namespace; Stencil keeps a parent's children in its own\n  \
             # namespace unless allowed. `*` stands for a namespace an expression computes: narrow it\n  \
             # to the namespaces you use.\n",
        );
        out.push_str(&block("  ", &json!({"allowedNamespaces": graph.namespaces})));
    }
    out.push_str("  # The schema's lines are kro's SimpleSchema, which Stencil's compact form reads.\n");
    out.push_str(&block("  ", &json!({"crd": parent.crd})));
    entries(&mut out, "lookups", &graph.lookups, graph);
    entries(&mut out, "children", &graph.children, graph);
    out.push_str("  status:\n");
    if !parent.status_fields.is_empty() {
        let fields: Map<String, Value> = parent
            .status_fields
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        out.push_str("    # kro's status fields, in CEL; a field is left out while what it reads is absent.\n");
        out.push_str(&block("    ", &json!({"fields": fields})));
    }
    out.push_str("    # kro's status.state: ACTIVE once every child is ready, IN_PROGRESS before.\n");
    out.push_str(&block("    ", &json!({"template": STATE_TEMPLATE})));
    out.push_str(
        "  # kro put its finalizer on every instance: a deleted instance is torn down by Stencil\n  \
         # and released of kro's finalizer too, so nothing waits for a kro that is gone.\n",
    );
    out.push_str(&block(
        "  ",
        &json!({"finalize": {"inheritFinalizers": [KRO_FINALIZER]}}),
    ));
    out
}

/// `spec.<key>`, each entry under the comment lines of its id.
fn entries(out: &mut String, key: &str, entries: &[Value], graph: &Graph) {
    if entries.is_empty() {
        return;
    }
    out.push_str(&format!("  {key}:\n"));
    for entry in entries {
        let id = entry.get("name").and_then(Value::as_str).unwrap_or_default();
        for (_, notes) in graph.notes.iter().filter(|(n, _)| n == id) {
            for note in notes {
                out.push_str(&format!("    # {note}\n"));
            }
        }
        let text = block("", entry);
        for (i, line) in text.lines().enumerate() {
            let lead = if i == 0 { "    - " } else { "      " };
            out.push_str(lead);
            out.push_str(line);
            out.push('\n');
        }
    }
}

/// `value` as YAML, each line behind `indent`.
fn block(indent: &str, value: &Value) -> String {
    let text = crate::yaml::to_string(value).expect("JSON values write as YAML");
    text.lines().map(|l| format!("{indent}{l}\n")).collect()
}
