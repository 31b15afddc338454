//! The kinds a definition uses: the kinds a child template produces, read from its
//! literal top-level `apiVersion:` and `kind:` lines (Stencil must know them before
//! rendering anything: it watches them and derives RBAC from them), what they say of a
//! child's update policy, and the scopes of the parent kinds definitions install.

use super::CompileError;
use crate::definition::{Child, UpdatePolicy};
use crate::gvk::Gvk;

/// A template's top-level `apiVersion`/`kind` lines are missing or not literal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct KindError(String);

fn literal(value: &str) -> Option<String> {
    let v = value
        .split(" #")
        .next()
        .unwrap_or_default()
        .trim()
        .trim_matches(|c| c == '"' || c == '\'');
    (!v.is_empty() && !v.contains("{{") && !v.contains("{%")).then(|| v.to_string())
}

/// Every kind the template declares, in order of first appearance; with the line
/// (1-based, in the template) of the first offending line on error.
///
/// # Errors
///
/// An `apiVersion:` or `kind:` line that is templated, not valid, or a kind before any
/// apiVersion; or no such lines at all.
pub fn declared_kinds(template: &str) -> Result<Vec<Gvk>, (KindError, u64)> {
    let mut kinds: Vec<Gvk> = Vec::new();
    let mut api_version: Option<String> = None;
    for (n, line) in template.lines().enumerate() {
        let line_no = n as u64 + 1;
        let not_literal = |field: &str| {
            (
                KindError(format!(
                    "{field} must be literal text so Stencil can watch the kind and derive RBAC; template the rest of the object instead"
                )),
                line_no,
            )
        };
        if let Some(rest) = line.strip_prefix("apiVersion:") {
            api_version = Some(literal(rest).ok_or_else(|| not_literal("apiVersion"))?);
        } else if let Some(rest) = line.strip_prefix("kind:") {
            let kind = literal(rest).ok_or_else(|| not_literal("kind"))?;
            let Some(av) = &api_version else {
                return Err((
                    KindError("`kind:` comes before any top-level `apiVersion:`".into()),
                    line_no,
                ));
            };
            let gvk = Gvk::parse(av, &kind).map_err(|e| (KindError(e.to_string()), line_no))?;
            if !kinds.contains(&gvk) {
                kinds.push(gvk);
            }
        }
    }
    if kinds.is_empty() {
        return Err((
            KindError(
                "the template has no top-level `apiVersion:` and `kind:` lines; write them at the start of a line"
                    .into(),
            ),
            1,
        ));
    }
    Ok(kinds)
}

/// The object a template renders on every pass, as its `apiVersion`, `kind` and metadata
/// `name` and `namespace` lines as written (templated or not): `None` when the template
/// may render something else (a control block, several documents, no name line). Two
/// entries with the same identity render one object twice.
pub fn fixed_identity(template: &str) -> Option<String> {
    if template.contains("{%") || template.lines().any(|l| l.trim_end() == "---") {
        return None;
    }
    let (mut api_version, mut kind, mut name, mut namespace) = (None, None, None, "");
    let mut in_metadata = false;
    for line in template.lines() {
        if !line.starts_with(' ') {
            in_metadata = line.trim_end() == "metadata:";
        }
        if let Some(v) = line.strip_prefix("apiVersion:") {
            api_version = Some(v.trim());
        } else if let Some(v) = line.strip_prefix("kind:") {
            kind = Some(v.trim());
        } else if in_metadata && let Some(v) = line.strip_prefix("  name:") {
            name = Some(v.trim());
        } else if in_metadata && let Some(v) = line.strip_prefix("  namespace:") {
            namespace = v.trim();
        }
    }
    Some(format!("{}\n{}\n{}\n{namespace}", api_version?, kind?, name?))
}

/// Scopes that know the parent kinds these definitions install with `spec.crd`, for
/// commands that run without discovery.
pub fn scopes(defs: &[super::CompiledDefinition]) -> crate::gvk::Scopes {
    let mut scopes = crate::gvk::Scopes::default();
    for def in defs {
        if let Some(crd) = &def.spec.crd {
            let namespaced = crd.scope == crate::definition::CrdScope::Namespaced;
            scopes.insert(&def.parent.group, &def.parent.kind, namespaced);
        }
    }
    scopes
}

/// A kind `kinds` renders at another apiVersion than an earlier child (`earlier`) does:
/// both name the same objects, so Stencil would watch and count each of them twice and
/// compare one version's fields with the other's.
pub(crate) fn second_version(earlier: &[Vec<Gvk>], kinds: &[Gvk]) -> Option<CompileError> {
    let all: Vec<&Gvk> = earlier.iter().flatten().chain(kinds).collect();
    kinds.iter().find_map(|k| {
        let other = all
            .iter()
            .find(|o| o.group == k.group && o.kind == k.kind && o.version != k.version)?;
        Some(CompileError::Invalid(format!(
            "renders {} at {} and at {}: write one apiVersion for a kind across the definition's children",
            k.kind,
            k.api_version(),
            other.api_version()
        )))
    })
}

/// `updatePolicy: Recreate` on a kind that holds data ([`crate::immutable::DATA_KINDS`])
/// needs `acknowledgeDataLoss: true`; the acknowledgement means nothing without it.
pub(crate) fn recreate_problem(child: &Child, kinds: &[Gvk]) -> Option<CompileError> {
    let data: Vec<&str> = kinds
        .iter()
        .filter(|k| crate::immutable::holds_data(k))
        .map(|k| k.kind.as_str())
        .collect();
    match (child.update_policy, child.acknowledge_data_loss) {
        (UpdatePolicy::Recreate, false) if !data.is_empty() => Some(CompileError::Invalid(format!(
            "updatePolicy: Recreate deletes the {} whenever its rendering changes, and the data it holds with it; \
             use InPlace (a change the API server refuses as immutable is then reported on the parent and nothing \
             is deleted), or add `acknowledgeDataLoss: true` to this child to accept the loss",
            data.join(" and ")
        ))),
        (policy, true) if policy != UpdatePolicy::Recreate => Some(CompileError::Invalid(
            "acknowledgeDataLoss applies only to updatePolicy: Recreate; remove it".into(),
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_literal_kinds_and_skips_nested_ones() {
        let t = "{%- set x = 1 %}\napiVersion: apps/v1\nkind: StatefulSet\nspec:\n  template:\n    kind: Nested\n---\napiVersion: v1\nkind: 'Service'\n";
        let kinds = declared_kinds(t).unwrap();
        let names: Vec<String> = kinds.iter().map(ToString::to_string).collect();
        assert_eq!(names, vec!["apps/v1/StatefulSet", "v1/Service"]);
    }

    #[test]
    fn a_fixed_identity_is_the_kind_name_and_namespace_as_written() {
        let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ parent.metadata.name }}\n  labels:\n    name: x\ndata:\n  name: y\n";
        assert_eq!(
            fixed_identity(cm).as_deref(),
            Some("v1\nConfigMap\n{{ parent.metadata.name }}\n")
        );
        assert_eq!(
            fixed_identity(&format!("{{% if parent.spec.on %}}\n{cm}{{% endif %}}")),
            None
        );
        assert_eq!(fixed_identity(&format!("{cm}---\n{cm}")), None);
        assert_eq!(
            fixed_identity("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"),
            None
        );
    }

    #[test]
    fn a_templated_kind_is_an_error_with_its_line() {
        let (err, line) = declared_kinds("apiVersion: v1\nkind: {{ parent.spec.kind }}\n").unwrap_err();
        assert!(err.to_string().contains("kind must be literal"), "{err}");
        assert_eq!(line, 2);
        assert!(declared_kinds("metadata: {}\n").is_err());
    }

    #[test]
    fn one_kind_at_two_api_versions_is_an_error_naming_both() {
        let hpa = |v: &str| Gvk::parse(&format!("autoscaling/{v}"), "HorizontalPodAutoscaler").unwrap();
        let earlier = vec![vec![hpa("v2")]];
        let problem = second_version(&earlier, &[hpa("v1")]).unwrap().to_string();
        assert!(
            problem.contains("autoscaling/v1") && problem.contains("autoscaling/v2"),
            "{problem}"
        );
        assert!(
            second_version(&earlier, &[hpa("v2")]).is_none(),
            "the same version twice is fine"
        );
        let cm = Gvk::parse("v1", "ConfigMap").unwrap();
        assert!(second_version(&earlier, &[cm]).is_none());
    }
}
