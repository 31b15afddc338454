//! Rendering one list of child entries (`children`, or `finalize.children`) in dependency
//! order: each template into labelled, owned objects, or a waiting entry when a lookup is
//! missing, a dependency or a collection it reads is not ready, or the template reads a
//! child that does not exist.
//! One object comes from one entry, once: two renderings of it would overwrite each other
//! on every pass.

use std::collections::{BTreeMap, BTreeSet};

use minijinja::value::Value as JinjaValue;
use serde_json::Value;

use super::{DesiredChild, ParentInfo, RenderError, RenderFailure, RenderInput, Waiting, decorate, parent_status};
use crate::cel_dialect::CelError;
use crate::compile::cel_object::ObjectChild;
use crate::compile::names;
use crate::compile::rules::cel_variable;
use crate::gvk::Scopes;
use crate::object_key::ObjectKey;
use crate::readiness::Readiness;

/// What rendering one list of child entries gives.
pub(super) struct Entries<'a> {
    pub(super) desired: Vec<DesiredChild>,
    pub(super) waiting: Vec<Waiting>,
    pub(super) ready: BTreeMap<&'a str, Readiness>,
    /// Children left out by their `includeWhen`, or by a dependency's.
    pub(super) excluded: BTreeSet<&'a str>,
}

impl<'a> Entries<'a> {
    /// Holds `child` back until `on` (child names, or `lookups.<name>`) is there.
    fn wait(&mut self, child: &'a str, on: Vec<String>) {
        self.ready
            .insert(child, Readiness::NotReady(format!("waiting for {}", on.join(", "))));
        self.waiting.push(Waiting {
            child: child.to_string(),
            on,
        });
    }
}

/// The context of a parent's templates and rules: as JSON, and as minijinja reads it.
pub(super) type Context<'c> = (&'c Value, &'c JinjaValue);

/// Renders the entries at `order` (indices into [`CompiledDefinition::entry`](crate::compile::CompiledDefinition::entry)): an entry
/// is held back while a lookup is missing or what it depends on is not ready.
pub(super) fn render_entries<'a>(
    info: &ParentInfo<'a>,
    order: &[usize],
    context: Context<'_>,
    input: &RenderInput<'_>,
) -> Result<Entries<'a>, RenderFailure> {
    let def = info.def;
    let missing_lookups: Vec<String> = def
        .spec
        .lookups
        .iter()
        .filter(|l| !l.optional && !input.lookups.contains_key(&l.name))
        .map(|l| format!("lookups.{}", l.name))
        .collect();
    let mut out = Entries {
        desired: Vec::new(),
        waiting: Vec::new(),
        ready: BTreeMap::new(),
        excluded: BTreeSet::new(),
    };
    let mut errors = Vec::new();
    let mut rendered_by: BTreeMap<ObjectKey, &str> = BTreeMap::new();
    for &i in order {
        let child = def.entry(i);
        let blockers = if missing_lookups.is_empty() {
            unready_dependencies(def, i, &out.ready)
        } else {
            missing_lookups.clone()
        };
        if !blockers.is_empty() {
            out.wait(&child.name, blockers);
            continue;
        }
        match included(info, i, context.0, &out.excluded) {
            Ok(true) => {}
            Ok(false) => {
                out.ready.insert(&child.name, Readiness::Ready);
                out.excluded.insert(&child.name);
                continue;
            }
            Err(e) => {
                out.ready
                    .insert(&child.name, Readiness::NotReady("includeWhen failed".into()));
                errors.push(e);
                continue;
            }
        }
        match render_child(info, i, context, input.scopes) {
            Ok(objects) => {
                let twice = twice_rendered(&mut rendered_by, &child.name, &objects);
                if !twice.is_empty() {
                    let at = info.place(&info.def.template_name(i), None);
                    errors.extend(twice.into_iter().map(|message| RenderError::Object {
                        at: at.clone(),
                        message,
                    }));
                    out.ready
                        .insert(&child.name, Readiness::NotReady("render failed".into()));
                    continue;
                }
                let observed = input.observed.get(&child.name).map(Vec::as_slice).unwrap_or_default();
                out.ready
                    .insert(&child.name, parent_status::child_readiness(def, i, &objects, observed));
                out.desired.extend(objects.into_iter().map(|object| DesiredChild {
                    child: child.name.clone(),
                    update_policy: child.update_policy,
                    adopt: child.adopt,
                    object,
                }));
            }
            Err(mut e) => {
                // Reading through a child that does not exist yet waits for it, as
                // `dependsOn` would, instead of failing every child of the parent.
                let absent = absent_reads(def, i, input);
                if !absent.is_empty() && e.iter().all(RenderError::is_undefined) {
                    out.wait(&child.name, absent);
                    continue;
                }
                out.ready
                    .insert(&child.name, Readiness::NotReady("render failed".into()));
                errors.append(&mut e);
            }
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(RenderFailure(errors))
    }
}

/// Whether the entry at `i` is rendered: no child it depends on is left out, and its
/// `includeWhen`, if any, holds over `context`.
fn included(info: &ParentInfo<'_>, i: usize, context: &Value, excluded: &BTreeSet<&str>) -> Result<bool, RenderError> {
    let def = info.def;
    if def.entry(i).depends_on.iter().any(|d| excluded.contains(d.as_str())) {
        return Ok(false);
    }
    match def.include_rule(i) {
        Some(rule) => rule.holds(context).map_err(|e| info.rule_error(rule, e)),
        None => Ok(true),
    }
}

/// What the entry at `i` waits for: the entries it depends on, and every collection it
/// reads, that are not ready. A collection read is a dependency: the reader waits until
/// every member exists and is ready (an empty collection is complete), not just until
/// one exists.
fn unready_dependencies(
    def: &crate::compile::CompiledDefinition,
    i: usize,
    ready: &BTreeMap<&str, Readiness>,
) -> Vec<String> {
    let collections = def.reads(i).iter().filter(|r| def.reads_collection(i, r));
    def.entry(i)
        .depends_on
        .iter()
        .chain(collections)
        .filter(|d| !ready.get(d.as_str()).is_some_and(Readiness::is_ready))
        .cloned()
        .collect()
}

/// The other children the entry at `i` reads that are not observed yet.
fn absent_reads(def: &crate::compile::CompiledDefinition, i: usize, input: &RenderInput<'_>) -> Vec<String> {
    def.reads(i)
        .iter()
        .filter(|r| input.observed.get(*r).is_none_or(Vec::is_empty))
        .cloned()
        .collect()
}

/// A child written as an object, its expressions evaluated over `context`; a failure is
/// placed at the expression's field.
fn render_object(
    info: &ParentInfo<'_>,
    template: &str,
    object: &ObjectChild,
    context: &Value,
) -> Result<Vec<Value>, Vec<RenderError>> {
    object.render(&|name| cel_variable(context, None, name)).map_err(|e| {
        let field = format!("{}.{}", names::object(template), e.path);
        vec![RenderError::Template {
            at: info.place(&field, None),
            undefined: matches!(e.error, CelError::Missing { .. }),
            message: e.error.to_string(),
        }]
    })
}

/// Records which entry renders each of `objects`; says so for each object an entry
/// rendered already (this one, twice in a collection, or another).
fn twice_rendered<'a>(
    rendered_by: &mut BTreeMap<ObjectKey, &'a str>,
    child: &'a str,
    objects: &[Value],
) -> Vec<String> {
    let mut problems = Vec::new();
    for key in objects.iter().filter_map(ObjectKey::of_value) {
        match rendered_by.get(&key) {
            Some(first) if *first == child => problems.push(format!(
                "renders {key} twice; each object of a collection needs a name of its own"
            )),
            Some(first) => problems.push(format!(
                "renders {key}, which child `{first}` renders too; one object comes from one child: rename one of them"
            )),
            None => {
                rendered_by.insert(key, child);
            }
        }
    }
    problems
}

/// Renders one child's template, or its object, into labelled, owned objects.
fn render_child(
    info: &ParentInfo<'_>,
    index: usize,
    (context, jinja_ctx): Context<'_>,
    scopes: &Scopes,
) -> Result<Vec<Value>, Vec<RenderError>> {
    let child = info.def.entry(index);
    let declared = &info.def.child_kinds[index];
    let template = info.def.template_name(index);
    let docs = match info.def.object(index) {
        Some(object) => render_object(info, &template, object, context)?,
        None => {
            let text = info
                .render_template(&template, &child.template, jinja_ctx)
                .map_err(|e| vec![e])?;
            crate::yaml::documents(&text).map_err(|e| {
                vec![RenderError::Output {
                    at: info.place(&template, None),
                    line: e.line,
                    message: e.message,
                }]
            })?
        }
    };
    if !child.collection && docs.len() > 1 {
        return Err(vec![RenderError::Object {
            at: info.place(&template, None),
            message: format!(
                "rendered {} documents; set `collection: true` on the child to render several",
                docs.len()
            ),
        }]);
    }
    let written = match child.object {
        Some(_) => names::object(&template),
        None => template,
    };
    let mut objects = Vec::new();
    let mut errors = Vec::new();
    for (n, doc) in docs.into_iter().enumerate() {
        match decorate::decorate(info, child, declared, doc, scopes) {
            Ok(o) => objects.push(o),
            Err(message) => errors.push(RenderError::Object {
                at: info.place(&written, None),
                message: format!("document {}: {message}", n + 1),
            }),
        }
    }
    if errors.is_empty() { Ok(objects) } else { Err(errors) }
}
