//! Kubernetes' CEL regex library: `s.find(re)`, the first match or `''`, and
//! `s.findAll(re)` and `s.findAll(re, n)`, the matches (at most `n` when `n` is not
//! negative). The syntax is the `regex` crate's, which is RE2's, as Go's is.

use cel::common::types::{INT_TYPE, STRING_TYPE};
use cel::common::value::CowVal;
use cel::{DeclarationError, Env, ExecutionError, Value};

use super::overload::{owned, values};

/// Registers `find` and `findAll` on `env`.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload("find", "string_find_string", STRING_TYPE, vec![STRING_TYPE], find)?;
    env.add_member_overload(
        "findAll",
        "string_find_all_string",
        STRING_TYPE,
        vec![STRING_TYPE],
        find_all,
    )?;
    env.add_member_overload(
        "findAll",
        "string_find_all_string_int",
        STRING_TYPE,
        vec![STRING_TYPE, INT_TYPE],
        find_all_n,
    )
}

fn compiled(function: &str, pattern: &str) -> Result<regex::Regex, ExecutionError> {
    regex::Regex::new(pattern).map_err(|e| ExecutionError::function_error(function, format!("illegal regex: {e}")))
}

fn strings(function: &str, text: &Value, pattern: &Value) -> Result<(String, regex::Regex), ExecutionError> {
    match (text, pattern) {
        (Value::String(text), Value::String(pattern)) => Ok((text.to_string(), compiled(function, pattern)?)),
        _ => Err(ExecutionError::function_error(function, "expects strings")),
    }
}

fn find<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [text, pattern] = values(args)?;
    let (text, re) = strings("find", &text, &pattern)?;
    let found = re.find(&text).map_or("", |m| m.as_str()).to_string();
    owned(Value::String(found.into()))
}

fn find_all<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [text, pattern] = values(args)?;
    matches(&text, &pattern, -1)
}

fn find_all_n<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [text, pattern, Value::Int(limit)] = values(args)? else {
        return Err(ExecutionError::function_error("findAll", "expects an int limit"));
    };
    matches(&text, &pattern, limit)
}

/// The matches of `pattern` in `text`, all when `limit` is negative.
fn matches<'b, 'v>(text: &Value, pattern: &Value, limit: i64) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (text, re) = strings("findAll", text, pattern)?;
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let found: Vec<Value> = re
        .find_iter(&text)
        .take(limit)
        .map(|m| Value::String(m.as_str().to_string().into()))
        .collect();
    owned(Value::List(found.into()))
}
