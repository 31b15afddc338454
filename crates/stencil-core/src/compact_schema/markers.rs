//! What each marker of a field line does to the field's schema: kro's markers with kro's
//! meaning, and Stencil's `message`, `transition` and `monotonic`. A marker that does not
//! apply to the field's type is an error naming both, never ignored.

use serde_json::{Map, Value, json};

use super::line::Marker;
use super::types::Kind;

/// The markers a line may carry, for error messages.
const KNOWN: &str = "required, default, description, enum, minimum, maximum, pattern, minLength, maxLength, \
     minItems, maxItems, uniqueItems, listType, listMapKey, minProperties, maxProperties, immutable, validation, transition, monotonic, message";

/// Applies `markers` to `schema`, a field of `kind`; returns whether the field is
/// required in its object.
pub fn apply(schema: &mut Map<String, Value>, kind: Kind, markers: &[Marker]) -> Result<bool, String> {
    let mut required = false;
    for marker in markers {
        let Marker { key, value } = marker;
        let fail = |why: String| format!("{key}={value}: {why}");
        match key.as_str() {
            "required" => required = boolean(value).map_err(fail)?,
            "description" => {
                schema.insert("description".into(), value.as_str().into());
            }
            "default" => {
                schema.insert("default".into(), default(kind, value).map_err(fail)?);
            }
            "enum" => {
                schema.insert("enum".into(), enumeration(kind, value).map_err(fail)?);
            }
            "minimum" | "maximum" => bound(schema, kind, key, value).map_err(fail)?,
            "minLength" | "maxLength" | "pattern" => string_rule(schema, kind, key, value).map_err(fail)?,
            "minItems" | "maxItems" | "uniqueItems" | "listType" | "listMapKey" => {
                list_rule(schema, kind, key, value).map_err(fail)?
            }
            "minProperties" | "maxProperties" => {
                if kind != Kind::Object {
                    return Err(fail(format!("{key} applies to objects and maps")));
                }
                schema.insert(key.clone(), integer(value).map_err(fail)?.into());
            }
            "immutable" | "validation" | "transition" | "monotonic" | "message" => {
                cel_rule(schema, kind, key, value).map_err(fail)?
            }
            _ => return Err(format!("unknown marker `{key}`; the markers are {KNOWN}")),
        }
    }
    check(schema)?;
    Ok(required)
}

fn boolean(value: &str) -> Result<bool, String> {
    value.parse().map_err(|_| format!("`{value}` is not true or false"))
}

fn integer(value: &str) -> Result<i64, String> {
    value.parse().map_err(|_| format!("`{value}` is not an integer"))
}

fn number(value: &str) -> Result<Value, String> {
    if let Ok(i) = value.parse::<i64>() {
        return Ok(i.into());
    }
    let n: f64 = value.parse().map_err(|_| format!("`{value}` is not a number"))?;
    serde_json::Number::from_f64(n)
        .map(Value::Number)
        .ok_or_else(|| format!("`{value}` is not a finite number"))
}

/// The default `value` for a field of `kind`: a string as written, a number or boolean
/// parsed, a list or object as JSON.
fn default(kind: Kind, value: &str) -> Result<Value, String> {
    Ok(match kind {
        Kind::String => value.into(),
        Kind::Integer => integer(value)?.into(),
        Kind::Number => number(value)?,
        Kind::Boolean => boolean(value)?.into(),
        Kind::Quantity => value.parse::<i64>().map_or_else(|_| value.into(), Value::from),
        Kind::List | Kind::Object => {
            let parsed: Value =
                serde_json::from_str(value).map_err(|e| format!("a list or object default is JSON: {e}"))?;
            match (kind, &parsed) {
                (Kind::List, Value::Array(_)) | (Kind::Object, Value::Object(_)) => parsed,
                _ => {
                    return Err(format!(
                        "`{value}` is not a {}",
                        if kind == Kind::List { "list" } else { "object" }
                    ));
                }
            }
        }
    })
}

fn enumeration(kind: Kind, value: &str) -> Result<Value, String> {
    let values = value.split(',').map(str::trim);
    let parsed: Result<Vec<Value>, String> = match kind {
        Kind::String => values
            .map(|v| {
                if v.is_empty() {
                    Err("an empty enum value".to_string())
                } else {
                    Ok(v.into())
                }
            })
            .collect(),
        Kind::Integer => values.map(|v| integer(v).map(Value::from)).collect(),
        _ => Err("enum applies to strings and integers".into()),
    };
    Ok(Value::Array(parsed?))
}

fn bound(schema: &mut Map<String, Value>, kind: Kind, key: &str, value: &str) -> Result<(), String> {
    if !matches!(kind, Kind::Integer | Kind::Number) {
        return Err(format!("{key} applies to integers and numbers"));
    }
    schema.insert(key.into(), number(value)?);
    Ok(())
}

fn string_rule(schema: &mut Map<String, Value>, kind: Kind, key: &str, value: &str) -> Result<(), String> {
    if kind != Kind::String {
        return Err(format!("{key} applies to strings"));
    }
    let rule = if key == "pattern" {
        regex::Regex::new(value).map_err(|e| format!("not a regular expression: {e}"))?;
        value.into()
    } else {
        integer(value)?.into()
    };
    schema.insert(key.into(), rule);
    Ok(())
}

fn list_rule(schema: &mut Map<String, Value>, kind: Kind, key: &str, value: &str) -> Result<(), String> {
    if kind != Kind::List {
        return Err(format!("{key} applies to lists"));
    }
    match key {
        "minItems" | "maxItems" => {
            schema.insert(key.into(), integer(value)?.into());
        }
        // The API server refuses `uniqueItems: true`; a set is how a CRD says it.
        "uniqueItems" if boolean(value)? => list_type(schema, "set")?,
        "uniqueItems" => {}
        "listType" => match value {
            "atomic" | "set" | "map" => list_type(schema, value)?,
            _ => return Err("listType is atomic, set or map".into()),
        },
        _ => {
            let keys = schema.entry("x-kubernetes-list-map-keys").or_insert_with(|| json!([]));
            let keys = keys.as_array_mut().expect("list map keys are a list");
            if keys.iter().any(|k| k == value) {
                return Err("the key is named twice".into());
            }
            keys.push(value.into());
        }
    }
    Ok(())
}

fn list_type(schema: &mut Map<String, Value>, value: &str) -> Result<(), String> {
    match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some(set) if set != value => Err(format!(
            "the list is already a {set} (uniqueItems=true makes a set, listType=map a map)"
        )),
        _ => {
            schema.insert("x-kubernetes-list-type".into(), value.into());
            Ok(())
        }
    }
}

/// `x-kubernetes-validations`: `validation` and `transition` add a CEL rule as written,
/// `immutable` and `monotonic` the rule they stand for, `message` the message of the
/// rule before it.
fn cel_rule(schema: &mut Map<String, Value>, kind: Kind, key: &str, value: &str) -> Result<(), String> {
    let rules = schema.entry("x-kubernetes-validations").or_insert_with(|| json!([]));
    let rules = rules.as_array_mut().expect("validations are a list");
    let rule = match key {
        "message" => {
            let last = rules
                .last_mut()
                .ok_or("message follows the validation, transition, immutable or monotonic marker it explains")?;
            last["message"] = value.into();
            return Ok(());
        }
        "immutable" | "monotonic" if !boolean(value)? => return Ok(()),
        "immutable" => json!({"rule": "self == oldSelf", "message": "is immutable"}),
        "monotonic" => json!({"rule": only_grows(kind)?, "message": "may not decrease"}),
        _ if value.trim().is_empty() => return Err("the rule is empty".into()),
        _ => json!({"rule": value}),
    };
    rules.push(rule);
    Ok(())
}

/// The CEL rule that lets a value of `kind` grow or stay, never shrink: numbers by value,
/// quantities by amount, strings as versions (`16.4` or `v1.2.3`; a string that is not a
/// version is left to the field's pattern).
fn only_grows(kind: Kind) -> Result<&'static str, String> {
    Ok(match kind {
        Kind::Integer | Kind::Number => "self >= oldSelf",
        Kind::Quantity => "quantity(string(self)).compareTo(quantity(string(oldSelf))) >= 0",
        Kind::String => {
            "!isSemver(self, true) || !isSemver(oldSelf, true) || semver(self, true).compareTo(semver(oldSelf, true)) >= 0"
        }
        _ => return Err("monotonic applies to integers, numbers, quantities and version strings".into()),
    })
}

/// What holds between markers: list map keys need a map list, and a default meets the
/// field's own enum and pattern (the API server refuses a CRD whose default does not).
fn check(schema: &Map<String, Value>) -> Result<(), String> {
    if schema.contains_key("x-kubernetes-list-map-keys")
        && schema.get("x-kubernetes-list-type").and_then(Value::as_str) != Some("map")
    {
        return Err("listMapKey needs listType=map".into());
    }
    let Some(default) = schema.get("default") else {
        return Ok(());
    };
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(default)
    {
        return Err(format!(
            "the default {default} is not one of the enum {}",
            Value::Array(allowed.clone())
        ));
    }
    if let (Some(pattern), Some(text)) = (schema.get("pattern").and_then(Value::as_str), default.as_str())
        && !regex::Regex::new(pattern).is_ok_and(|re| re.is_match(text))
    {
        return Err(format!("the default \"{text}\" does not match the pattern {pattern}"));
    }
    Ok(())
}
