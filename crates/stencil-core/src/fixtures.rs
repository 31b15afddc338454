//! Definition text for tests and the bench: the one place that writes an
//! OperatorDefinition around a parent kind with an open CRD schema, so a test states only
//! its children and the spec fields it adds. Built only for tests (`fixtures` feature).

/// The parent kind a fixture definition serves: `kind` in `group`/v1, named `plural`.
#[derive(Debug, Clone, Copy)]
pub struct ParentKind<'a> {
    /// The API group.
    pub group: &'a str,
    /// The kind.
    pub kind: &'a str,
    /// The resource's plural; the definition is named `<plural>.<group>`.
    pub plural: &'a str,
}

/// The open spec schema a fixture's CRD gives; a test that needs a typed spec replaces
/// this line of [`definition`]'s text.
pub const OPEN_SPEC: &str = "spec: {type: object, x-kubernetes-preserve-unknown-fields: true}";

/// A ConfigMap child named `<parent's name>-cm` whose data holds the parent's `spec.size`.
pub const CONFIGMAP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ parent.metadata.name }}-cm\ndata:\n  size: {{ parent.spec.size | quote }}";

/// A definition of `parent` with a CRD whose spec and status take any field, `extra` spec
/// fields (indented two spaces, each line ending in a newline) and `children` (entries
/// from [`child`]).
pub fn definition(parent: ParentKind<'_>, children: &str, extra: &str) -> String {
    let plural = parent.plural;
    let crd = format!(
        "  crd:
    names: {{plural: {plural}}}
    versions:
      - name: v1
        served: true
        storage: true
        schema:
          openAPIV3Schema:
            type: object
            properties:
              {OPEN_SPEC}
              status: {{type: object, x-kubernetes-preserve-unknown-fields: true}}
"
    );
    bare_definition(parent, children, &format!("{crd}{extra}"))
}

/// A definition of `parent` without a CRD (one installed by other means, or a decorator's
/// kind), with `extra` spec fields and `children` as in [`definition`]. Its children
/// start on line 10 when `extra` is empty.
pub fn bare_definition(parent: ParentKind<'_>, children: &str, extra: &str) -> String {
    let ParentKind { group, kind, plural } = parent;
    format!(
        "apiVersion: stencil.dev/v1alpha1
kind: OperatorDefinition
metadata:
  name: {plural}.{group}
spec:
  parent:
    apiVersion: {group}/v1
    kind: {kind}
{extra}  children:
{children}"
    )
}

/// A child entry named `name` with `template`, indented for [`definition`].
pub fn child(name: &str, template: &str) -> String {
    let body: String = template.lines().map(|l| format!("        {l}\n")).collect();
    format!("    - name: {name}\n      template: |\n{body}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixture_definition_compiles_with_its_children_and_extra_fields() {
        let parent = ParentKind {
            group: "example.com",
            kind: "Gadget",
            plural: "gadgets",
        };
        let text = definition(
            parent,
            &child(
                "cm",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ parent.metadata.name }}",
            ),
            "  resyncSeconds: 30\n",
        );
        let (defs, diagnostics) = crate::compile::compile_file("gadgets.yaml", &text);
        assert!(diagnostics.0.is_empty(), "{diagnostics:?}");
        assert_eq!(defs[0].name, "gadgets.example.com");
        assert_eq!(defs[0].spec.resync_seconds, Some(30));
        assert_eq!(defs[0].entry_index("cm"), Some(0));
        assert_eq!(defs[0].parent.kind, "Gadget");
    }
}
