//! The offline pipeline: what every command that renders without the controller shares
//! (`stencil render` and `stencil test` from files, `stencil render --from-cluster` and
//! `stencil diff` from a live snapshot). The parent is admitted as the API server would,
//! its lookups are answered from the objects given, it is rendered (with its finalize
//! step while it is being deleted), and each desired object that an existing one names
//! is settled as the controller would (a conflict, or an adoption). Pure.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::compile::CompiledDefinition;
use crate::gvk::Scopes;
use crate::labels;
use crate::render::{self, RenderFailure, RenderInput, RenderOutput};

/// Observed objects as the controller would see them around a parent.
#[derive(Debug, Default)]
pub struct Observed {
    /// The parent's children by child name: objects with a `stencil.dev/child` label and
    /// no other parent's `stencil.dev/parent-uid`.
    pub children: BTreeMap<String, Vec<Value>>,
    /// Every other object: made by hand, by another controller, or another parent's. A
    /// desired object that one of them names is a conflict or an adoption.
    pub existing: Vec<Value>,
}

/// Splits observed objects into the parent's children and objects that are not its own.
pub fn split_observed(objects: Vec<Value>, parent: &Value) -> Observed {
    let uid = parent.pointer("/metadata/uid").and_then(Value::as_str);
    let mut observed = Observed::default();
    for obj in objects {
        let label = |key: &str| {
            obj.pointer("/metadata/labels")
                .and_then(|l| l.get(key))
                .and_then(Value::as_str)
        };
        let theirs = label(labels::PARENT_UID).is_some_and(|p| Some(p) != uid);
        match label(labels::CHILD) {
            Some(child) if !theirs => {
                let child = child.to_string();
                observed.children.entry(child).or_default().push(obj);
            }
            _ => observed.existing.push(obj),
        }
    }
    observed
}

/// How the parent enters the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// A parent from a file: it gets its CRD's structural defaults and is checked against
    /// the schema, as the API server would before storing it.
    Admit,
    /// A parent read from the cluster: the API server admitted it already.
    AsStored,
}

/// Renders `parent` of `def` offline: admitted per `admission`, its lookups answered
/// from `lookup_objects`, its finalize step shown while it carries a deletionTimestamp,
/// and the desired objects that `observed.existing` names settled.
///
/// # Errors
///
/// The parent violates its schema (with [`Admission::Admit`]), a template, rule or
/// lookup fails, or the status computed does not fit the status the schema declares:
/// the failure lists every error with its place.
pub fn render_offline(
    def: &CompiledDefinition,
    scopes: &Scopes,
    parent: &Value,
    observed: &Observed,
    lookup_objects: &[Value],
    admission: Admission,
) -> Result<RenderOutput, RenderFailure> {
    let mut admitted = parent.clone();
    if admission == Admission::Admit
        && let Some((version, schema)) = crate::structural::schema_of(def, parent)
    {
        crate::structural::apply_defaults(schema, &mut admitted);
        let problems = crate::structural::violations(schema, &admitted);
        if !problems.is_empty() {
            let version = version.to_string();
            return Err(RenderFailure(vec![render::RenderError::Schema { version, problems }]));
        }
    }
    let parent = &admitted;
    let requests = render::lookup_requests(def, parent, scopes)?;
    let lookups = render::match_lookups(&requests, lookup_objects);
    let input = RenderInput {
        parent,
        observed: &observed.children,
        lookups: &lookups,
        scopes,
        served: &[],
    };
    let mut out = render::render(def, input)?;
    if let Some((version, schema)) = crate::structural::schema_of(def, parent) {
        let problems = crate::structural::status_violations(schema, &out.status);
        if !problems.is_empty() {
            let version = version.to_string();
            return Err(RenderFailure(vec![render::RenderError::Status { version, problems }]));
        }
    }
    if def.spec.finalize.has_step() && parent.pointer("/metadata/deletionTimestamp").is_some() {
        out.finalize = Some(render::render_finalize(def, input)?);
    }
    let uid = parent
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    crate::ownership::settle(&mut out, &observed.existing, uid, &def.name, def.spec.is_decorator());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_without_the_child_label_or_of_another_parent_are_not_children() {
        let parent = json!({"metadata": {"name": "p", "uid": "mine"}});
        let child =
            json!({"kind": "Secret", "metadata": {"name": "s", "labels": {"stencil.dev/child": "credentials"}}});
        let theirs = json!({"kind": "Secret", "metadata": {"name": "t",
            "labels": {"stencil.dev/child": "credentials", "stencil.dev/parent-uid": "other"}}});
        let hand_made = json!({"kind": "Secret", "metadata": {"name": "h"}});
        let observed = split_observed(vec![child, theirs, hand_made], &parent);
        assert_eq!(observed.children["credentials"].len(), 1);
        assert_eq!(observed.existing.len(), 2);
    }

    /// A Gadget definition with a compact status (`size: integer`), whose rule writes
    /// `size` from `source` and whose status template writes `extra`.
    fn gadget(source: &str, extra: &str) -> CompiledDefinition {
        let text = format!(
            r#"apiVersion: stencil.dev/v1alpha1
kind: OperatorDefinition
metadata: {{name: gadgets.example.com}}
spec:
  parent: {{apiVersion: example.com/v1, kind: Gadget}}
  crd:
    names: {{plural: gadgets}}
    versions:
      - name: v1
        schema:
          spec: {{size: string, count: integer}}
          status: {{size: integer}}
  status:
    fields:
      size: $.parent.spec.{source}
    template: |
      {extra}
  children:
    - name: cm
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {{name: x}}
"#
        );
        let (mut defs, diags) = crate::compile::compile_file("g.yaml", &text);
        assert!(diags.0.is_empty(), "{diags}");
        defs.remove(0)
    }

    #[test]
    fn a_status_that_does_not_fit_its_declared_type_fails_the_offline_render() {
        let parent = json!({"apiVersion": "example.com/v1", "kind": "Gadget",
            "metadata": {"name": "g", "namespace": "ns", "uid": "u"}, "spec": {"size": "big", "count": 2}});
        let run = |def: &CompiledDefinition| {
            render_offline(
                def,
                &Scopes::default(),
                &parent,
                &Observed::default(),
                &[],
                Admission::Admit,
            )
        };
        assert!(run(&gadget("count", "{}")).is_ok());
        let wrong_type = run(&gadget("size", "{}")).unwrap_err().to_string();
        assert!(
            wrong_type.contains(".status.size: must be integer, got string"),
            "{wrong_type}"
        );
        let undeclared = run(&gadget("count", "phase: Ready")).unwrap_err().to_string();
        assert!(undeclared.contains(".status.phase: not declared"), "{undeclared}");
    }

    fn website() -> CompiledDefinition {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../operators/website.yaml");
        let (mut defs, diags) = crate::compile::compile_file(path, &std::fs::read_to_string(path).unwrap());
        assert!(diags.0.is_empty(), "{diags}");
        defs.remove(0)
    }

    #[test]
    fn an_offline_parent_gets_its_schema_defaults_as_the_api_server_gives_them() {
        let text = r#"apiVersion: stencil.dev/v1alpha1
kind: OperatorDefinition
metadata: {name: widgets.example.com}
spec:
  parent: {apiVersion: example.com/v1, kind: Widget}
  crd:
    names: {plural: widgets}
    versions:
      - name: v1
        served: true
        storage: true
        schema:
          openAPIV3Schema:
            type: object
            properties:
              spec:
                type: object
                default: {}
                properties:
                  size: {type: integer, default: 3}
  children:
    - name: cm
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: {{ parent.metadata.name }}
        data:
          size: {{ parent.spec.size | quote }}
"#;
        let (defs, diags) = crate::compile::compile_file("w.yaml", text);
        assert!(diags.0.is_empty(), "{diags}");
        // No spec at all: the API server would store spec.size = 3, and so does the render.
        let parent =
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "n"}});
        let out = render_offline(
            &defs[0],
            &crate::compile::scopes(&defs),
            &parent,
            &Observed::default(),
            &[],
            Admission::Admit,
        )
        .unwrap();
        assert_eq!(out.children[0].object["data"]["size"], "3");
    }

    #[test]
    fn a_stored_parent_is_rendered_as_it_stands() {
        let def = website();
        let parent = json!({"apiVersion": "examples.stencil.dev/v1", "kind": "Website",
            "metadata": {"name": "docs", "namespace": "web"}, "spec": {"replicas": 99}});
        let out = render_offline(
            &def,
            &Scopes::default(),
            &parent,
            &Observed::default(),
            &[],
            Admission::AsStored,
        );
        assert!(!out.is_err_and(|e| e.to_string().contains("schema of v1")));
    }

    #[test]
    fn an_offline_parent_that_breaks_its_schema_is_refused_with_the_path() {
        let def = website();
        let parent = json!({"apiVersion": "examples.stencil.dev/v1", "kind": "Website",
            "metadata": {"name": "docs", "namespace": "web"}, "spec": {"replicas": 99}});
        let err = render_offline(
            &def,
            &Scopes::default(),
            &parent,
            &Observed::default(),
            &[],
            Admission::Admit,
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("schema of v1"), "{text}");
        assert!(
            text.contains(".spec.replicas: 99 is more than the maximum 50"),
            "{text}"
        );
        assert!(text.contains(".spec.content: is required"), "{text}");
    }
}
