//! kro's `json.marshal` and `json.unmarshal`, written as Go's `encoding/json` writes and
//! reads: keys sorted, no spaces, `<`, `>` and `&` escaped, every number read as a double.

use std::fmt::Write;

use cel::common::types::{CelString, DYN_TYPE, STRING_TYPE};
use cel::common::value::CowVal;
use cel::{DeclarationError, Env, ExecutionError, Value};

use crate::cel_dialect::overload::{owned, values};

/// Registers `json.marshal` and `json.unmarshal` on `env`.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload("json.marshal", "json.marshal_dyn", vec![DYN_TYPE], marshal)?;
    env.add_overload("json.unmarshal", "json.unmarshal_string", vec![STRING_TYPE], unmarshal)
}

fn marshal<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [value] = values(args)?;
    let json = value
        .json()
        .map_err(|e| ExecutionError::function_error("json.marshal", e))?;
    let mut out = String::new();
    write_go(&mut out, &json);
    Ok(CowVal::owned(CelString::from(out)))
}

fn unmarshal<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [Value::String(text)] = values(args)? else {
        return Err(ExecutionError::function_error(
            "json.unmarshal",
            "the argument must be a string",
        ));
    };
    let json: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| ExecutionError::function_error("json.unmarshal", format!("failed to parse JSON: {e}")))?;
    let value = cel::to_value(doubles(json)).map_err(|e| ExecutionError::function_error("json.unmarshal", e))?;
    owned(value)
}

/// `json` with every number a double, as Go reads JSON into an `any`.
fn doubles(json: serde_json::Value) -> serde_json::Value {
    use serde_json::Value as J;
    match json {
        J::Number(n) => n
            .as_f64()
            .map_or(J::Null, |f| serde_json::Number::from_f64(f).map_or(J::Null, J::Number)),
        J::Array(items) => J::Array(items.into_iter().map(doubles).collect()),
        J::Object(members) => J::Object(members.into_iter().map(|(k, v)| (k, doubles(v))).collect()),
        other => other,
    }
}

/// Writes `json` as Go's `json.Marshal` does.
fn write_go(out: &mut String, json: &serde_json::Value) {
    use serde_json::Value as J;
    match json {
        J::Null => out.push_str("null"),
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => write_go_float(out, f),
            _ => out.push_str(&n.to_string()),
        },
        J::String(s) => write_go_string(out, s),
        J::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go(out, item);
            }
            out.push(']');
        }
        J::Object(members) => {
            let mut keys: Vec<&String> = members.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_string(out, key);
                out.push(':');
                write_go(out, &members[key]);
            }
            out.push('}');
        }
    }
}

/// A double as Go writes it: the shortest decimal that reads back the same, with an
/// exponent only below 1e-6 or from 1e21 up, written `e+21` or `e-7`.
fn write_go_float(out: &mut String, f: f64) {
    let magnitude = f.abs();
    if magnitude != 0.0 && !(1e-6..1e21).contains(&magnitude) {
        let text = format!("{f:e}");
        match text.split_once('e') {
            Some((mantissa, exponent)) if !exponent.starts_with('-') => {
                let _ = write!(out, "{mantissa}e+{exponent}");
            }
            _ => out.push_str(&text),
        }
    } else {
        let _ = write!(out, "{f}");
    }
}

/// A string as Go writes it, HTML-safe: `<`, `>`, `&`, U+2028 and U+2029 escaped.
fn write_go_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
