//! Kubernetes' CEL list library, as kro offers it: `sum`, `min`, `max`, `isSorted`,
//! `indexOf` and `lastIndexOf` on a list.

use std::cmp::Ordering;

use cel::common::types::{DYN_TYPE, LIST_TYPE};
use cel::common::value::CowVal;
use cel::{DeclarationError, Env, ExecutionError, Value};

use super::overload::{owned, values};

/// Registers the list functions on `env`.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload("sum", "list_sum", LIST_TYPE, vec![], sum)?;
    env.add_member_overload("min", "list_min", LIST_TYPE, vec![], min)?;
    env.add_member_overload("max", "list_max", LIST_TYPE, vec![], max)?;
    env.add_member_overload("isSorted", "list_is_sorted", LIST_TYPE, vec![], is_sorted)?;
    env.add_member_overload("indexOf", "list_index_of", LIST_TYPE, vec![DYN_TYPE], index_of)?;
    env.add_member_overload(
        "lastIndexOf",
        "list_last_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        last_index_of,
    )
}

fn items(function: &str, list: Value) -> Result<Vec<Value>, ExecutionError> {
    match list {
        Value::List(items) => Ok(items.to_vec()),
        _ => Err(ExecutionError::function_error(function, "expects a list")),
    }
}

/// The order of two elements; elements of different types have none.
fn order(function: &str, a: &Value, b: &Value) -> Result<Ordering, ExecutionError> {
    a.partial_cmp(b)
        .ok_or_else(|| ExecutionError::function_error(function, format!("cannot compare {a:?} with {b:?}")))
}

fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list] = values(args)?;
    let overflow = || ExecutionError::function_error("sum", "the sum overflows");
    let mut total = Value::Int(0);
    for (i, item) in items("sum", list)?.into_iter().enumerate() {
        total = match (total, item) {
            (Value::Int(a), Value::Int(b)) => Value::Int(a.checked_add(b).ok_or_else(overflow)?),
            (Value::Int(0), Value::UInt(b)) if i == 0 => Value::UInt(b),
            (Value::UInt(a), Value::UInt(b)) => Value::UInt(a.checked_add(b).ok_or_else(overflow)?),
            (Value::Int(0), Value::Float(b)) if i == 0 => Value::Float(b),
            (Value::Float(a), Value::Float(b)) => Value::Float(a + b),
            (_, other) => return Err(ExecutionError::function_error("sum", format!("cannot add {other:?}"))),
        };
    }
    owned(total)
}

/// The element `keep` prefers over every other, by their order.
fn extreme<'b, 'v>(
    function: &str,
    args: Vec<CowVal<'b, 'v>>,
    keep: Ordering,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list] = values(args)?;
    let mut best: Option<Value> = None;
    for item in items(function, list)? {
        best = match best {
            Some(b) if order(function, &item, &b)? != keep => Some(b),
            _ => Some(item),
        };
    }
    owned(best.ok_or_else(|| ExecutionError::function_error(function, format!("{function} called on empty list")))?)
}

fn min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme("min", args, Ordering::Less)
}

fn max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme("max", args, Ordering::Greater)
}

fn is_sorted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list] = values(args)?;
    let items = items("isSorted", list)?;
    for pair in items.windows(2) {
        if order("isSorted", &pair[0], &pair[1])? == Ordering::Greater {
            return owned(Value::Bool(false));
        }
    }
    owned(Value::Bool(true))
}

/// The index of the first (or, `last`, the last) element equal to the argument; -1 when none is.
fn position<'b, 'v>(function: &str, args: Vec<CowVal<'b, 'v>>, last: bool) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list, wanted] = values(args)?;
    let items = items(function, list)?;
    let found = if last {
        items.iter().rposition(|v| *v == wanted)
    } else {
        items.iter().position(|v| *v == wanted)
    };
    owned(Value::Int(found.map_or(-1, |i| i as i64)))
}

fn index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    position("indexOf", args, false)
}

fn last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    position("lastIndexOf", args, true)
}
