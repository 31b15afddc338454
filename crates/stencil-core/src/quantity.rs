//! Kubernetes quantities (`500m`, `1Gi`, `1e3`), exactly: a decimal mantissa and a power
//! of ten, so `1Ki` is `1024` and `200M` equals `0.2G`. One parser serves the CEL
//! quantity library, the minijinja `quantity` function and the no-op check: the API
//! server stores a quantity in canonical form (`cpu: 1000m` reads back as `"1"`,
//! `1024Mi` as `1Gi`), so a template's quantity is compared with the live one by what it
//! means, not by how it is written; otherwise such a template would cost a write on
//! every pass.

use std::cmp::Ordering;

/// A quantity: `mantissa × 10^exponent`.
#[derive(Debug, Clone, Copy)]
pub struct Quantity {
    mantissa: i128,
    exponent: i32,
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.compare(other) == Some(Ordering::Equal)
    }
}

impl Eq for Quantity {}

impl From<i64> for Quantity {
    fn from(whole: i64) -> Quantity {
        Quantity {
            mantissa: i128::from(whole),
            exponent: 0,
        }
    }
}

impl Quantity {
    /// Parses Kubernetes' quantity syntax: a signed decimal number, then a binary suffix
    /// (`Ki` to `Ei`), a decimal one (`n`, `u`, `m`, `k`, `M` to `E`) or an exponent
    /// (`e3`, `E-3`). As in Kubernetes, a missing number (`Mi`, `-`) is zero.
    pub fn parse(text: &str) -> Option<Quantity> {
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
        let mut mantissa: i128 = 0;
        for b in whole.bytes().chain(fraction.bytes()) {
            if !b.is_ascii_digit() {
                return None;
            }
            mantissa = mantissa.checked_mul(10)?.checked_add(i128::from(b - b'0'))?;
        }
        let number = Quantity {
            mantissa: if negative { -mantissa } else { mantissa },
            exponent: -i32::try_from(fraction.len()).ok()?,
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

    /// The order of two quantities; `None` when they are too far apart to align.
    pub fn compare(&self, other: &Quantity) -> Option<Ordering> {
        let (a, b, _) = self.aligned(other)?;
        Some(a.cmp(&b))
    }

    /// The quantity as a whole number, when it is one.
    pub fn as_integer(&self) -> Option<i64> {
        let (value, one, _) = self.aligned(&Quantity::from(1))?;
        (value % one == 0).then(|| i64::try_from(value / one).ok()).flatten()
    }

    /// The quantity as the nearest float.
    pub fn as_f64(&self) -> f64 {
        self.mantissa as f64 * 10f64.powi(self.exponent)
    }

    /// The sum of two quantities, if it fits.
    pub fn plus(&self, other: &Quantity) -> Option<Quantity> {
        let (a, b, exponent) = self.aligned(other)?;
        Some(Quantity {
            mantissa: a.checked_add(b)?,
            exponent,
        })
    }

    /// The quantity with its sign flipped.
    pub fn negated(&self) -> Quantity {
        Quantity {
            mantissa: -self.mantissa,
            ..*self
        }
    }
}

/// Whether `live` and `desired` are the same quantity written two ways. Both must parse
/// as quantities (a number in `desired` is one too).
pub fn same(live: &str, desired: &serde_json::Value) -> bool {
    let desired = match desired {
        serde_json::Value::String(s) => Quantity::parse(s),
        serde_json::Value::Number(n) => Quantity::parse(&n.to_string()),
        _ => None,
    };
    matches!((Quantity::parse(live), desired), (Some(a), Some(b)) if a == b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_forms_are_the_same_quantity() {
        for (live, desired) in [
            ("1", json!("1000m")),
            ("1Gi", json!("1024Mi")),
            ("500m", json!("0.5")),
            ("1k", json!("1e3")),
            ("2", json!(2)),
            ("1500m", json!(1.5)),
            ("100Mi", json!("104857600")),
            ("-1", json!("-1000m")),
        ] {
            assert!(same(live, &desired), "{live} vs {desired}");
        }
    }

    #[test]
    fn values_are_exact() {
        let q = |s: &str| Quantity::parse(s).unwrap();
        assert_eq!(q("200M"), q("0.2G"));
        assert_eq!(q("1.5Ki").as_integer(), Some(1536));
        assert_eq!(q("1m").as_integer(), None);
        assert_eq!(q("100Ei").compare(&q("99Ei")), Some(std::cmp::Ordering::Greater));
        assert!(same("123456789012345678", &json!("123456789012345678000m")));
        assert!(!same("123456789012345678", &json!("123456789012345679")));
        assert_eq!(
            q("-").as_integer(),
            Some(0),
            "a missing number is zero, as in Kubernetes"
        );
    }

    #[test]
    fn different_values_and_non_quantities_are_not() {
        for (live, desired) in [
            ("1", json!("1001m")),
            ("1Gi", json!("1G")),
            ("1Gi", json!("1Gib")),
            ("abc", json!("abc")),
            ("1.2.3", json!("1.2.3")),
            ("", json!("")),
            ("1", json!(true)),
            ("e3", json!("1e3")),
            ("1e", json!("1")),
        ] {
            assert!(!same(live, &desired), "{live} vs {desired}");
        }
    }
}
