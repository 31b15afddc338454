//! CEL, Stencil's second expression dialect beside minijinja: a string holding `${...}`
//! segments, as kro writes them, parsed once and evaluated over a JSON context. A string
//! that is one `${...}` alone evaluates to the expression's value with its type (a list
//! stays a list); segments within other text are joined as strings.

mod kro;
mod list_functions;
mod overload;
mod quantity;
mod regex;

use std::collections::BTreeSet;
use std::sync::{Arc, LazyLock};

use serde_json::Value;

/// What went wrong in a CEL string, and where.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum CelError {
    /// A `${` without its closing `}`.
    #[error("column {column}: `${{` is never closed")]
    Unclosed {
        /// Where the `${` is, counting characters from 1.
        column: usize,
    },
    /// An expression that does not parse.
    #[error("column {column}: `{expression}` is not CEL: {message}")]
    Parse {
        /// Where the expression's `${` is, counting characters from 1.
        column: usize,
        /// The expression, without `${` and `}`.
        expression: String,
        /// The parser's word.
        message: String,
    },
    /// An expression that read a variable or a key that is not there: what a rule over
    /// an object that does not exist yet meets.
    #[error("`{expression}`: no `{name}`")]
    Missing {
        /// The expression, without `${` and `}`.
        expression: String,
        /// The name or key it read.
        name: String,
    },
    /// An expression that failed while evaluating.
    #[error("`{expression}` failed: {message}")]
    Evaluate {
        /// The expression, without `${` and `}`.
        expression: String,
        /// What failed.
        message: String,
    },
}

/// One piece of a CEL string.
#[derive(Debug)]
enum Part {
    Text(String),
    Expression { source: String, program: cel::Program },
}

/// A string with `${...}` segments, compiled.
#[derive(Debug)]
pub struct CelString {
    parts: Vec<Part>,
    /// The names its expressions read, so evaluation converts only those.
    variables: BTreeSet<String>,
}

/// The environment every expression compiles in: the standard library, its macros
/// (`has`, `all`, `exists`, `map`, `filter`), optional values (`.?`, `orValue`) and the
/// strings, lists, math and base64 extensions, and kro's own functions.
static ENV: LazyLock<Arc<cel::Env>> = LazyLock::new(|| {
    let mut env = cel::Env::stdlib();
    let extensions = [
        cel::extensions::strings,
        cel::extensions::lists,
        cel::extensions::math,
        cel::extensions::encoders,
        kro::extension,
        list_functions::extension,
        quantity::extension,
        regex::extension,
    ];
    for extension in extensions {
        env.add_extension(extension)
            .expect("the extensions declare distinct functions");
    }
    env.set_error_on_duplicate_map_keys(false);
    Arc::new(env)
});

/// Functions kro's environment offers that Stencil's does not: an expression that calls
/// one does not compile, rather than fail on every pass.
pub const NOT_OFFERED: [&str; 15] = [
    "timestamp",
    "duration",
    "url",
    "isURL",
    "ip",
    "isIP",
    "cidr",
    "isCIDR",
    "semver",
    "isSemver",
    "transformList",
    "transformMap",
    "transformMapEntry",
    "bind",
    "newCondition",
];

/// The namespaces of the environment's functions (`lists.range`, `json.marshal`): a
/// name an expression reads before one of them is a function's, not a variable's, so a
/// child of that name is reached as `children.<name>`.
const NAMESPACES: [&str; 8] = [
    "lists", "math", "base64", "hash", "random", "json", "strings", "optional",
];

/// Compiles every `${...}` segment of `text`; columns in errors count from 1.
pub fn parse(text: &str) -> Result<CelString, CelError> {
    let mut parts = Vec::new();
    let mut variables = BTreeSet::new();
    for (column, segment) in located_segments(text)? {
        let source = match segment {
            Segment::Text(text) => {
                parts.push(Part::Text(text));
                continue;
            }
            Segment::Expression(source) => source,
        };
        let fail = |message: String| CelError::Parse {
            column,
            expression: source.clone(),
            message,
        };
        let program = ENV.compile(&source).map_err(|e| fail(e.to_string()))?;
        let references = program.references();
        if let Some(name) = references.functions().into_iter().find(|f| NOT_OFFERED.contains(f)) {
            return Err(fail(format!("Stencil's CEL does not offer `{name}`")));
        }
        let read = references.variables().into_iter().filter(|v| !NAMESPACES.contains(v));
        variables.extend(read.map(str::to_string));
        parts.push(Part::Expression { source, program });
    }
    Ok(CelString { parts, variables })
}

/// One piece of a string with `${...}` segments.
#[derive(Debug, Clone, PartialEq)]
pub enum Segment {
    /// Text, as written.
    Text(String),
    /// An expression's source, without `${` and `}`, trimmed.
    Expression(String),
}

/// The pieces of `text`, unparsed.
///
/// # Errors
///
/// A `${` is never closed.
pub fn segments(text: &str) -> Result<Vec<Segment>, CelError> {
    Ok(located_segments(text)?.into_iter().map(|(_, s)| s).collect())
}

/// The pieces of `text`, each with the column (from 1) where it starts.
fn located_segments(text: &str) -> Result<Vec<(usize, Segment)>, CelError> {
    let mut segments = Vec::new();
    let mut rest = text;
    let mut offset = 0;
    while let Some(start) = rest.find("${") {
        if start > 0 {
            let column = text[..offset].chars().count() + 1;
            segments.push((column, Segment::Text(rest[..start].to_string())));
        }
        let body = &rest[start + 2..];
        let column = text[..offset + start].chars().count() + 1;
        let end = closing_brace(body).ok_or(CelError::Unclosed { column })?;
        segments.push((column, Segment::Expression(body[..end].trim().to_string())));
        offset += start + 2 + end + 1;
        rest = &body[end + 1..];
    }
    if !rest.is_empty() {
        segments.push((text[..offset].chars().count() + 1, Segment::Text(rest.to_string())));
    }
    Ok(segments)
}

/// Where the `}` that closes an expression is, skipping nested braces and string
/// literals.
fn closing_brace(body: &str) -> Option<usize> {
    let (mut depth, mut quote, mut escaped) = (0usize, None::<char>, false);
    for (i, c) in body.char_indices() {
        match (quote, c) {
            (Some(_), _) if escaped => escaped = false,
            (Some(_), '\\') => escaped = true,
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '{') => depth += 1,
            (None, '}') if depth == 0 => return Some(i),
            (None, '}') => depth -= 1,
            (None, _) => {}
        }
    }
    None
}

impl CelString {
    /// Whether the string is one `${...}` and nothing else.
    pub fn is_expression(&self) -> bool {
        matches!(self.parts.as_slice(), [Part::Expression { .. }])
    }

    /// The names its expressions read (a comprehension's own variables among them).
    pub fn variables(&self) -> impl Iterator<Item = &str> {
        self.variables.iter().map(String::as_str)
    }

    /// The string's value, each name its expressions read given by `variable` (a name it
    /// gives nothing for is not in scope); `None` when the string is one `${...}` whose
    /// value is `omit()`, which leaves out the field it is the value of.
    pub fn evaluate<'a>(&self, variable: impl Fn(&str) -> Option<&'a Value>) -> Result<Option<Value>, CelError> {
        let mut context = cel::Context::with_env(ENV.clone());
        for name in &self.variables {
            let Some(value) = variable(name) else { continue };
            context.add_variable_from_value(name.clone(), to_cel(value));
        }
        if let [Part::Expression { source, program }] = self.parts.as_slice() {
            let value = execute(source, program, &self.variables, &context)?;
            return match kro::is_omit(&value) {
                true => Ok(None),
                false => json(source, value).map(Some),
            };
        }
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(text) => out.push_str(text),
                Part::Expression { source, program } => {
                    match json(source, execute(source, program, &self.variables, &context)?)? {
                        Value::String(s) => out.push_str(&s),
                        other => out.push_str(&other.to_string()),
                    }
                }
            }
        }
        Ok(Some(Value::String(out)))
    }
}

/// `json` as a CEL value, an integer as an `int` as Kubernetes' objects hold it (a
/// `uint` only past `int`'s range), so `replicas * 2` is arithmetic on two ints.
fn to_cel(json: &Value) -> cel::Value {
    match json {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => cel::Value::Int(i),
            (None, Some(u)) => cel::Value::UInt(u),
            _ => cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(items) => cel::Value::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(members) => {
            let map: std::collections::HashMap<cel::objects::Key, cel::Value> = members
                .iter()
                .map(|(k, v)| (cel::objects::Key::String(Arc::new(k.clone())), to_cel(v)))
                .collect();
            cel::Value::Map(cel::objects::Map { map: Arc::new(map) })
        }
    }
}

/// Runs one program. A name that is not there is [`CelError::Missing`] when the
/// expression reads it as a variable or a key; a function that is not there is an error.
fn execute(
    source: &str,
    program: &cel::Program,
    variables: &BTreeSet<String>,
    context: &cel::Context,
) -> Result<cel::Value, CelError> {
    let missing = |name: &str| CelError::Missing {
        expression: source.to_string(),
        name: name.to_string(),
    };
    program.execute(context).map_err(|e| match e {
        cel::ExecutionError::NoSuchKey(name) => missing(&name),
        cel::ExecutionError::UndeclaredReference(name) if variables.contains(name.as_str()) => missing(&name),
        cel::ExecutionError::UndeclaredReference(name) => {
            evaluate_error(source, format!("Stencil's CEL has no function `{name}`"))
        }
        other => evaluate_error(source, other.to_string()),
    })
}

/// `value` as JSON, a whole double written as an integer as Go writes it, so that an
/// integer field gets an integer, and a map's keys sorted, so the same value is written
/// the same way on every pass; `omit()` anywhere but a field's whole value fails.
fn json(source: &str, value: cel::Value) -> Result<Value, CelError> {
    if kro::holds_omit(&value) {
        return Err(evaluate_error(
            source,
            "omit() must be the whole value of a field".to_string(),
        ));
    }
    let json = value.json().map_err(|e| evaluate_error(source, e.to_string()))?;
    Ok(normalised(json))
}

fn normalised(json: Value) -> Value {
    match json {
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < i64::MAX as f64 => Value::from(f as i64),
            _ => Value::Number(n),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(normalised).collect()),
        Value::Object(members) => {
            let mut members: Vec<(String, Value)> = members.into_iter().collect();
            members.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(members.into_iter().map(|(k, v)| (k, normalised(v))).collect())
        }
        other => other,
    }
}

fn evaluate_error(source: &str, message: String) -> CelError {
    CelError::Evaluate {
        expression: source.to_string(),
        message,
    }
}

#[cfg(test)]
mod tests;
