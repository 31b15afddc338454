//! The stages of compiling one definition ([`Compilation`]): its child, lookup, status
//! and conversion templates, its JSONPath rules, and the problems of each, gathered
//! with their positions; plus what is read off the spec whole (sibling reads, a
//! decorator's matchers).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::cel_object::{self, ObjectChild};
use super::compiled::CRD_ORIGIN;
use super::document::Locator;
use super::field::Field;
use super::rules::Rule;
use super::{
    CompileError, Diagnostic, FieldPosition, kinds, names, reads, template_message, template_position, templates,
};
use crate::definition::{Child, OperatorDefinition, OperatorDefinitionSpec};
use crate::gvk::Gvk;
use crate::selector::Matcher;

/// One definition being compiled: its templates and rules so far, where each came
/// from, and every problem found.
pub(super) struct Compilation<'a> {
    pub(super) spec: &'a OperatorDefinitionSpec,
    pub(super) locator: &'a Locator,
    pub(super) name: String,
    pub(super) errors: Vec<Diagnostic>,
    pub(super) env: minijinja::Environment<'static>,
    pub(super) origins: BTreeMap<String, FieldPosition>,
    /// Each child written as an object, compiled, by child index.
    pub(super) objects: Vec<Option<Arc<ObjectChild>>>,
}

/// A definition's compiled JSONPath rules.
pub(super) struct Rules {
    pub(super) ready: Vec<Option<Rule>>,
    pub(super) include: Vec<Option<Rule>>,
    pub(super) fields: Vec<(String, Rule)>,
    pub(super) conditions: Vec<Rule>,
    pub(super) until: Option<Rule>,
}

impl<'a> Compilation<'a> {
    /// Compiles `spec` (the definition `resource`'s, its schemas expanded).
    pub(super) fn new(resource: &OperatorDefinition, spec: &'a OperatorDefinitionSpec, locator: &'a Locator) -> Self {
        let mut origins = BTreeMap::new();
        origins.insert(CRD_ORIGIN.to_string(), locator.origin(&Field::Crd));
        Compilation {
            spec,
            locator,
            name: resource.metadata.name.clone().unwrap_or_default(),
            errors: Vec::new(),
            env: templates::environment(),
            origins,
            objects: Vec::new(),
        }
    }

    /// Records a problem of `field`, at `inner` (line, column) within its value when known.
    pub(super) fn report(&mut self, field: Field, error: CompileError, inner: Option<(u64, u64)>) {
        let origin = self.locator.origin(&field);
        let (line, column) = origin.position(inner);
        self.errors.push(Diagnostic {
            file: origin.file.clone(),
            line,
            column,
            definition: (!self.name.is_empty()).then(|| self.name.clone()),
            field: field.path(self.spec),
            error,
        });
    }

    /// Compiles the template `source` of `field` under the name `name`.
    fn template(&mut self, name: String, source: &str, field: Field) {
        if self.spec.helpers.is_none() && reads::imports_helpers(source) {
            let message = "imports \"helpers\", but the definition has no `spec.helpers`".to_string();
            self.report(field.clone(), CompileError::Invalid(message), None);
        }
        let origin = self.locator.origin(&field);
        // minijinja's code generator panics on a few templates its parser accepts (an
        // `import ... as` whose target is an expression, not a name): those are errors
        // too, and the environment is left as it was.
        quiet_code_generator_panics();
        let added = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.env.add_template_owned(name.clone(), source.to_string())
        }));
        match added {
            Ok(Ok(())) => {
                self.origins.insert(name, origin);
            }
            Ok(Err(e)) => {
                let inner = template_position(&e, source);
                self.report(field, CompileError::Template(template_message(&e)), inner);
            }
            Err(_) => {
                let message = "the template engine cannot compile this template: check that each \
                               `import ... as NAME`, `set NAME` and `for NAME in` names plain variables"
                    .to_string();
                self.report(field, CompileError::Template(message), None);
            }
        }
    }

    /// Compiles the JSONPath rule `source` of `field`, named after the field.
    fn rule(&mut self, source: &str, field: Field) -> Option<Rule> {
        match Rule::compile(source) {
            Ok(r) => {
                let name = field.path(self.spec).unwrap_or_default();
                self.origins.insert(name.clone(), self.locator.origin(&field));
                Some(r.named(name))
            }
            Err(e) => {
                let inner = Some((e.line, e.column));
                self.report(field, CompileError::Rule(e), inner);
                None
            }
        }
    }

    /// Compiles every child's template (the finalize step's after the others) and reads
    /// the kinds each declares: two children that render one object, a Recreate the kind
    /// cannot have, or a second version of a kind are reported.
    pub(super) fn children(&mut self) -> Vec<Vec<Gvk>> {
        let spec = self.spec;
        let mut child_kinds = Vec::new();
        let mut identities: BTreeMap<String, &str> = BTreeMap::new();
        let n = spec.children.len();
        for (i, child) in spec.children.iter().chain(&spec.finalize.children).enumerate() {
            let name = if i < n {
                names::child(&child.name)
            } else {
                names::finalize_child(&child.name)
            };
            let identity = match &child.object {
                Some(object) => {
                    self.object(i, &name, child, object);
                    cel_object::fixed_identity(object)
                }
                None => {
                    self.template(name, &child.template, Field::ChildTemplate(i));
                    self.objects.push(None);
                    kinds::fixed_identity(&child.template)
                }
            };
            if let Some(identity) = identity {
                match identities.get(identity.as_str()) {
                    // A second entry of the same name is reported as such.
                    Some(first) if *first == child.name => {}
                    Some(first) => self.report(
                        Field::ChildTemplate(i),
                        CompileError::Invalid(format!(
                            "renders the same object as child `{first}` (the same kind, name and namespace): one object comes from one child, or the two overwrite each other on every pass"
                        )),
                        None,
                    ),
                    None => {
                        identities.insert(identity, &child.name);
                    }
                }
            }
            child_kinds.push(self.declared_kinds(i, child, &child_kinds));
        }
        child_kinds
    }

    /// The kinds child `i` declares, checked against its update policy and the kinds of
    /// the children before it (`earlier`).
    fn declared_kinds(&mut self, i: usize, child: &Child, earlier: &[Vec<Gvk>]) -> Vec<Gvk> {
        if let Some(object) = &child.object {
            return match cel_object::declared_kind(object) {
                Ok(gvk) => self.checked_kinds(i, child, earlier, vec![gvk]),
                Err(message) => {
                    let field = Field::ChildObject(i, String::new());
                    self.report(field, CompileError::Invalid(message), None);
                    Vec::new()
                }
            };
        }
        match kinds::declared_kinds(&child.template) {
            Ok(k) => self.checked_kinds(i, child, earlier, k),
            Err((e, line)) => {
                self.report(
                    Field::ChildTemplate(i),
                    CompileError::Template(e.to_string()),
                    Some((line, 1)),
                );
                Vec::new()
            }
        }
    }

    /// `kinds`, child `i`'s, after checking them against its update policy and the
    /// children before it.
    fn checked_kinds(&mut self, i: usize, child: &Child, earlier: &[Vec<Gvk>], kinds: Vec<Gvk>) -> Vec<Gvk> {
        if let Some(problem) = kinds::recreate_problem(child, &kinds) {
            self.report(Field::ChildUpdatePolicy(i), problem, None);
        }
        if let Some(problem) = kinds::second_version(earlier, &kinds) {
            self.report(Field::ChildTemplate(i), problem, None);
        }
        kinds
    }

    /// Compiles each lookup's name, selector and namespace templates.
    pub(super) fn lookups(&mut self) {
        for (i, lookup) in self.spec.lookups.iter().enumerate() {
            if let Some(name_template) = &lookup.name_template {
                self.template(
                    names::lookup_name(&lookup.name),
                    name_template,
                    Field::LookupNameTemplate(i),
                );
            }
            for (path, value) in lookup.selector.iter().flat_map(crate::selector::values) {
                if crate::selector::is_template(value) {
                    self.template(
                        names::lookup_selector(&lookup.name, &path),
                        value,
                        Field::LookupSelector(i),
                    );
                }
            }
            if let Some(ns) = &lookup.namespace_template
                && ns.trim() != "*"
            {
                self.template(
                    names::lookup_namespace(&lookup.name),
                    ns,
                    Field::LookupNamespaceTemplate(i),
                );
            }
        }
    }

    /// Compiles the helpers, the status template and each version's conversion templates.
    pub(super) fn shared_status_and_conversions(&mut self) {
        let spec = self.spec;
        if let Some(helpers) = &spec.helpers {
            self.template(names::HELPERS.to_string(), helpers, Field::Helpers);
        }
        if let Some(status) = &spec.status.template {
            self.template(names::STATUS.to_string(), status, Field::StatusTemplate);
        }
        for (i, version) in spec.crd.iter().flat_map(|c| c.versions.iter()).enumerate() {
            if let Some(conversion) = &version.conversion {
                self.template(
                    names::to_storage(&version.name),
                    &conversion.to_storage,
                    Field::Conversion(i, true),
                );
                let from = names::from_storage(&version.name);
                self.template(from, &conversion.from_storage, Field::Conversion(i, false));
            }
        }
    }

    /// Reports a CEL readiness rule of child `i` that reads beyond the object it judges:
    /// the parent, another child or a lookup is not in its scope, and would read as absent.
    fn check_ready_scope(&mut self, i: usize, child: &Child, rule: &Rule) {
        let spec = self.spec;
        let siblings = spec
            .children
            .iter()
            .chain(&spec.finalize.children)
            .map(|c| c.name.as_str());
        let lookups = spec.lookups.iter().map(|l| l.name.as_str());
        let beyond: Vec<&str> = ["schema", "parent", "children", "lookups", "definition"]
            .into_iter()
            .chain(siblings.filter(|n| *n != child.name))
            .chain(lookups)
            .filter(|n| rule.cel_variables().contains(n))
            .collect();
        if !beyond.is_empty() {
            let message = format!(
                "a readyWhen sees only the object it judges (as `self`, `{}` or its fields such as `status`); `{}` is not in its scope: compare with the object's own fields, or write the rule as a status condition",
                child.name,
                beyond.join("`, `")
            );
            self.report(Field::ChildReadyWhen(i), CompileError::Invalid(message), None);
        }
    }

    /// Reports an `includeWhen` of child `i` that reads a sibling not in its `dependsOn`:
    /// judged before that sibling exists, it would leave the child out and prune it.
    fn check_include_reads(&mut self, i: usize, child: &Child, rule: &Rule) {
        let spec = self.spec;
        let unlisted: Vec<&str> = spec
            .children
            .iter()
            .chain(&spec.finalize.children)
            .map(|c| c.name.as_str())
            .filter(|n| *n != child.name && !child.depends_on.iter().any(|d| d == n))
            .filter(|n| rule.cel_variables().contains(n) || rule.source().contains(&format!("children.{n}")))
            .collect();
        if !unlisted.is_empty() {
            let message = format!(
                "includeWhen reads `{}` without `dependsOn: [{}]`: the rule would judge a child that may not exist yet, and leave this one out",
                unlisted.join("`, `"),
                unlisted.join(", ")
            );
            self.report(Field::ChildIncludeWhen(i), CompileError::Invalid(message), None);
        }
    }

    /// Compiles the readiness, status and finalize rules.
    pub(super) fn rules(&mut self) -> Rules {
        let spec = self.spec;
        let (ready, include) = spec
            .children
            .iter()
            .chain(&spec.finalize.children)
            .enumerate()
            .map(|(i, c)| {
                let ready = c
                    .ready_when
                    .as_deref()
                    .and_then(|r| self.rule(r, Field::ChildReadyWhen(i)));
                let ready = ready.map(|rule| {
                    self.check_ready_scope(i, c, &rule);
                    rule.about(&c.name)
                });
                let include = c
                    .include_when
                    .as_deref()
                    .and_then(|r| self.rule(r, Field::ChildIncludeWhen(i)));
                if let Some(rule) = &include {
                    self.check_include_reads(i, c, rule);
                }
                (ready, include)
            })
            .unzip();
        let fields = spec
            .status
            .fields
            .iter()
            .filter_map(|(k, r)| self.rule(r, Field::StatusValue(k.clone())).map(|r| (k.clone(), r)))
            .collect();
        let conditions = spec
            .status
            .conditions
            .iter()
            .enumerate()
            .filter_map(|(i, c)| self.rule(&c.when, Field::Condition(i)))
            .collect();
        let until = spec
            .finalize
            .until
            .as_deref()
            .and_then(|r| self.rule(r, Field::FinalizeUntil));
        Rules {
            ready,
            include,
            fields,
            conditions,
            until,
        }
    }
}

/// The siblings each child's template or object reads, by child (the finalize step's
/// after the others); `objects` are the children's compiled objects, in the same order.
pub(super) fn sibling_reads(spec: &OperatorDefinitionSpec, objects: &[Option<Arc<ObjectChild>>]) -> Vec<Vec<String>> {
    let all = || spec.children.iter().chain(&spec.finalize.children);
    let names: Vec<&str> = all().map(|c| c.name.as_str()).collect();
    let helpers = spec.helpers.as_deref().unwrap_or_default();
    all()
        .zip(objects)
        .map(|(c, object)| {
            if c.object.is_some() {
                object
                    .as_ref()
                    .map(|o| super::object_stage::object_reads(o, &c.name, &names))
                    .unwrap_or_default()
            } else if reads::imports_helpers(&c.template) {
                reads::sibling_reads(&format!("{}\n{helpers}", c.template), &c.name, &names)
            } else {
                reads::sibling_reads(&c.template, &c.name, &names)
            }
        })
        .collect()
}

/// A decorator's label and annotation matchers. The selectors were checked by
/// `validate::check`: a bad one has been reported, and matches nothing here.
pub(super) fn decorate_matchers(spec: &OperatorDefinitionSpec) -> Option<(Option<Matcher>, Option<Matcher>)> {
    spec.decorate.as_ref().map(|d| {
        let parse = |s: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>| {
            s.as_ref().and_then(|s| Matcher::new(s).ok())
        };
        let mut labels = d.selector.clone();
        if !d.include_stencil_children {
            labels = Some(crate::selector::without_label(labels, crate::labels::PARENT_UID));
        }
        (parse(&labels), parse(&d.annotation_selector))
    })
}

/// Keeps the code generator's panics, which `Compilation::template` catches and reports as
/// errors, out of the process's output; every other panic reaches the hook installed
/// before.
fn quiet_code_generator_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let caught = info
                .location()
                .is_some_and(|l| l.file().contains("minijinja") && l.file().ends_with("compiler/codegen.rs"));
            if !caught {
                previous(info);
            }
        }));
    });
}
