//! `stencil new`, purely: the files of a new definition (a definition with a typed CRD
//! skeleton, status rules and a commented child; an example parent; a golden case; the
//! editor schema), as paths and texts. The command writes them, refusing to overwrite
//! any, and fills in the golden case's expected output by rendering it.

use std::path::PathBuf;

use stencil::definition::CrdScope;

/// What `stencil new` was asked for.
#[derive(Debug, Clone)]
pub struct Request {
    /// The parent kind, CamelCase.
    pub kind: String,
    /// The API group; must contain a dot.
    pub group: String,
    /// The API version, e.g. `v1` or `v1alpha1`.
    pub version: String,
    /// Whether parents are namespaced.
    pub scope: CrdScope,
}

/// A request Stencil cannot scaffold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScaffoldError {
    /// The kind is not CamelCase.
    #[error("kind `{0}` must be CamelCase, e.g. `Database`")]
    Kind(String),
    /// The group is not a DNS subdomain with a dot.
    #[error("group `{0}` must be a DNS subdomain with a dot, e.g. `example.org`")]
    Group(String),
    /// The version is not a Kubernetes API version name.
    #[error("version `{0}` must look like v1, v1beta1 or v2alpha3")]
    Version(String),
}

/// One file to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    /// Relative to the target directory.
    pub path: PathBuf,
    /// Its text.
    pub text: String,
}

/// The plural of a kind, lower-cased: `Database` → `databases`, `Policy` → `policies`.
pub fn plural(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    let consonant_y =
        lower.ends_with('y') && !lower.ends_with("ay") && !lower.ends_with("ey") && !lower.ends_with("oy");
    if consonant_y {
        format!("{}ies", &lower[..lower.len() - 1])
    } else if ["s", "x", "z", "ch", "sh"].iter().any(|e| lower.ends_with(e)) {
        format!("{lower}es")
    } else {
        format!("{lower}s")
    }
}

fn is_version(v: &str) -> bool {
    let Some(rest) = v.strip_prefix('v') else {
        return false;
    };
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 || rest.starts_with('0') {
        return false;
    }
    let tail = &rest[digits..];
    tail.is_empty()
        || ["alpha", "beta"].iter().any(|stage| {
            tail.strip_prefix(stage)
                .is_some_and(|n| !n.is_empty() && !n.starts_with('0') && n.chars().all(|c| c.is_ascii_digit()))
        })
}

fn is_group(g: &str) -> bool {
    g.contains('.') && g.split('.').all(stencil::compile::is_dns_label)
}

/// The files of a new definition for `request`.
pub fn scaffold(request: &Request) -> Result<Vec<File>, ScaffoldError> {
    check(request)?;
    let plural = plural(&request.kind);
    Ok(vec![
        File {
            path: format!("{plural}.yaml").into(),
            text: definition(request, &plural),
        },
        File {
            path: "example.yaml".into(),
            text: example(request),
        },
        File {
            path: "tests/example.case.yaml".into(),
            text: case(request, &plural),
        },
        File {
            path: SCHEMA_FILE.into(),
            text: format!("{:#}\n", stencil::json_schema::definition_schema()),
        },
    ])
}

/// Refuses a kind, group or version the API server would not take.
fn check(request: &Request) -> Result<(), ScaffoldError> {
    if !stencil::compile::is_kind(&request.kind) {
        return Err(ScaffoldError::Kind(request.kind.clone()));
    }
    if !is_group(&request.group) {
        return Err(ScaffoldError::Group(request.group.clone()));
    }
    if !is_version(&request.version) {
        return Err(ScaffoldError::Version(request.version.clone()));
    }
    Ok(())
}

/// The scaffolded definition; `${name}` marks what a request fills in.
const DEFINITION: &str = include_str!("definition.yaml");

/// The definition's text. A cluster-scoped parent's namespaced children must say where
/// they go: its spec gets a `namespace` field.
fn definition(request: &Request, plural: &str) -> String {
    let namespaced = request.scope == CrdScope::Namespaced;
    let (scope_name, required, child_namespace, namespace_field) = if namespaced {
        ("Namespaced", "[message]", "", "")
    } else {
        (
            "Cluster",
            "[message, namespace]",
            "\n          namespace: {{ parent.spec.namespace }}",
            "\n                  namespace:\n                    type: string\n                    description: The namespace the children go to.\n                    maxLength: 63",
        )
    };
    let singular = request.kind.to_ascii_lowercase();
    let values = [
        ("kind", request.kind.as_str()),
        ("group", &request.group),
        ("version", &request.version),
        ("plural", plural),
        ("singular", &singular),
        ("scope_name", scope_name),
        ("required", required),
        ("child_namespace", child_namespace),
        ("namespace_field", namespace_field),
    ];
    values.iter().fold(DEFINITION.to_string(), |text, (name, value)| {
        text.replace(&format!("${{{name}}}"), value)
    })
}

/// The example parent's `metadata` and `spec`, in flow style.
fn example_fields(request: &Request) -> (&'static str, &'static str) {
    if request.scope == CrdScope::Namespaced {
        ("{name: example, namespace: default}", "{message: hello}")
    } else {
        ("{name: example}", "{message: hello, namespace: default}")
    }
}

/// The example parent.
fn example(request: &Request) -> String {
    let Request {
        kind, group, version, ..
    } = request;
    let (metadata, spec) = example_fields(request);
    format!(
        "# An example {kind}: `kubectl apply -f example.yaml` once Stencil serves the definition.\napiVersion: {group}/{version}\nkind: {kind}\nmetadata: {metadata}\nspec: {spec}\n"
    )
}

/// The golden case of the example parent, new, with nothing observed yet.
fn case(request: &Request, plural: &str) -> String {
    let Request {
        kind, group, version, ..
    } = request;
    let (metadata, spec) = example_fields(request);
    let metadata = metadata.replace('}', ", uid: 00000000-0000-4000-8000-000000000001, generation: 1}");
    format!(
        "# A new {kind} with nothing observed yet: the ConfigMap to create, and a status that\n# is not Ready. `stencil test tests/ --update` rewrites the expected file.\ndefinition: ../{plural}.yaml\nparent:\n  apiVersion: {group}/{version}\n  kind: {kind}\n  metadata: {metadata}\n  spec: {spec}\n"
    )
}

/// The editor schema's file, beside the definition.
pub const SCHEMA_FILE: &str = "operatordefinition.schema.json";

#[cfg(test)]
mod tests {
    use super::*;

    fn request(kind: &str, scope: CrdScope) -> Request {
        Request {
            kind: kind.into(),
            group: "example.org".into(),
            version: "v1".into(),
            scope,
        }
    }

    #[test]
    fn plurals_follow_english() {
        assert_eq!(plural("Database"), "databases");
        assert_eq!(plural("Policy"), "policies");
        assert_eq!(plural("Gateway"), "gateways");
        assert_eq!(plural("Ingress"), "ingresses");
        assert_eq!(plural("Box"), "boxes");
    }

    #[test]
    fn bad_names_are_refused() {
        let mut r = request("database", CrdScope::Namespaced);
        assert_eq!(scaffold(&r), Err(ScaffoldError::Kind("database".into())));
        r.kind = "Database".into();
        r.group = "example".into();
        assert!(matches!(scaffold(&r), Err(ScaffoldError::Group(_))));
        r.group = "example.org".into();
        for bad in ["1", "v0", "v1gamma1", "v1beta", "v01"] {
            r.version = bad.into();
            assert!(matches!(scaffold(&r), Err(ScaffoldError::Version(_))), "{bad}");
        }
        for good in ["v1", "v2alpha3", "v1beta1", "v10"] {
            r.version = good.into();
            assert!(scaffold(&r).is_ok(), "{good}");
        }
    }

    #[test]
    fn both_scopes_compile_and_render_the_example() {
        for scope in [CrdScope::Namespaced, CrdScope::Cluster] {
            let files = scaffold(&request("Database", scope)).unwrap();
            let (defs, diags) = stencil::compile::compile_file("databases.yaml", &files[0].text);
            assert!(diags.0.is_empty(), "{scope:?}: {diags}");
            let parent: serde_json::Value = stencil::yaml::document(&files[1].text).unwrap();
            let scopes = stencil::compile::scopes(&defs);
            let out = stencil::render::render(
                &defs[0],
                stencil::render::RenderInput {
                    parent: &parent,
                    observed: &Default::default(),
                    lookups: &Default::default(),
                    scopes: &scopes,
                    served: &[],
                },
            )
            .unwrap();
            assert_eq!(out.children.len(), 1, "{scope:?}");
            assert_eq!(out.children[0].object["metadata"]["namespace"], "default", "{scope:?}");
            assert!(stencil::crd::parent_crd(&defs[0], None).unwrap().is_some());
        }
    }
}
