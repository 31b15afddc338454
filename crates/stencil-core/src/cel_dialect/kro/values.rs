//! kro's functions over whole values: `merge` and `deepMerge` on maps, the
//! `lists.setAtIndex`, `insertAtIndex` and `removeAtIndex` copies, and `omit()`, the
//! value that removes the field it is written in.

use std::collections::HashMap;
use std::sync::Arc;

use cel::common::types::{DYN_TYPE, INT_TYPE, LIST_TYPE, MAP_TYPE};
use cel::common::value::CowVal;
use cel::objects::{Key, Map, Opaque};
use cel::{DeclarationError, Env, ExecutionError, Value};

use crate::cel_dialect::overload::{owned, values};

/// Registers the functions on `env`.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload("merge", "map_merge", MAP_TYPE, vec![MAP_TYPE], merge)?;
    env.add_member_overload("deepMerge", "map_deepmerge_map", MAP_TYPE, vec![MAP_TYPE], deep_merge)?;
    env.add_overload(
        "lists.setAtIndex",
        "lists.setAtIndex_list_int_T",
        vec![LIST_TYPE, INT_TYPE, DYN_TYPE],
        set_at_index,
    )?;
    env.add_overload(
        "lists.insertAtIndex",
        "lists.insertAtIndex_list_int_T",
        vec![LIST_TYPE, INT_TYPE, DYN_TYPE],
        insert_at_index,
    )?;
    env.add_overload(
        "lists.removeAtIndex",
        "lists.removeAtIndex_list_int",
        vec![LIST_TYPE, INT_TYPE],
        remove_at_index,
    )?;
    env.add_overload("omit", "omit_void", vec![], omit)
}

/// `a.merge(b)`: `b`'s entries, and `a`'s whose keys `b` lacks.
fn merge<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [Value::Map(left), Value::Map(right)] = values(args)? else {
        return Err(ExecutionError::function_error("merge", "both sides must be maps"));
    };
    let mut merged: HashMap<Key, Value> = (*left.map).clone();
    merged.extend(right.map.iter().map(|(k, v)| (k.clone(), v.clone())));
    owned(Value::Map(Map { map: Arc::new(merged) }))
}

/// `a.deepMerge(b)`: as `merge`, but where both hold a map under one key, those maps
/// are merged the same way.
fn deep_merge<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [Value::Map(left), Value::Map(right)] = values(args)? else {
        return Err(ExecutionError::function_error("deepMerge", "both sides must be maps"));
    };
    owned(Value::Map(deep_merged(&left, &right)))
}

fn deep_merged(left: &Map, right: &Map) -> Map {
    let mut merged: HashMap<Key, Value> = (*left.map).clone();
    for (key, value) in right.map.iter() {
        let value = match (merged.get(key), value) {
            (Some(Value::Map(inner)), Value::Map(other)) => Value::Map(deep_merged(inner, other)),
            _ => value.clone(),
        };
        merged.insert(key.clone(), value);
    }
    Map { map: Arc::new(merged) }
}

/// A list argument and an index argument, the index checked against `0..len + extra`.
fn list_and_index(
    function: &str,
    list: Value,
    index: Value,
    extra: usize,
) -> Result<(Vec<Value>, usize), ExecutionError> {
    let (Value::List(list), Value::Int(index)) = (list, index) else {
        return Err(ExecutionError::function_error(function, "expects a list and an int"));
    };
    let len = list.len();
    let index = usize::try_from(index)
        .ok()
        .filter(|i| *i < len + extra)
        .ok_or_else(|| {
            let close = if extra == 0 { ")" } else { "]" };
            ExecutionError::function_error(function, format!("index {index} out of bounds [0, {len}{close}"))
        })?;
    Ok((Arc::unwrap_or_clone(list), index))
}

fn set_at_index<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list, index, value] = values(args)?;
    let (mut items, index) = list_and_index("lists.setAtIndex", list, index, 0)?;
    items[index] = value;
    owned(Value::List(Arc::new(items)))
}

fn insert_at_index<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list, index, value] = values(args)?;
    let (mut items, index) = list_and_index("lists.insertAtIndex", list, index, 1)?;
    items.insert(index, value);
    owned(Value::List(Arc::new(items)))
}

fn remove_at_index<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list, index] = values(args)?;
    let (mut items, index) = list_and_index("lists.removeAtIndex", list, index, 0)?;
    items.remove(index);
    owned(Value::List(Arc::new(items)))
}

/// The value of `omit()`: a field whose whole value it is is left out of the object.
#[derive(Debug, PartialEq, Eq)]
struct Omit;

impl Opaque for Omit {
    fn runtime_type_name(&self) -> &str {
        "kro.omit"
    }
}

fn omit<'b, 'v>(_: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    owned(Value::Opaque(Arc::new(Omit)))
}

/// Whether `value` is `omit()`'s.
pub fn is_omit(value: &Value) -> bool {
    matches!(value, Value::Opaque(o) if o.downcast_ref::<Omit>().is_some())
}

/// Whether `omit()`'s value is `value` or anywhere within it.
pub fn holds_omit(value: &Value) -> bool {
    match value {
        Value::List(items) => items.iter().any(holds_omit),
        Value::Map(map) => map.map.values().any(holds_omit),
        other => is_omit(other),
    }
}
