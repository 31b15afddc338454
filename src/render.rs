//! The pure render: (compiled definition, parent, observed children, lookups) → desired
//! children, waiting children and the parent's status. No client, no clock, no I/O: the
//! controller, `stencil render` and `stencil test` all call [`render`].

use std::collections::BTreeMap;
use std::fmt;

use minijinja::value::{Serde, Value as JinjaValue};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::compile::{CompiledDefinition, Origin, names, template_message, template_position};
use crate::conditions::condition;
use crate::definition::{Child, UpdatePolicy};
use crate::gvk::{Gvk, Scopes};
use crate::labels;
use crate::object_key::ObjectKey;
use crate::readiness::{Readiness, default_readiness};

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
}

/// One object the parent should have.
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredChild {
    /// The child entry that rendered it.
    pub child: String,
    /// How it is brought up to date.
    pub update_policy: UpdatePolicy,
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
}

impl RenderOutput {
    /// `{"children": [...], "status": {...}, "waiting": [...]}`, as `stencil render -o json` prints.
    pub fn to_json(&self) -> Value {
        json!({
            "children": self.children.iter().map(|c| c.object.clone()).collect::<Vec<_>>(),
            "status": self.status,
            "waiting": self.waiting,
        })
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
    /// A template rendered more than [`MAX_TEMPLATE_OUTPUT`] bytes.
    #[error("{at}: rendered {size} bytes, more than the limit of {MAX_TEMPLATE_OUTPUT}")]
    TooLarge {
        /// Where.
        at: Place,
        /// Bytes rendered.
        size: usize,
    },
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

/// A lookup to fetch for a parent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LookupRequest {
    /// The lookup's name in the definition.
    pub lookup: String,
    /// The object's apiVersion.
    pub api_version: String,
    /// The object's kind.
    pub kind: String,
    /// The object's namespace; none for cluster-scoped kinds.
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
    /// Whether the parent renders without it.
    pub optional: bool,
}

/// The parent's identity as children and errors need it.
struct ParentInfo<'a> {
    def: &'a CompiledDefinition,
    object: &'a Value,
    namespace: Option<&'a str>,
}

impl ParentInfo<'_> {
    fn new<'a>(def: &'a CompiledDefinition, object: &'a Value) -> ParentInfo<'a> {
        ParentInfo {
            def,
            object,
            namespace: object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty()),
        }
    }

    fn place(&self, template: &str, inner: Option<(u64, u64)>) -> Place {
        let origin = self
            .def
            .origins
            .get(template)
            .cloned()
            .unwrap_or_else(|| Origin::detached(&self.def.source));
        let (line, column) = match inner {
            Some((l, c)) => origin.locate(l, c),
            None => (origin.line, origin.column_offset + u64::from(origin.line > 0)),
        };
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
    fn render_template(&self, template: &str, source: &str, ctx: &JinjaValue) -> Result<String, RenderError> {
        let fail = |e: minijinja::Error| RenderError::Template {
            at: self.place(template, template_position(&e, source)),
            message: template_message(&e),
        };
        let text = self
            .def
            .env
            .get_template(template)
            .and_then(|t| t.render(ctx))
            .map_err(fail)?;
        if text.len() > MAX_TEMPLATE_OUTPUT {
            return Err(RenderError::TooLarge {
                at: self.place(template, None),
                size: text.len(),
            });
        }
        Ok(text)
    }
}

/// The objects to fetch as lookups for this parent, with their names rendered.
pub fn lookup_requests(
    def: &CompiledDefinition,
    parent: &Value,
    scopes: &Scopes,
) -> Result<Vec<LookupRequest>, RenderFailure> {
    let info = ParentInfo::new(def, parent);
    let ctx = JinjaValue::from(Serde(json!({"parent": parent, "definition": definition_value(def)})));
    let mut requests = Vec::new();
    let mut errors = Vec::new();
    for lookup in &def.spec.lookups {
        let name_t = names::lookup_name(&lookup.name);
        let name = info
            .render_template(&name_t, &lookup.name_template, &ctx)
            .map(|s| s.trim().to_string());
        let ns_t = names::lookup_namespace(&lookup.name);
        let namespace = match &lookup.namespace_template {
            Some(source) => info
                .render_template(&ns_t, source, &ctx)
                .map(|s| Some(s.trim().to_string())),
            None => Ok(info.namespace.map(str::to_string)),
        };
        let (name, namespace) = match (name, namespace) {
            (Ok(n), Ok(ns)) => (n, ns),
            (n, ns) => {
                errors.extend(n.err());
                errors.extend(ns.err());
                continue;
            }
        };
        let namespaced = Gvk::parse(&lookup.api_version, &lookup.kind).is_ok_and(|g| scopes.is_namespaced(&g));
        let namespace = if namespaced { namespace } else { None };
        if name.is_empty() {
            errors.push(RenderError::Object {
                at: info.place(&name_t, None),
                message: "the lookup's name rendered empty".into(),
            });
            continue;
        }
        if let Some(ns) = &namespace
            && !info.may_use_namespace(ns)
        {
            errors.push(RenderError::Object {
                at: info.place(&ns_t, None),
                message: format!("lookup namespace `{ns}` is outside the parent's namespace; list it in spec.allowedNamespaces to allow it"),
            });
            continue;
        }
        requests.push(LookupRequest {
            lookup: lookup.name.clone(),
            api_version: lookup.api_version.clone(),
            kind: lookup.kind.clone(),
            namespace,
            name,
            optional: lookup.optional,
        });
    }
    if errors.is_empty() {
        Ok(requests)
    } else {
        Err(RenderFailure(errors))
    }
}

/// Assigns fetched objects to the lookup requests they answer (by group, kind,
/// namespace and name).
pub fn match_lookups(requests: &[LookupRequest], objects: &[Value]) -> BTreeMap<String, Value> {
    requests
        .iter()
        .filter_map(|r| {
            let want = ObjectKey::new(&Gvk::parse(&r.api_version, &r.kind).ok()?, r.namespace.as_deref(), &r.name);
            // A request without a namespace (a cluster-scoped kind) matches by name alone.
            let found = objects.iter().find(|o| {
                ObjectKey::of_value(o).is_some_and(|k| {
                    (k.group == want.group && k.kind == want.kind && k.name == want.name)
                        && (want.namespace.is_none() || k.namespace == want.namespace)
                })
            })?;
            Some((r.lookup.clone(), found.clone()))
        })
        .collect()
}

fn definition_value(def: &CompiledDefinition) -> Value {
    json!({"name": def.name, "parent": {"apiVersion": def.spec.parent.api_version, "kind": def.spec.parent.kind}})
}

/// `children.<name>` as templates and rules see it: a list for collections, otherwise
/// the one observed object (the newest, while an old one awaits pruning).
fn children_context(def: &CompiledDefinition, observed: &BTreeMap<String, Vec<Value>>) -> Map<String, Value> {
    let mut ctx = Map::new();
    for child in &def.spec.children {
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

/// Renders a parent: its desired children, the children still waiting, and its status.
pub fn render(def: &CompiledDefinition, input: RenderInput<'_>) -> Result<RenderOutput, RenderFailure> {
    let info = ParentInfo::new(def, input.parent);
    let context = json!({
        "parent": input.parent,
        "children": children_context(def, input.observed),
        "lookups": input.lookups,
        "definition": definition_value(def),
    });
    let jinja_ctx = JinjaValue::from(Serde(&context));
    let missing_lookups: Vec<String> = def
        .spec
        .lookups
        .iter()
        .filter(|l| !l.optional && !input.lookups.contains_key(&l.name))
        .map(|l| format!("lookups.{}", l.name))
        .collect();

    let mut desired = Vec::new();
    let mut waiting = Vec::new();
    let mut errors = Vec::new();
    let mut ready: BTreeMap<&str, Readiness> = BTreeMap::new();
    for &i in &def.order {
        let child = &def.spec.children[i];
        let blockers: Vec<String> = if missing_lookups.is_empty() {
            child
                .depends_on
                .iter()
                .filter(|d| !ready.get(d.as_str()).is_some_and(Readiness::is_ready))
                .cloned()
                .collect()
        } else {
            missing_lookups.clone()
        };
        if !blockers.is_empty() {
            ready.insert(
                &child.name,
                Readiness::NotReady(format!("waiting for {}", blockers.join(", "))),
            );
            waiting.push(Waiting {
                child: child.name.clone(),
                on: blockers,
            });
            continue;
        }
        match render_child(&info, child, &def.child_kinds[i], &jinja_ctx, input.scopes) {
            Ok(objects) => {
                let observed = input.observed.get(&child.name).map(Vec::as_slice).unwrap_or_default();
                ready.insert(&child.name, child_readiness(def, i, &objects, observed));
                desired.extend(objects.into_iter().map(|object| DesiredChild {
                    child: child.name.clone(),
                    update_policy: child.update_policy,
                    object,
                }));
            }
            Err(mut e) => {
                ready.insert(&child.name, Readiness::NotReady("render failed".into()));
                errors.append(&mut e);
            }
        }
    }
    if !errors.is_empty() {
        return Err(RenderFailure(errors));
    }
    let status = status(&info, &context, &ready, &waiting).map_err(|e| RenderFailure(vec![e]))?;
    Ok(RenderOutput {
        children: desired,
        waiting,
        status,
    })
}

/// Renders one child's template into labelled, owned objects.
fn render_child(
    info: &ParentInfo<'_>,
    child: &Child,
    declared: &[Gvk],
    ctx: &JinjaValue,
    scopes: &Scopes,
) -> Result<Vec<Value>, Vec<RenderError>> {
    let template = names::child(&child.name);
    let text = info
        .render_template(&template, &child.template, ctx)
        .map_err(|e| vec![e])?;
    let docs: Vec<Value> = crate::yaml::documents(&text).map_err(|e| {
        vec![RenderError::Output {
            at: info.place(&template, None),
            line: e.line,
            message: e.message,
        }]
    })?;
    if !child.collection && docs.len() > 1 {
        return Err(vec![RenderError::Object {
            at: info.place(&template, None),
            message: format!(
                "rendered {} documents; set `collection: true` on the child to render several",
                docs.len()
            ),
        }]);
    }
    let mut objects = Vec::new();
    let mut errors = Vec::new();
    for (n, doc) in docs.into_iter().enumerate() {
        match decorate(info, child, declared, doc, scopes) {
            Ok(o) => objects.push(o),
            Err(message) => errors.push(RenderError::Object {
                at: info.place(&template, None),
                message: format!("document {}: {message}", n + 1),
            }),
        }
    }
    if errors.is_empty() { Ok(objects) } else { Err(errors) }
}

/// A label value for any string: as is when valid, else a DNS label with a hash suffix.
pub(crate) fn label_value(s: &str) -> String {
    let valid = s.len() <= labels::MAX_LABEL_VALUE
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && s.chars().next().is_none_or(|c| c.is_ascii_alphanumeric())
        && s.chars().last().is_none_or(|c| c.is_ascii_alphanumeric());
    if valid {
        s.to_string()
    } else {
        crate::compile::templates::to_dns_label(s, labels::MAX_LABEL_VALUE)
    }
}

/// Checks a rendered document and adds its namespace, labels and ownerReference.
fn decorate(
    info: &ParentInfo<'_>,
    child: &Child,
    declared: &[Gvk],
    mut doc: Value,
    scopes: &Scopes,
) -> Result<Value, String> {
    let obj = doc.as_object_mut().ok_or("a child must be a YAML mapping")?;
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .ok_or("apiVersion is missing")?;
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .filter(|k| !k.is_empty())
        .ok_or("kind is missing")?
        .to_string();
    let gvk = Gvk::parse(api_version, &kind).map_err(|e| e.to_string())?;
    if !declared.iter().any(|d| d.group == gvk.group && d.kind == gvk.kind) {
        return Err(format!(
            "{gvk} is not among the kinds the template declares at the start of a line; Stencil watches only those"
        ));
    }
    let metadata = obj.entry("metadata").or_insert_with(|| json!({}));
    let metadata = metadata.as_object_mut().ok_or("metadata must be a mapping")?;
    let name = metadata
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if name.is_empty() {
        return Err(format!("{kind} has no metadata.name"));
    }
    let explicit_ns = metadata
        .get("namespace")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let namespaced = scopes.is_namespaced(&gvk);
    let namespace = match (namespaced, explicit_ns, info.namespace) {
        (false, Some(ns), _) => return Err(format!("{kind} is cluster-scoped; remove metadata.namespace ({ns})")),
        (false, None, _) => None,
        (true, Some(ns), _) => Some(ns),
        (true, None, Some(parent_ns)) => Some(parent_ns.to_string()),
        (true, None, None) => {
            return Err(format!(
                "{kind} {name} is namespaced and its parent is cluster-scoped; set metadata.namespace"
            ));
        }
    };
    if let Some(ns) = &namespace {
        if !info.may_use_namespace(ns) {
            return Err(format!(
                "{kind} {name} targets namespace `{ns}`, outside the parent's namespace; list it in spec.allowedNamespaces to allow it"
            ));
        }
        metadata.insert("namespace".into(), Value::String(ns.clone()));
    }

    let parent_meta = info.object.get("metadata");
    let parent_field = |k: &str| parent_meta.and_then(|m| m.get(k)).and_then(Value::as_str);
    let labels_map = metadata.entry("labels").or_insert_with(|| json!({}));
    let labels_map = labels_map.as_object_mut().ok_or("metadata.labels must be a mapping")?;
    labels_map.insert(labels::MANAGED_BY.into(), labels::MANAGED_BY_VALUE.into());
    labels_map.insert(labels::DEFINITION.into(), label_value(&info.def.name).into());
    labels_map.insert(labels::CHILD.into(), child.name.clone().into());
    labels_map.insert(
        labels::PARENT_NAME.into(),
        label_value(parent_field("name").unwrap_or_default()).into(),
    );
    if let Some(ns) = info.namespace {
        labels_map.insert(labels::PARENT_NAMESPACE.into(), ns.into());
    }
    if let Some(uid) = parent_field("uid") {
        labels_map.insert(labels::PARENT_UID.into(), uid.into());
    }

    // An ownerReference may only point at an owner in the same namespace, or at a
    // cluster-scoped owner.
    let ownable = info.namespace.is_none() || (namespaced && namespace.as_deref() == info.namespace);
    if ownable {
        let mut owner = json!({
            "apiVersion": info.def.spec.parent.api_version,
            "kind": info.def.spec.parent.kind,
            "name": parent_field("name").unwrap_or_default(),
            "controller": true,
            "blockOwnerDeletion": true,
        });
        if let Some(uid) = parent_field("uid") {
            owner["uid"] = uid.into();
        }
        let refs = metadata.entry("ownerReferences").or_insert_with(|| json!([]));
        let refs = refs.as_array_mut().ok_or("metadata.ownerReferences must be a list")?;
        if refs.iter().any(|r| r.get("controller") == Some(&Value::Bool(true))) {
            return Err("the template sets a controller ownerReference; Stencil owns its children".into());
        }
        refs.push(owner);
    }
    Ok(doc)
}

/// A child is ready when every object it rendered is observed and ready.
fn child_readiness(def: &CompiledDefinition, index: usize, desired: &[Value], observed: &[Value]) -> Readiness {
    for want in desired {
        let name = want
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let kind = want.get("kind").and_then(Value::as_str).unwrap_or_default();
        let Some(live) = observed.iter().find(|o| ObjectKey::of_value(want).is_some_and(|w| ObjectKey::of_value(o) == Some(w))) else {
            return Readiness::NotReady(format!("{kind} {name} does not exist yet"));
        };
        let state = match &def.ready_rules[index] {
            Some(rule) if rule.holds(live) => Readiness::Ready,
            Some(rule) => Readiness::NotReady(format!("readyWhen `{}` does not hold", rule.source())),
            None => default_readiness(live),
        };
        if let Readiness::NotReady(why) = state {
            return Readiness::NotReady(format!("{kind} {name}: {why}"));
        }
    }
    Readiness::Ready
}

/// The parent's status: fields, user conditions, the status template, `Ready`,
/// `Reconciling` while not ready, and `observedGeneration`.
fn status(
    info: &ParentInfo<'_>,
    context: &Value,
    ready: &BTreeMap<&str, Readiness>,
    waiting: &[Waiting],
) -> Result<Value, RenderError> {
    let def = info.def;
    let generation = info.object.pointer("/metadata/generation").and_then(Value::as_i64);
    let mut status = Map::new();
    if let Some(g) = generation {
        status.insert("observedGeneration".into(), g.into());
    }
    for (field, rule) in &def.field_rules {
        let mut values = rule.select(context);
        match values.len() {
            0 => {}
            1 => {
                status.insert(field.clone(), values.remove(0));
            }
            _ => {
                status.insert(field.clone(), Value::Array(values));
            }
        }
    }

    let not_ready: Vec<String> = def
        .spec
        .children
        .iter()
        .filter(|c| !waiting.iter().any(|w| w.child == c.name))
        .filter_map(|c| match ready.get(c.name.as_str()) {
            Some(Readiness::NotReady(why)) => Some(format!("{} ({why})", c.name)),
            _ => None,
        })
        .collect();
    let all_ready = not_ready.is_empty() && waiting.is_empty();

    if let Some(source) = &def.spec.status.template {
        let mut ctx = context.clone();
        ctx["ready"] = all_ready.into();
        ctx["waiting"] = serde_json::to_value(waiting).unwrap_or_default();
        let text = info.render_template(names::STATUS, source, &JinjaValue::from(Serde(&ctx)))?;
        let at = || info.place(names::STATUS, None);
        let extra: Value = crate::yaml::document(&text).map_err(|e| RenderError::Output {
            at: at(),
            line: e.line,
            message: e.message,
        })?;
        match extra {
            Value::Null => {}
            Value::Object(map) => {
                for (k, v) in map {
                    if crate::compile::RESERVED_STATUS_FIELDS.contains(&k.as_str()) {
                        return Err(RenderError::Object {
                            at: at(),
                            message: format!("status.{k} is written by Stencil"),
                        });
                    }
                    status.insert(k, v);
                }
            }
            _ => {
                return Err(RenderError::Object {
                    at: at(),
                    message: "the status template must render a YAML mapping".into(),
                });
            }
        }
    }

    let mut conditions = Vec::new();
    for (rule_spec, rule) in def.spec.status.conditions.iter().zip(&def.condition_rules) {
        let holds = rule.holds(context);
        let (reason, message) = if holds {
            (
                rule_spec.reason.clone().unwrap_or_else(|| "RuleSatisfied".into()),
                rule_spec.message.clone().unwrap_or_default(),
            )
        } else {
            ("RuleNotSatisfied".into(), format!("`{}` does not hold", rule.source()))
        };
        conditions.push(condition(&rule_spec.type_, holds, &reason, &message, generation));
    }
    let total = def.spec.children.len();
    let (reason, message) = if all_ready {
        (
            "AllChildrenReady".to_string(),
            format!("{total} of {total} children ready"),
        )
    } else {
        let mut parts = Vec::new();
        if !waiting.is_empty() {
            let w: Vec<String> = waiting
                .iter()
                .map(|w| format!("{} (on {})", w.child, w.on.join(", ")))
                .collect();
            parts.push(format!("waiting: {}", w.join(", ")));
        }
        if !not_ready.is_empty() {
            parts.push(format!("not ready: {}", not_ready.join(", ")));
        }
        let reason = if waiting.is_empty() {
            "ChildrenNotReady"
        } else {
            "Waiting"
        };
        (reason.to_string(), parts.join("; "))
    };
    conditions.push(condition("Ready", all_ready, &reason, &message, generation));
    if !all_ready {
        conditions.push(condition("Reconciling", true, &reason, &message, generation));
    }
    status.insert("conditions".into(), Value::Array(conditions));
    Ok(Value::Object(status))
}

/// The status of a parent whose render failed: `Ready` False and `Stalled` True, with the
/// errors as the message. The controller writes it and changes nothing else.
pub fn failure_status(parent: &Value, failure: &RenderFailure) -> Value {
    let generation = parent.pointer("/metadata/generation").and_then(Value::as_i64);
    let message = failure.to_string();
    let mut status = json!({"conditions": [
        condition("Ready", false, "RenderFailed", &message, generation),
        condition("Stalled", true, "RenderFailed", &message, generation),
    ]});
    if let Some(g) = generation {
        status["observedGeneration"] = g.into();
    }
    status
}

#[cfg(test)]
mod tests;
