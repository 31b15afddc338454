//! The pure render: (compiled definition, parent, observed children, lookups) → desired
//! children, waiting children and the parent's status. No client, no clock, no I/O: the
//! controller, `stencil render` and `stencil test` all call [`render`]. The parts, each a
//! private module: `lookups` (what to fetch), `decorate` (checking and labelling each
//! rendered object), `parent_status` (readiness and the parent's status) and `finalize`
//! (the finalize step of a parent being deleted).

mod decorate;
mod entries;
mod finalize;
mod lookups;
mod parent_status;

pub use decorate::collected_by_garbage_collector;
use entries::render_entries;
pub use finalize::{FinalizeOutput, render_finalize};
pub use lookups::{LookupRequest, Target, lookup_requests, match_lookups, string_map};
pub use parent_status::{failure_status, not_ready, paused_status};

use std::collections::BTreeMap;
use std::fmt;

use minijinja::value::{Serde, Value as JinjaValue};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::compile::rules::{Rule, RuleFailure};
use crate::compile::{CompiledDefinition, FieldPosition, names, template_message, template_position};
use crate::definition::{Adopt, Child, UpdatePolicy};
use crate::gvk::{Gvk, Scopes};
use crate::labels;
use crate::object_key::ObjectKey;
use crate::readiness::Readiness;

/// Largest output one template may render, in bytes.
pub const MAX_TEMPLATE_OUTPUT: usize = 1024 * 1024;

/// What the renderer reads: the parent and what is observed around it.
#[derive(Debug, Clone, Copy)]
pub struct RenderInput<'a> {
    /// The parent object as the API server returns it.
    pub parent: &'a Value,
    /// Observed children, by child name (the `stencil.dev/child` label).
    pub observed: &'a BTreeMap<String, Vec<Value>>,
    /// Fetched lookups, by lookup name; a missing one is absent.
    pub lookups: &'a BTreeMap<String, Value>,
    /// Which kinds are namespaced.
    pub scopes: &'a Scopes,
    /// The namespaces this Stencil serves (`--namespace`); empty: every namespace. A
    /// child outside them could be neither watched nor pruned, so it is refused.
    pub served: &'a [String],
}

/// One object the parent should have.
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredChild {
    /// The child entry that rendered it.
    pub child: String,
    /// How it is brought up to date.
    pub update_policy: UpdatePolicy,
    /// Whether it may take over an existing object nobody controls.
    pub adopt: Adopt,
    /// The object, labelled and owned, ready for server-side apply.
    pub object: Value,
}

/// A child not rendered yet because what it depends on is not ready.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Waiting {
    /// The child entry.
    pub child: String,
    /// What it waits for: child names, or `lookups.<name>`.
    pub on: Vec<String>,
}

/// The result of a successful render.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderOutput {
    /// Every object to apply, in dependency order.
    pub children: Vec<DesiredChild>,
    /// Children held back; their existing objects must be kept, not pruned.
    pub waiting: Vec<Waiting>,
    /// The parent's status: fields, conditions, `observedGeneration`.
    pub status: Value,
    /// Desired objects that exist and are not this parent's (offline, from the objects
    /// given; [`crate::ownership::settle`]): `Kind namespace/name` and why.
    pub conflicts: Vec<String>,
    /// Desired objects that exist, are nobody's, and would be adopted.
    pub adoptions: Vec<String>,
    /// The finalize step, offline, for a parent that carries a deletionTimestamp.
    pub finalize: Option<FinalizeOutput>,
}

impl RenderOutput {
    /// `{"children": [...], "status": {...}, "waiting": [...]}`, as `stencil render -o json`
    /// prints, with `conflicts`, `adoptions` and `finalize` when there are any.
    pub fn to_json(&self) -> Value {
        let mut out = json!({
            "children": self.children.iter().map(|c| c.object.clone()).collect::<Vec<_>>(),
            "status": self.status,
            "waiting": self.waiting,
        });
        if !self.conflicts.is_empty() {
            out["conflicts"] = json!(self.conflicts);
        }
        if !self.adoptions.is_empty() {
            out["adoptions"] = json!(self.adoptions);
        }
        if let Some(f) = &self.finalize {
            out["finalize"] = f.to_json();
        }
        out
    }
}

/// Where in a definition a render error arose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The definition's file (or `OperatorDefinition/<name>`).
    pub file: String,
    /// 1-based line in the file; 0 if unknown.
    pub line: u64,
    /// 1-based column; 0 if unknown.
    pub column: u64,
    /// The definition's name.
    pub definition: String,
    /// The field, e.g. `children[statefulset].template`.
    pub field: String,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: definition {}: {}",
            self.file, self.line, self.column, self.definition, self.field
        )
    }
}

/// Why a parent could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// A template failed: an undefined value, `required`, out of fuel, a bad filter input.
    #[error("{at}: {message}")]
    Template {
        /// Where.
        at: Place,
        /// What the engine said.
        message: String,
        /// Whether it read through an undefined value.
        undefined: bool,
    },
    /// A template rendered text that is not YAML.
    #[error("{at}: the rendered output is not valid YAML (line {line} of the output): {message}")]
    Output {
        /// Where.
        at: Place,
        /// Line in the rendered text.
        line: u64,
        /// What the parser said.
        message: String,
    },
    /// A rendered document is not an object Stencil may apply.
    #[error("{at}: {message}")]
    Object {
        /// Where.
        at: Place,
        /// What to fix.
        message: String,
    },
    /// The parent does not satisfy its CRD version's schema (offline: the API server would
    /// refuse it).
    #[error("the parent does not satisfy the schema of {version}: {}", problems.join("; "))]
    Schema {
        /// The CRD version.
        version: String,
        /// Each violation, by path.
        problems: Vec<String>,
    },
    /// The status the rules and the status template compute does not satisfy the status
    /// the CRD version declares (offline: the API server would refuse or drop it).
    #[error("the status does not satisfy the schema of {version}: {}", problems.join("; "))]
    Status {
        /// The CRD version.
        version: String,
        /// Each violation, by path.
        problems: Vec<String>,
    },
    /// A template rendered more than [`MAX_TEMPLATE_OUTPUT`] bytes.
    #[error("{at}: rendered {size} bytes, more than the limit of {MAX_TEMPLATE_OUTPUT}")]
    TooLarge {
        /// Where.
        at: Place,
        /// Bytes rendered.
        size: usize,
    },
}

impl RenderError {
    /// Whether a template failed on an undefined value (reading through something absent).
    fn is_undefined(&self) -> bool {
        matches!(self, RenderError::Template { undefined: true, .. })
    }
}

/// Every error of one render; nothing is applied or pruned when a render fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderFailure(pub Vec<RenderError>);

impl fmt::Display for RenderFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        write!(f, "{}", lines.join("\n"))
    }
}

impl std::error::Error for RenderFailure {}

/// The parent's identity as children and errors need it.
struct ParentInfo<'a> {
    def: &'a CompiledDefinition,
    object: &'a Value,
    namespace: Option<&'a str>,
    served: &'a [String],
}

impl<'a> ParentInfo<'a> {
    fn new(def: &'a CompiledDefinition, object: &'a Value) -> ParentInfo<'a> {
        ParentInfo {
            def,
            object,
            namespace: object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty()),
            served: &[],
        }
    }

    /// The same parent, rendered by a Stencil that serves only `served` (empty: all).
    fn serving(self, served: &'a [String]) -> ParentInfo<'a> {
        ParentInfo { served, ..self }
    }

    /// Whether this Stencil watches namespace `ns`.
    fn serves(&self, ns: &str) -> bool {
        self.served.is_empty() || self.served.iter().any(|s| s == ns)
    }

    fn place(&self, template: &str, inner: Option<(u64, u64)>) -> Place {
        let origin = self
            .def
            .origin(template)
            .cloned()
            .unwrap_or_else(|| FieldPosition::detached(&self.def.source));
        let (line, column) = origin.position(inner);
        Place {
            file: origin.file,
            line,
            column,
            definition: self.def.name.clone(),
            field: template.to_string(),
        }
    }

    fn may_use_namespace(&self, ns: &str) -> bool {
        match self.namespace {
            None => true,
            Some(own) => ns == own || self.def.spec.allowed_namespaces.iter().any(|a| a == "*" || a == ns),
        }
    }

    /// Renders one template of the definition to text.
    /// The error of a status rule that failed while it was evaluated, placed in its field.
    fn rule_error(&self, rule: &Rule, failure: RuleFailure) -> RenderError {
        RenderError::Template {
            at: self.place(rule.name(), failure.position),
            message: failure.message,
            undefined: false,
        }
    }

    fn render_template(&self, template: &str, source: &str, ctx: &JinjaValue) -> Result<String, RenderError> {
        let fail = |e: minijinja::Error| {
            // A failure inside an imported helper is placed in `spec.helpers`.
            let (template, source) = match (e.name(), &self.def.spec.helpers) {
                (Some(names::HELPERS), Some(helpers)) => (names::HELPERS, helpers.as_str()),
                _ => (template, source),
            };
            RenderError::Template {
                at: self.place(template, template_position(&e, source)),
                message: template_message(&e),
                undefined: e.kind() == minijinja::ErrorKind::UndefinedError,
            }
        };
        let text = self.def.template(template).and_then(|t| t.render(ctx)).map_err(fail)?;
        if text.len() > MAX_TEMPLATE_OUTPUT {
            return Err(RenderError::TooLarge {
                at: self.place(template, None),
                size: text.len(),
            });
        }
        Ok(text)
    }
}

/// Renders the definition's template `name` (whose text is `source`) over `ctx`, for
/// `object`, with errors placed in the definition's file.
pub(crate) fn render_named(
    def: &CompiledDefinition,
    object: &Value,
    name: &str,
    source: &str,
    ctx: &JinjaValue,
) -> Result<String, RenderError> {
    ParentInfo::new(def, object).render_template(name, source, ctx)
}

fn definition_value(def: &CompiledDefinition) -> Value {
    json!({"name": def.name, "parent": {"apiVersion": def.spec.parent.api_version, "kind": def.spec.parent.kind}})
}

/// `children.<name>` as templates and rules see it: a list for collections, otherwise
/// the one observed object (the newest, while an old one awaits pruning).
fn children_context(def: &CompiledDefinition, observed: &BTreeMap<String, Vec<Value>>) -> Map<String, Value> {
    let mut ctx = Map::new();
    for (_, child) in def.entries() {
        let mut objects = observed.get(&child.name).cloned().unwrap_or_default();
        let key = |o: &Value| {
            let created = o
                .pointer("/metadata/creationTimestamp")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let id = ObjectKey::of_value(o)
                .map(|k| (k.namespace.unwrap_or_default(), k.name))
                .unwrap_or_default();
            (created, id)
        };
        objects.sort_by_key(key);
        if child.collection {
            ctx.insert(child.name.clone(), Value::Array(objects));
        } else if let Some(newest) = objects.pop() {
            ctx.insert(child.name.clone(), newest);
        }
    }
    ctx
}

/// The context every template and rule of a parent sees.
fn context(def: &CompiledDefinition, input: &RenderInput<'_>) -> Value {
    json!({
        "parent": input.parent,
        "children": children_context(def, input.observed),
        "lookups": input.lookups,
        "definition": definition_value(def),
    })
}

/// Renders a parent: its desired children, the children still waiting, and its status.
///
/// # Errors
///
/// A template, a status rule or a rendered object is wrong, or the parent does not satisfy
/// its schema: the failure lists every error with its place; nothing is rendered then.
pub fn render(def: &CompiledDefinition, input: RenderInput<'_>) -> Result<RenderOutput, RenderFailure> {
    let info = ParentInfo::new(def, input.parent).serving(input.served);
    let meta = |key: &str| string_map(input.parent.pointer(&format!("/metadata/{key}")));
    if !def.decorates(meta("labels").as_ref(), meta("annotations").as_ref()) {
        // A decorator renders nothing for an object its selectors do not match: whatever
        // it made there is pruned.
        return Ok(RenderOutput {
            children: Vec::new(),
            waiting: Vec::new(),
            status: json!({}),
            conflicts: Vec::new(),
            adoptions: Vec::new(),
            finalize: None,
        });
    }
    let context = context(def, &input);
    let jinja_ctx = JinjaValue::from(Serde(&context));
    let entries = render_entries(&info, def.order(), (&context, &jinja_ctx), &input)?;
    let status = parent_status::status(&info, &context, &entries).map_err(|e| RenderFailure(vec![e]))?;
    Ok(RenderOutput {
        children: entries.desired,
        waiting: entries.waiting,
        status,
        conflicts: Vec::new(),
        adoptions: Vec::new(),
        finalize: None,
    })
}

#[cfg(test)]
mod tests;
