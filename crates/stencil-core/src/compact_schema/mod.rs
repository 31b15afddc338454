//! The compact schema: a parent's `spec` and `status` written one line per field, as
//! kro's SimpleSchema writes them, expanded into the structural OpenAPI v3 schema the API
//! server takes. Pure: text in, schema or a located error out.
//!
//! A field is a line `TYPE | MARKER=VALUE ...` or a mapping of fields (an object):
//!
//! - types: `string integer boolean number` (`float` is kro's spelling) and `object` (any
//!   fields, kept as given); `[]T`, `map[string]T`; a name from `types`; and the
//!   Kubernetes-native `quantity` (integer or string, `1Gi`, `500m`), `duration` (`30s`,
//!   `1h30m`), `dns-label`, `dns-subdomain` and `conditions` (the standard Condition list,
//!   keyed by `type`);
//! - kro's markers, with kro's meaning: `required default description enum minimum
//!   maximum pattern minLength maxLength minItems maxItems uniqueItems listType listMapKey
//!   immutable validation`; and Stencil's `minProperties maxProperties` (objects and maps),
//!   `transition="CEL with oldSelf"`, `monotonic=true`
//!   (the value may grow or stay, never shrink: numbers, quantities, version strings) and
//!   `message="..."` (the message of the rule marker before it);
//! - an object's own markers go on its `$self` line (`$self: required=true
//!   description="..." validation="self.min <= self.max"`);
//! - kro's defaulting rule: an object with a defaulted field and no required one defaults
//!   (kro writes `{}`; Stencil writes the fields' defaults out, which the API server
//!   stores alike and which lets the object's own rules check the default).
//!
//! Where kro is silent: `spec` is required when it has a required field (else an object
//! without `spec` would skip those checks); a `status` mapping gets `conditions` and
//! `observedGeneration`, which Stencil writes, unless it declares them; no `status` means
//! any status fields.

mod line;
mod markers;
mod reverse;
mod types;

pub use reverse::{Written, compact};

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use types::Kind;

/// An error in a compact schema, at the dotted path of the field (`spec.storage.size`,
/// `types.Person.name`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct CompactError {
    /// Where: `spec.…`, `status.…` or `types.…`.
    pub path: String,
    /// What is wrong and what to write instead.
    pub message: String,
}

/// The compact form of one version's schema: `spec`, `status` and `types`, each a YAML
/// mapping read into JSON.
#[derive(Debug, Clone, Copy, Default)]
pub struct Compact<'a> {
    /// The spec's fields.
    pub spec: Option<&'a Value>,
    /// The status's fields; `None` takes any status.
    pub status: Option<&'a Value>,
    /// Named types, each a field line or a mapping of fields.
    pub types: Option<&'a Value>,
}

/// `errors` in one line, each at its path.
pub fn describe(errors: &[CompactError]) -> String {
    errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

/// The `openAPIV3Schema` that `compact` expands to, or every bad field of it (at least
/// one), in the order they are met.
pub fn expand(compact: Compact<'_>) -> Result<Value, Vec<CompactError>> {
    let empty = Map::new();
    let types = match compact.types {
        None => &empty,
        Some(Value::Object(types)) => types,
        Some(_) => return Err(vec![error("types", "`types` is a mapping of names to types")]),
    };
    let mut expander = Expander {
        types,
        resolved: HashMap::new(),
        resolving: Vec::new(),
        errors: Vec::new(),
    };
    let mut root = json!({"type": "object", "properties": {}});
    if let Some(spec) = compact.spec {
        match expander.root(spec, "spec") {
            Ok(spec) => {
                if spec.required {
                    root["required"] = json!(["spec"]);
                }
                root["properties"]["spec"] = spec.schema;
            }
            Err(e) => expander.report(e),
        }
    }
    root["properties"]["status"] = match compact.status.map(|s| expander.root(s, "status")) {
        Some(status) => match status.and_then(|s| with_stencils_status(s.schema)) {
            Ok(status) => status,
            Err(e) => {
                expander.report(e);
                Value::Null
            }
        },
        None => json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    };
    if expander.errors.is_empty() {
        Ok(root)
    } else {
        Err(expander.errors)
    }
}

/// A field's schema, what the markers may do to it, and whether its object requires it.
struct Field {
    schema: Value,
    kind: Kind,
    required: bool,
}

/// Expands fields, resolving named types once each and refusing cycles among them.
struct Expander<'a> {
    types: &'a Map<String, Value>,
    resolved: HashMap<String, Field>,
    /// The named types being expanded, outermost first.
    resolving: Vec<String>,
    /// The bad fields met so far; an object goes on past a bad field to find the others.
    errors: Vec<CompactError>,
}

impl Expander<'_> {
    /// Records a bad field once (a named type used twice fails twice alike).
    fn report(&mut self, error: CompactError) {
        if !self.errors.contains(&error) {
            self.errors.push(error);
        }
    }

    /// `spec` or `status`: a mapping of fields; it is required when its `$self` says so
    /// or a field of it is.
    fn root(&mut self, value: &Value, path: &str) -> Result<Field, CompactError> {
        let Value::Object(fields) = value else {
            return Err(error(path, "a mapping of fields, one `name: type | markers` each"));
        };
        let mut field = self.object(fields, path)?;
        field.required |= field.schema.get("required").is_some();
        Ok(field)
    }

    fn field(&mut self, value: &Value, path: &str) -> Result<Field, CompactError> {
        match value {
            Value::String(line) => self.line(line, path),
            Value::Object(fields) => self.object(fields, path),
            other => Err(error(
                path,
                &format!("a field is a line `type | markers` or a mapping of fields, not {other}"),
            )),
        }
    }

    fn line(&mut self, text: &str, path: &str) -> Result<Field, CompactError> {
        let (ty, markers) = line::parse(text).map_err(|e| error(path, &e))?;
        let ty = ty.ok_or_else(|| error(path, "a field line starts with its type: `string | required=true`"))?;
        let Field { schema, kind, required } = self.type_of(&ty, path)?;
        let mut schema = into_map(schema);
        let marked = markers::apply(&mut schema, kind, &markers).map_err(|e| error(path, &e))?;
        Ok(Field {
            schema: Value::Object(schema),
            kind,
            required: required || marked,
        })
    }

    /// A mapping of fields: an object with those properties, its own markers from
    /// `$self`, and kro's defaulting rule.
    fn object(&mut self, fields: &Map<String, Value>, path: &str) -> Result<Field, CompactError> {
        let mut properties = Map::new();
        let mut required = Vec::new();
        let mut own = None;
        let mut failed = false;
        for (name, value) in fields {
            if name == "$self" {
                own = Some(value);
                continue;
            }
            match self.field(value, &format!("{path}.{name}")) {
                Ok(field) => {
                    if field.required {
                        required.push(Value::from(name.as_str()));
                    }
                    properties.insert(name.clone(), field.schema);
                }
                Err(e) => {
                    self.report(e);
                    failed = true;
                }
            }
        }
        if properties.is_empty() && !failed {
            return Err(error(
                path,
                "an object with no fields keeps none; write `object` to take any fields",
            ));
        }
        let defaulted = fields_default(&properties);
        let mut schema = into_map(json!({"type": "object", "properties": properties}));
        if !required.is_empty() {
            schema.insert("required".into(), Value::Array(required));
        }
        let own_required = match own {
            Some(line) => self.own_markers(&mut schema, line, path)?,
            None => false,
        };
        if let Some(default) = defaulted
            && !schema.contains_key("required")
            && !schema.contains_key("default")
        {
            schema.insert("default".into(), default);
        }
        Ok(Field {
            schema: Value::Object(schema),
            kind: Kind::Object,
            required: own_required,
        })
    }

    /// Applies an object's `$self` line (markers, after an optional `object |`).
    fn own_markers(&mut self, schema: &mut Map<String, Value>, line: &Value, path: &str) -> Result<bool, CompactError> {
        let path = format!("{path}.$self");
        let text = line.as_str().ok_or_else(|| {
            error(
                &path,
                "`$self` is a line of markers: `required=true description=\"...\"`",
            )
        })?;
        let (ty, markers) = line::parse(text).map_err(|e| error(&path, &e))?;
        if ty.is_some_and(|t| t != line::TypeExpr::Name("object".into())) {
            return Err(error(
                &path,
                "`$self` describes the object itself: its type is `object`",
            ));
        }
        markers::apply(schema, Kind::Object, &markers).map_err(|e| error(&path, &e))
    }

    fn type_of(&mut self, ty: &line::TypeExpr, path: &str) -> Result<Field, CompactError> {
        let (schema, kind) = match ty {
            line::TypeExpr::Name(name) => match types::builtin(name) {
                Some(built) => built,
                None => return self.named(name, path),
            },
            line::TypeExpr::List(item) => {
                let item = self.type_of(item, path)?.schema;
                (json!({"type": "array", "items": item}), Kind::List)
            }
            line::TypeExpr::Map(value) => {
                let value = self.type_of(value, path)?.schema;
                (json!({"type": "object", "additionalProperties": value}), Kind::Object)
            }
        };
        Ok(Field {
            schema,
            kind,
            required: false,
        })
    }

    /// The named type `name`, expanded where `types` defines it (so its errors point
    /// there), once.
    fn named(&mut self, name: &str, path: &str) -> Result<Field, CompactError> {
        if let Some(done) = self.resolved.get(name) {
            return Ok(Field {
                schema: done.schema.clone(),
                ..*done
            });
        }
        if let Some(start) = self.resolving.iter().position(|n| n == name) {
            let cycle = [&self.resolving[start..], &[name.to_string()]].concat().join(" → ");
            return Err(error(
                path,
                &format!("the types {cycle} contain each other; break the cycle"),
            ));
        }
        let Some(definition) = self.types.get(name) else {
            return Err(error(path, &unknown_type(name, self.types)));
        };
        self.resolving.push(name.to_string());
        let field = self.field(definition, &format!("types.{name}"));
        self.resolving.pop();
        let field = field?;
        let done = Field {
            schema: field.schema.clone(),
            ..field
        };
        self.resolved.insert(name.to_string(), done);
        Ok(field)
    }
}

/// kro's object default, written out: the object of its fields' defaults, or `None` when
/// no field has one. kro writes `{}`, which the API server fills with the same fields;
/// written out, the object's own rules can check it when the CRD is installed.
pub(crate) fn fields_default(properties: &Map<String, Value>) -> Option<Value> {
    let fields: Map<String, Value> = properties
        .iter()
        .filter_map(|(name, p)| Some((name.clone(), p.get("default")?.clone())))
        .collect();
    (!fields.is_empty()).then_some(Value::Object(fields))
}

fn unknown_type(name: &str, types: &Map<String, Value>) -> String {
    let named: Vec<&str> = types.keys().map(String::as_str).collect();
    let named = if named.is_empty() {
        String::from("`types` defines none")
    } else {
        format!("`types` defines {}", named.join(", "))
    };
    format!(
        "unknown type `{name}`: the built-in types are {}; {named}",
        types::BUILTIN_NAMES
    )
}

/// A status object with the fields Stencil writes on every parent, where the author did
/// not declare them; declared, they must hold what Stencil writes.
fn with_stencils_status(mut status: Value) -> Result<Value, CompactError> {
    let properties = status["properties"]
        .as_object_mut()
        .expect("a status object has properties");
    let conditions = properties.entry("conditions").or_insert_with(types::conditions);
    if *conditions != types::conditions() {
        return Err(error(
            "status.conditions",
            "Stencil writes the standard Condition list here: write `conditions: conditions`, or leave it out",
        ));
    }
    let generation = properties
        .entry("observedGeneration")
        .or_insert_with(|| json!({"type": "integer", "format": "int64"}));
    if generation.get("type") != Some(&json!("integer")) {
        return Err(error(
            "status.observedGeneration",
            "Stencil writes the parent's generation here: write `observedGeneration: integer`, or leave it out",
        ));
    }
    Ok(status)
}

fn into_map(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => unreachable!("every field schema is a JSON object"),
    }
}

fn error(path: &str, message: &str) -> CompactError {
    CompactError {
        path: path.to_string(),
        message: message.to_string(),
    }
}

#[cfg(test)]
mod tests;
