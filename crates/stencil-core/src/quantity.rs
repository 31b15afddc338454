//! Kubernetes quantities (`500m`, `1Gi`, `1e3`) compared by value. The API server stores
//! a quantity in canonical form (`cpu: 1000m` reads back as `"1"`, `1024Mi` as `1Gi`), so
//! the no-op check compares a template's quantity with the live one by what it means,
//! not by how it is written; otherwise such a template would cost a write on every pass.

/// Whether `live` and `desired` are the same quantity written two ways. Both must parse
/// as quantities (a number in `desired` is one too); values are compared to one part in
/// 10^12, far below what any resource field distinguishes.
pub fn same(live: &str, desired: &serde_json::Value) -> bool {
    let desired = match desired {
        serde_json::Value::String(s) => parse(s),
        serde_json::Value::Number(n) => n.as_f64(),
        _ => None,
    };
    match (parse(live), desired) {
        (Some(a), Some(b)) => a == b || (a - b).abs() <= 1e-12 * a.abs().max(b.abs()),
        _ => false,
    }
}

/// A quantity's value, `None` when `text` is not one: a signed decimal number, then a
/// binary (`Ki`..`Ei`) or decimal (`n`, `u`, `m`, `k`, `M`..`E`) suffix or an exponent
/// (`e3`, `E-2`).
pub fn parse(text: &str) -> Option<f64> {
    let end = text
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || c == '.' || ((c == '+' || c == '-') && i == 0)))
        .map_or(text.len(), |(i, _)| i);
    let (number, suffix) = text.split_at(end);
    if !number.bytes().any(|b| b.is_ascii_digit()) || number.matches('.').count() > 1 {
        return None;
    }
    let value: f64 = number.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        exponent => {
            let digits = exponent.strip_prefix(['e', 'E'])?;
            let unsigned = digits.strip_prefix(['+', '-']).unwrap_or(digits);
            if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            10f64.powi(digits.parse().ok()?)
        }
    };
    Some(value * scale)
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
