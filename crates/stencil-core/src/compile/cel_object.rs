//! A child written as an object rather than a template: a mapping whose strings may hold
//! `${ CEL }`, compiled once into a tree and rendered by evaluating each expression. A
//! string that is one `${...}` alone becomes the expression's value with its type; one
//! whose value is `omit()` leaves its field out. `apiVersion` and `kind` are literal, so
//! the kind is known before anything renders. With `forEach`, as kro's, the object renders
//! once for each combination of its dimensions' values.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Map, Value};

use super::validate::is_identifier;
use crate::cel_dialect::{self, CelError, CelString};
use crate::gvk::Gvk;

/// A compiled object.
#[derive(Debug, Clone)]
pub enum Node {
    /// A value with no expression in it.
    Literal(Value),
    /// A string holding `${...}`.
    Cel(Arc<CelString>),
    /// A mapping, its keys literal, in the written order.
    Map(Vec<(String, Node)>),
    /// A list.
    List(Vec<Node>),
}

/// An expression of the object that failed, and the dotted path of its field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{path}: {error}")]
pub struct ObjectError {
    /// The field's dotted path inside the object (`spec.replicas`, `spec.ports[0].port`).
    pub path: String,
    /// What failed.
    pub error: CelError,
}

/// Compiles every `${...}` string of `object`; every expression that does not parse is
/// reported.
pub fn compile(object: &Value) -> Result<Node, Vec<ObjectError>> {
    let mut errors = Vec::new();
    let node = compile_at(object, "", &mut errors);
    if errors.is_empty() { Ok(node) } else { Err(errors) }
}

fn compile_at(value: &Value, path: &str, errors: &mut Vec<ObjectError>) -> Node {
    match value {
        Value::String(text) if text.contains("${") => match cel_dialect::parse(text) {
            Ok(cel) => Node::Cel(Arc::new(cel)),
            Err(error) => {
                errors.push(ObjectError {
                    path: path.to_string(),
                    error,
                });
                Node::Literal(value.clone())
            }
        },
        Value::Object(members) => Node::Map(
            members
                .iter()
                .map(|(k, v)| (k.clone(), compile_at(v, &join(path, k), errors)))
                .collect(),
        ),
        Value::Array(items) => Node::List(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| compile_at(v, &format!("{path}[{i}]"), errors))
                .collect(),
        ),
        other => Node::Literal(other.clone()),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

impl Node {
    /// Every name the object's expressions read.
    pub fn variables(&self) -> BTreeSet<&str> {
        let mut names = BTreeSet::new();
        self.collect_variables(&mut names);
        names
    }

    fn collect_variables<'a>(&'a self, names: &mut BTreeSet<&'a str>) {
        match self {
            Node::Literal(_) => {}
            Node::Cel(cel) => names.extend(cel.variables()),
            Node::Map(members) => members.iter().for_each(|(_, n)| n.collect_variables(names)),
            Node::List(items) => items.iter().for_each(|n| n.collect_variables(names)),
        }
    }

    /// The dotted path of every field holding an expression, in order.
    pub fn expression_paths(&self) -> Vec<String> {
        let mut paths = Vec::new();
        self.collect_paths("", &mut paths);
        paths
    }

    fn collect_paths(&self, path: &str, paths: &mut Vec<String>) {
        match self {
            Node::Literal(_) => {}
            Node::Cel(_) => paths.push(path.to_string()),
            Node::Map(members) => members.iter().for_each(|(k, n)| n.collect_paths(&join(path, k), paths)),
            Node::List(items) => items
                .iter()
                .enumerate()
                .for_each(|(i, n)| n.collect_paths(&format!("{path}[{i}]"), paths)),
        }
    }

    /// The object with each expression's value, names read through `variable`.
    ///
    /// # Errors
    ///
    /// The first expression that fails, with its field's path.
    pub fn render<'a>(&self, variable: &dyn Fn(&str) -> Option<&'a Value>) -> Result<Value, ObjectError> {
        Ok(self.render_at("", variable)?.unwrap_or(Value::Null))
    }

    /// `None` for a field `omit()` leaves out.
    fn render_at<'a>(
        &self,
        path: &str,
        variable: &dyn Fn(&str) -> Option<&'a Value>,
    ) -> Result<Option<Value>, ObjectError> {
        Ok(match self {
            Node::Literal(value) => Some(value.clone()),
            Node::Cel(cel) => cel.evaluate(variable).map_err(|error| ObjectError {
                path: path.to_string(),
                error,
            })?,
            Node::Map(members) => {
                let mut out = Map::new();
                for (key, node) in members {
                    if let Some(value) = node.render_at(&join(path, key), variable)? {
                        out.insert(key.clone(), value);
                    }
                }
                Some(Value::Object(out))
            }
            Node::List(items) => {
                let mut out = Vec::new();
                for (i, node) in items.iter().enumerate() {
                    out.extend(node.render_at(&format!("{path}[{i}]"), variable)?);
                }
                Some(Value::Array(out))
            }
        })
    }
}

/// One `forEach` dimension: a variable and the CEL expression that gives its values.
#[derive(Debug, Clone)]
pub struct Dimension {
    /// The variable each value is bound to.
    pub name: String,
    /// The expression, one `${...}` giving a list.
    pub values: Arc<CelString>,
}

/// A child written as an object: the object, and its `forEach` dimensions.
#[derive(Debug, Clone)]
pub struct ObjectChild {
    /// The compiled object.
    pub object: Node,
    /// The dimensions, first outermost; empty for a child of one object.
    pub for_each: Vec<Dimension>,
}

/// Compiles `forEach` entries: each maps one variable to one `${...}` expression.
///
/// # Errors
///
/// An entry with another number of keys, a name that is not an identifier, or a value
/// that is not one expression, each with its entry's path (`forEach[0]`).
pub fn compile_for_each(entries: &[BTreeMap<String, String>]) -> Result<Vec<Dimension>, Vec<(String, String)>> {
    let mut dimensions = Vec::new();
    let mut errors = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let path = format!("forEach[{i}]");
        let [(name, text)] = entry.iter().collect::<Vec<_>>()[..] else {
            errors.push((
                path,
                "each entry maps one variable to its values: `- name: ${...}`".to_string(),
            ));
            continue;
        };
        if !is_identifier(name) || dimensions.iter().any(|d: &Dimension| &d.name == name) {
            errors.push((path, format!("`{name}` is not a variable name of its own")));
            continue;
        }
        match cel_dialect::parse(text) {
            Ok(cel) if cel.is_expression() => dimensions.push(Dimension {
                name: name.clone(),
                values: Arc::new(cel),
            }),
            Ok(_) => errors.push((path, "the values are one `${...}` giving a list".to_string())),
            Err(e) => errors.push((path, e.to_string())),
        }
    }
    if errors.is_empty() { Ok(dimensions) } else { Err(errors) }
}

impl ObjectChild {
    /// Every name the child reads: its dimensions' expressions', and its object's but
    /// the dimensions' own variables.
    pub fn variables(&self) -> BTreeSet<&str> {
        let own: BTreeSet<&str> = self.for_each.iter().map(|d| d.name.as_str()).collect();
        let mut names: BTreeSet<&str> = self
            .object
            .variables()
            .into_iter()
            .filter(|n| !own.contains(n))
            .collect();
        names.extend(self.for_each.iter().flat_map(|d| d.values.variables()));
        names
    }

    /// The objects the child renders: one, or one per combination of its dimensions'
    /// values (the first dimension outermost), each with the combination in scope.
    ///
    /// # Errors
    ///
    /// A dimension that fails or is not a list (its path is `forEach[i]`), or an
    /// expression of the object that fails.
    pub fn render<'a>(&self, variable: &dyn Fn(&str) -> Option<&'a Value>) -> Result<Vec<Value>, ObjectError> {
        let mut combinations: Vec<Vec<(&str, Value)>> = vec![Vec::new()];
        for (i, dimension) in self.for_each.iter().enumerate() {
            let path = format!("forEach[{i}]");
            let failed = |error| ObjectError {
                path: path.clone(),
                error,
            };
            let values = match dimension.values.evaluate(variable).map_err(failed)? {
                Some(Value::Array(values)) => values,
                other => {
                    let message = format!("gives {}, not a list", other.unwrap_or(Value::Null));
                    return Err(failed(CelError::Evaluate {
                        expression: path.clone(),
                        message,
                    }));
                }
            };
            combinations = combinations
                .into_iter()
                .flat_map(|combination| {
                    values.iter().map(move |v| {
                        let mut next = combination.clone();
                        next.push((dimension.name.as_str(), v.clone()));
                        next
                    })
                })
                .collect();
        }
        combinations
            .iter()
            .map(|combination| {
                let scoped = |name: &str| {
                    combination
                        .iter()
                        .find(|(n, _)| *n == name)
                        .map(|(_, v)| v)
                        .or_else(|| variable(name))
                };
                self.object.render(&scoped)
            })
            .collect()
    }
}

/// The kind `object` declares: its `apiVersion` and `kind`, which must be literal.
///
/// # Errors
///
/// Either is missing, holds an expression or is not a valid kind.
pub fn declared_kind(object: &Value) -> Result<Gvk, String> {
    let literal = |field: &str| match object.get(field) {
        Some(Value::String(s)) if !s.contains("${") && !s.is_empty() => Ok(s.as_str()),
        Some(Value::String(_)) => Err(format!(
            "{field} must be literal text so Stencil can watch the kind and derive RBAC"
        )),
        _ => Err(format!("the object has no {field}")),
    };
    let (api_version, kind) = (literal("apiVersion")?, literal("kind")?);
    Gvk::parse(api_version, kind).map_err(|e| e.to_string())
}

/// The `apiVersion`, `kind`, `name` and `namespace` of `object`, as
/// [`kinds::fixed_identity`](super::kinds::fixed_identity) gives a template's, when all
/// are literal, so two children that write one object are caught before anything renders.
pub fn fixed_identity(object: &Value) -> Option<String> {
    fn literal(v: Option<&Value>) -> Option<&str> {
        v.and_then(Value::as_str).filter(|s| !s.contains("${"))
    }
    let api_version = literal(object.get("apiVersion"))?;
    let kind = literal(object.get("kind"))?;
    let name = literal(object.pointer("/metadata/name"))?;
    let namespace = match object.pointer("/metadata/namespace") {
        None => "",
        namespace => literal(namespace)?,
    };
    Some(format!("{api_version}\n{kind}\n{name}\n{namespace}"))
}

#[cfg(test)]
mod tests;
