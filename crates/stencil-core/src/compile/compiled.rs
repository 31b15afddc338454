//! A compiled definition: its spec with templates and JSONPath rules compiled once, and
//! what the renderer, the controller and RBAC ask of it.

use std::collections::BTreeMap;
use std::sync::Arc;

use minijinja::Environment;

use super::cel_object::ObjectChild;
use super::rules::Rule;
use super::{FieldPosition, names};
use crate::definition::{Child, OperatorDefinitionSpec};
use crate::gvk::Gvk;
use crate::selector::Matcher;

/// The key of `spec.crd`'s position among the origins (no template has this name).
pub(super) const CRD_ORIGIN: &str = "spec.crd";

/// A definition ready to render: its spec plus compiled templates and rules.
#[derive(Debug, Clone)]
pub struct CompiledDefinition {
    /// `metadata.name` of the definition.
    pub name: String,
    /// The file it came from, or `OperatorDefinition/<name>` for a cluster resource.
    pub source: String,
    /// The definition as written.
    pub spec: OperatorDefinitionSpec,
    /// The parent kind.
    pub parent: Gvk,
    /// Child indices in dependency order (declaration order among independent ones).
    pub(super) order: Vec<usize>,
    /// The same for `finalize.children`, numbered after `children`.
    pub(super) finalize_order: Vec<usize>,
    pub(super) until: Option<Rule>,
    pub(super) env: Environment<'static>,
    pub(super) origins: BTreeMap<String, FieldPosition>,
    /// Each child written as an object, compiled, by child index.
    pub(super) objects: Vec<Option<Arc<ObjectChild>>>,
    pub(super) ready_rules: Vec<Option<Rule>>,
    pub(super) include_rules: Vec<Option<Rule>>,
    pub(super) field_rules: Vec<(String, Rule)>,
    pub(super) condition_rules: Vec<Rule>,
    /// The kinds each child's template produces, by child index (`children`, then
    /// `finalize.children`).
    pub child_kinds: Vec<Vec<Gvk>>,
    pub(super) reads: Vec<Vec<String>>,
    /// A decorator's label and annotation selectors, parsed.
    pub(super) decorate: Option<(Option<Matcher>, Option<Matcher>)>,
    /// `stencil.dev/allow-breaking-changes: "true"`: a CRD change that may lose data is
    /// applied anyway.
    pub allow_breaking_changes: bool,
    /// `stencil.dev/paused: "true"` on the definition: no parent of it gets a write but
    /// its `Paused` condition.
    pub paused: bool,
}

impl CompiledDefinition {
    /// Child indices in dependency order: a child comes after every child it depends on.
    pub fn order(&self) -> &[usize] {
        &self.order
    }

    /// `finalize.children` indices in dependency order, numbered after `children`.
    pub fn finalize_order(&self) -> &[usize] {
        &self.finalize_order
    }

    /// The child entry at `index`: `children` first, then `finalize.children`.
    pub fn entry(&self, index: usize) -> &Child {
        let n = self.spec.children.len();
        self.spec
            .children
            .get(index)
            .unwrap_or_else(|| &self.spec.finalize.children[index - n])
    }

    /// Every child entry, `children` then `finalize.children`, with its index.
    pub fn entries(&self) -> impl Iterator<Item = (usize, &Child)> {
        self.spec
            .children
            .iter()
            .chain(&self.spec.finalize.children)
            .enumerate()
    }

    /// Whether the entry at `index` is a finalize child.
    pub fn is_finalize(&self, index: usize) -> bool {
        index >= self.spec.children.len()
    }

    /// The index of the child entry named `name`, in either list.
    pub fn entry_index(&self, name: &str) -> Option<usize> {
        self.entries().find(|(_, c)| c.name == name).map(|(i, _)| i)
    }

    /// The template name of the child entry at `index` (named as the `names` module names them).
    pub fn template_name(&self, index: usize) -> String {
        let name = &self.entry(index).name;
        if self.is_finalize(index) {
            names::finalize_child(name)
        } else {
            names::child(name)
        }
    }

    /// The other children the template of the entry at `index` reads (`children.<name>`).
    pub fn reads(&self, index: usize) -> &[String] {
        self.reads.get(index).map_or(&[], Vec::as_slice)
    }

    /// The compiled `finalize.until` rule, if there is one.
    pub fn until(&self) -> Option<&Rule> {
        self.until.as_ref()
    }

    /// A compiled template by its name in the definition's environment (named as the `names` module names them).
    ///
    /// # Errors
    ///
    /// No template of that name was compiled.
    pub fn template(&self, name: &str) -> Result<minijinja::Template<'_, '_>, minijinja::Error> {
        self.env.get_template(name)
    }

    /// Where `spec.crd` sits in its file, as `file:line` (the file alone for a resource).
    pub fn crd_location(&self) -> String {
        match self.origins.get(CRD_ORIGIN) {
            Some(o) if o.line > 0 => format!("{}:{}", o.file, o.line),
            _ => self.source.clone(),
        }
    }

    /// Where a template starts in its file, for error positions.
    pub fn origin(&self, template: &str) -> Option<&FieldPosition> {
        self.origins.get(template)
    }

    /// The object of the child at `index`, compiled, when it is written as an object.
    pub fn object(&self, index: usize) -> Option<&ObjectChild> {
        self.objects.get(index).and_then(Option::as_deref)
    }

    /// The `includeWhen` rule of the child at `index`, if it has one.
    pub fn include_rule(&self, index: usize) -> Option<&Rule> {
        self.include_rules.get(index).and_then(Option::as_ref)
    }

    /// The `readyWhen` rule of the child at `index`, if it has one.
    pub fn ready_rule(&self, index: usize) -> Option<&Rule> {
        self.ready_rules.get(index).and_then(Option::as_ref)
    }

    /// The `status.fields` rules: field name and rule.
    pub fn field_rules(&self) -> &[(String, Rule)] {
        &self.field_rules
    }

    /// The types of the conditions declared with `latch: true`.
    pub fn latched_conditions(&self) -> Vec<&str> {
        let conditions = &self.spec.status.conditions;
        conditions
            .iter()
            .filter(|c| c.latch)
            .map(|c| c.type_.as_str())
            .collect()
    }

    /// The `status.conditions` entries with their compiled `when` rules.
    pub fn condition_rules(&self) -> impl Iterator<Item = (&crate::definition::ConditionRule, &Rule)> {
        self.spec.status.conditions.iter().zip(&self.condition_rules)
    }

    /// Every kind the children produce, without repeats.
    pub fn all_child_kinds(&self) -> Vec<Gvk> {
        let mut all: Vec<Gvk> = Vec::new();
        for gvk in self.child_kinds.iter().flatten() {
            if !all.contains(gvk) {
                all.push(gvk.clone());
            }
        }
        all
    }

    /// A decorator's label selector as the API server takes it, when it selects anything
    /// less than every object: the parent watch sends it with its list and watch.
    pub fn parent_label_query(&self) -> Option<&str> {
        let (labels, _) = self.decorate.as_ref()?;
        labels.as_ref().map(Matcher::query).filter(|q| !q.is_empty())
    }

    /// Whether a decorator decorates an object with these labels and annotations; a
    /// composite definition serves every object of its kind.
    pub fn decorates(
        &self,
        labels: Option<&BTreeMap<String, String>>,
        annotations: Option<&BTreeMap<String, String>>,
    ) -> bool {
        self.decorate.as_ref().is_none_or(|(l, a)| {
            l.as_ref().is_none_or(|m| m.matches(labels)) && a.as_ref().is_none_or(|m| m.matches(annotations))
        })
    }

    /// The CRD's storage version, the hub every conversion passes through.
    pub fn storage_version(&self) -> Option<&str> {
        let crd = self.spec.crd.as_ref()?;
        crd.versions.iter().find(|v| v.storage).map(|v| v.name.as_str())
    }

    /// Whether the CRD's versions differ, so the API server needs Stencil's conversion
    /// webhook to convert between them.
    pub fn converts(&self) -> bool {
        self.spec
            .crd
            .as_ref()
            .is_some_and(|c| c.versions.iter().any(|v| v.conversion.is_some()))
    }

    /// Every lookup's kind, without repeats.
    pub fn lookup_kinds(&self) -> Vec<Gvk> {
        let mut all: Vec<Gvk> = Vec::new();
        for l in &self.spec.lookups {
            if let Ok(gvk) = Gvk::parse(&l.api_version, &l.kind)
                && !all.contains(&gvk)
            {
                all.push(gvk);
            }
        }
        all
    }
}
