//! Helpers for overloads written over whole values rather than the interpreter's own
//! argument types: the arguments converted to `Value`s, the result converted back.

use cel::common::value::{CowVal, Val};
use cel::{ExecutionError, Value};

/// The `N` arguments of an overload as values.
pub fn values<const N: usize>(args: Vec<CowVal<'_, '_>>) -> Result<[Value; N], ExecutionError> {
    let count = args.len();
    let values = args
        .iter()
        .map(|arg| Value::try_from(arg.as_ref()))
        .collect::<Result<Vec<_>, _>>()?;
    values
        .try_into()
        .map_err(|_| ExecutionError::invalid_argument_count(N, count))
}

/// `value` as an overload's result.
pub fn owned<'b, 'v>(value: Value) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let val: Box<dyn Val> = value.try_into()?;
    Ok(CowVal::Owned(val))
}
