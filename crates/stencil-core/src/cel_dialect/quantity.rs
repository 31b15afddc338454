//! Kubernetes' CEL quantity library, as the API server and kro offer it: `quantity(s)`,
//! `isQuantity(s)`, and on a quantity `isInteger`, `asInteger`,
//! `asApproximateFloat`, `add`, `sub`, `isLessThan`, `isGreaterThan` and `compareTo`.
//! Values are exact ([`crate::quantity`]), so `1Ki` is `1024` and
//! `quantity('200M').compareTo(quantity('0.2G'))` is `0`. One difference: Kubernetes
//! keeps a binary quantity written with a fraction (`1.5Ki`) in a form whose `asInteger`
//! fails; here it is `1536`.

use std::cmp::Ordering;
use std::sync::Arc;

use cel::common::types::{INT_TYPE, STRING_TYPE, Type};
use cel::common::value::CowVal;
use cel::objects::Opaque;
use cel::{DeclarationError, Env, ExecutionError, Value};

use super::overload::{owned, values};
use crate::quantity::Quantity;

/// The name of the quantity type, as Kubernetes names it.
const QUANTITY: &str = "kubernetes.Quantity";

impl Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        QUANTITY
    }
}

type Overload = for<'b, 'v> fn(Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError>;

/// Registers the quantity functions on `env`.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    let quantity = || Type::new_opaque_type(QUANTITY);
    env.add_overload("quantity", "string_to_quantity", vec![STRING_TYPE], new)?;
    env.add_overload("isQuantity", "is_quantity_string", vec![STRING_TYPE], is_quantity)?;
    let unary: [(&str, Overload); 3] = [
        ("isInteger", is_integer),
        ("asInteger", as_integer),
        ("asApproximateFloat", as_approximate_float),
    ];
    for (name, op) in unary {
        env.add_member_overload(name, &format!("quantity_{name}"), quantity(), vec![], op)?;
    }
    let binary: [(&str, Overload); 5] = [
        ("add", add),
        ("sub", sub),
        ("isLessThan", is_less_than),
        ("isGreaterThan", is_greater_than),
        ("compareTo", compare_to),
    ];
    for (name, op) in binary {
        env.add_member_overload(name, &format!("quantity_{name}"), quantity(), vec![quantity()], op)?;
    }
    env.add_member_overload("add", "quantity_add_int", quantity(), vec![INT_TYPE], add)?;
    env.add_member_overload("sub", "quantity_sub_int", quantity(), vec![INT_TYPE], sub)
}

fn failed(function: &str, message: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, message)
}

fn quantity_value(q: Quantity) -> Value {
    Value::Opaque(Arc::new(q))
}

/// The receiver, and the operand as a quantity (an int is a whole quantity).
fn operands(function: &str, args: Vec<CowVal<'_, '_>>) -> Result<(Quantity, Quantity), ExecutionError> {
    let [left, right] = values(args)?;
    let as_quantity = |value: &Value| match value {
        Value::Int(i) => Some(Quantity::from(*i)),
        Value::Opaque(o) => o.downcast_ref::<Quantity>().copied(),
        _ => None,
    };
    as_quantity(&left)
        .zip(as_quantity(&right))
        .ok_or_else(|| failed(function, "expects quantities"))
}

fn receiver(function: &str, args: Vec<CowVal<'_, '_>>) -> Result<Quantity, ExecutionError> {
    let [value] = values(args)?;
    match &value {
        Value::Opaque(o) => o.downcast_ref::<Quantity>().copied(),
        _ => None,
    }
    .ok_or_else(|| failed(function, "expects a quantity"))
}

fn new<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [Value::String(text)] = values(args)? else {
        return Err(failed("quantity", "expects a string"));
    };
    let q = Quantity::parse(&text).ok_or_else(|| failed("quantity", format!("`{text}` is not a quantity")))?;
    owned(quantity_value(q))
}

fn is_quantity<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [value] = values(args)?;
    owned(Value::Bool(
        matches!(&value, Value::String(t) if Quantity::parse(t).is_some()),
    ))
}

fn is_integer<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let q = receiver("isInteger", args)?;
    owned(Value::Bool(q.as_integer().is_some()))
}

fn as_integer<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let q = receiver("asInteger", args)?;
    let integer = q
        .as_integer()
        .ok_or_else(|| failed("asInteger", "cannot convert value to integer"))?;
    owned(Value::Int(integer))
}

fn as_approximate_float<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let q = receiver("asApproximateFloat", args)?;
    owned(Value::Float(q.as_f64()))
}

fn add<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = operands("add", args)?;
    let sum = a.plus(&b).ok_or_else(|| failed("add", "the sum is out of range"))?;
    owned(quantity_value(sum))
}

fn sub<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = operands("sub", args)?;
    let difference = a
        .plus(&b.negated())
        .ok_or_else(|| failed("sub", "the difference is out of range"))?;
    owned(quantity_value(difference))
}

/// The order of the two operands of `function`.
fn ordering(function: &str, args: Vec<CowVal<'_, '_>>) -> Result<Ordering, ExecutionError> {
    let (a, b) = operands(function, args)?;
    a.compare(&b)
        .ok_or_else(|| failed(function, "the quantities are too far apart to compare"))
}

fn is_less_than<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    owned(Value::Bool(ordering("isLessThan", args)? == Ordering::Less))
}

fn is_greater_than<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    owned(Value::Bool(ordering("isGreaterThan", args)? == Ordering::Greater))
}

fn compare_to<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    owned(Value::Int(ordering("compareTo", args)? as i64))
}
