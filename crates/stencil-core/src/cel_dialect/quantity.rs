//! Kubernetes' CEL quantity library, as the API server and kro offer it: `quantity(s)`,
//! `isQuantity(s)`, and on a quantity `isInteger`, `asInteger`,
//! `asApproximateFloat`, `add`, `sub`, `isLessThan`, `isGreaterThan` and `compareTo`.
//! Values are exact, a decimal mantissa and a power of ten, so `1Ki` is `1024` and
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

/// The name of the quantity type, as Kubernetes names it.
const QUANTITY: &str = "kubernetes.Quantity";

/// A quantity: `mantissa × 10^exponent`.
#[derive(Debug, Clone, Copy)]
struct Quantity {
    mantissa: i128,
    exponent: i32,
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.compare(other) == Some(Ordering::Equal)
    }
}

impl Eq for Quantity {}

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

impl Quantity {
    /// Parses Kubernetes' quantity syntax: a signed decimal number, then a binary suffix
    /// (`Ki` to `Ei`), a decimal one (`n`, `u`, `m`, `k`, `M` to `E`) or an exponent
    /// (`e3`, `E-3`). As in Kubernetes, a missing number (`Mi`, `-`) is zero.
    fn parse(text: &str) -> Option<Quantity> {
        if text.is_empty() {
            return None;
        }
        let split = text
            .find(|c: char| !(c.is_ascii_digit() || matches!(c, '+' | '-' | '.')))
            .unwrap_or(text.len());
        let (number, suffix) = text.split_at(split);
        let (negative, number) = match number.as_bytes().first() {
            Some(b'-') => (true, &number[1..]),
            Some(b'+') => (false, &number[1..]),
            _ => (false, number),
        };
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        let digits = format!("{whole}{fraction}");
        if !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let mantissa: i128 = if digits.is_empty() { 0 } else { digits.parse().ok()? };
        let exponent = -i32::try_from(fraction.len()).ok()?;
        let number = Quantity {
            mantissa: if negative { -mantissa } else { mantissa },
            exponent,
        };
        number.scaled(suffix)
    }

    /// The number multiplied by what `suffix` means.
    fn scaled(self, suffix: &str) -> Option<Quantity> {
        let binary = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
        if let Some(power) = binary.iter().position(|s| *s == suffix) {
            let factor = 1024i128.checked_pow(power as u32 + 1)?;
            return Some(Quantity {
                mantissa: self.mantissa.checked_mul(factor)?,
                ..self
            });
        }
        let decimal = match suffix {
            "n" => -9,
            "u" => -6,
            "m" => -3,
            "" => 0,
            "k" => 3,
            "M" => 6,
            "G" => 9,
            "T" => 12,
            "P" => 15,
            "E" => 18,
            _ => {
                let exponent = suffix.strip_prefix(['e', 'E'])?;
                let exponent = exponent.strip_prefix('+').unwrap_or(exponent);
                exponent.parse::<i32>().ok().filter(|e| e.abs() <= 1000)?
            }
        };
        Some(Quantity {
            exponent: self.exponent.checked_add(decimal)?,
            ..self
        })
    }

    /// Both mantissas at the smaller exponent, if they fit.
    fn aligned(&self, other: &Quantity) -> Option<(i128, i128, i32)> {
        let exponent = self.exponent.min(other.exponent);
        let at = |q: &Quantity| {
            let shift = u32::try_from(q.exponent - exponent).ok()?;
            q.mantissa.checked_mul(10i128.checked_pow(shift)?)
        };
        Some((at(self)?, at(other)?, exponent))
    }

    fn compare(&self, other: &Quantity) -> Option<Ordering> {
        let (a, b, _) = self.aligned(other)?;
        Some(a.cmp(&b))
    }

    fn as_integer(&self) -> Option<i64> {
        let (value, one, _) = self.aligned(&Quantity {
            mantissa: 1,
            exponent: 0,
        })?;
        (value % one == 0).then(|| i64::try_from(value / one).ok()).flatten()
    }

    fn plus(&self, other: &Quantity) -> Option<Quantity> {
        let (a, b, exponent) = self.aligned(other)?;
        Some(Quantity {
            mantissa: a.checked_add(b)?,
            exponent,
        })
    }
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
        Value::Int(i) => Some(Quantity {
            mantissa: i128::from(*i),
            exponent: 0,
        }),
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
    owned(Value::Float(q.mantissa as f64 * 10f64.powi(q.exponent)))
}

fn add<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = operands("add", args)?;
    let sum = a.plus(&b).ok_or_else(|| failed("add", "the sum is out of range"))?;
    owned(quantity_value(sum))
}

fn sub<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = operands("sub", args)?;
    let negated = Quantity {
        mantissa: -b.mantissa,
        ..b
    };
    let difference = a
        .plus(&negated)
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
