//! The built-in types of the compact schema and the OpenAPI v3 schema each expands to:
//! kro's `string integer boolean number float object`, and the Kubernetes-native
//! `quantity duration dns-label dns-subdomain conditions`.

use serde_json::{Value, json};

/// What a built-in type is for the markers: which of them apply to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A string (`string`, `duration`, `dns-label`, `dns-subdomain`).
    String,
    /// `integer`.
    Integer,
    /// `number` (`float` is its kro spelling).
    Number,
    /// `boolean`.
    Boolean,
    /// A quantity: an integer or a string such as `1Gi` or `500m`.
    Quantity,
    /// A list (`[]T`, `conditions`).
    List,
    /// An object: free-form (`object`), a map or one with fields.
    Object,
}

/// The Kubernetes quantity grammar (what the API server's `resource.Quantity` parses).
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// A Go duration as `metav1.Duration` reads it (`30s`, `1h30m`, `250ms`).
pub const DURATION_PATTERN: &str = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$";

/// An RFC 1123 label (a Kubernetes name segment).
pub const DNS_LABEL_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

/// An RFC 1123 subdomain (most Kubernetes object names).
pub const DNS_SUBDOMAIN_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// The names [`builtin`] knows, for error messages.
pub const BUILTIN_NAMES: &str =
    "string, integer, boolean, number (or float), object, quantity, duration, dns-label, dns-subdomain, conditions";

/// The schema and kind of the built-in type `name`, or `None` when it is not one.
pub fn builtin(name: &str) -> Option<(Value, Kind)> {
    let built = match name {
        "string" => (json!({"type": "string"}), Kind::String),
        "integer" => (json!({"type": "integer"}), Kind::Integer),
        "number" | "float" => (json!({"type": "number"}), Kind::Number),
        "boolean" => (json!({"type": "boolean"}), Kind::Boolean),
        "object" => (
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
            Kind::Object,
        ),
        "quantity" => (
            json!({"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": true,
                "pattern": QUANTITY_PATTERN}),
            Kind::Quantity,
        ),
        "duration" => (json!({"type": "string", "pattern": DURATION_PATTERN}), Kind::String),
        "dns-label" => (
            json!({"type": "string", "maxLength": 63, "pattern": DNS_LABEL_PATTERN}),
            Kind::String,
        ),
        "dns-subdomain" => (
            json!({"type": "string", "maxLength": 253, "pattern": DNS_SUBDOMAIN_PATTERN}),
            Kind::String,
        ),
        "conditions" => (conditions(), Kind::List),
        _ => return None,
    };
    Some(built)
}

/// The standard Condition list, one per `type` (a list map keyed by it). `type` and
/// `status` are required; the rest carry `metav1.Condition`'s bounds.
pub fn conditions() -> Value {
    json!({
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "required": ["type", "status"],
            "properties": {
                "type": {"type": "string", "maxLength": 316},
                "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
                "lastTransitionTime": {"type": "string", "format": "date-time"},
                "reason": {"type": "string", "maxLength": 1024},
                "message": {"type": "string", "maxLength": 32768}
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_patterns_accept_what_kubernetes_accepts_and_refuse_the_rest() {
        let cases: [(&str, &[&str], &[&str]); 4] = [
            (
                QUANTITY_PATTERN,
                &["1Gi", "500m", "1", "1.5", "2e3", "+1Ki"],
                &["1GB", "Gi", "1 Gi", ""],
            ),
            (
                DURATION_PATTERN,
                &["30s", "1h30m", "250ms", "1.5h"],
                &["30", "1d", "h", "1h 30m"],
            ),
            (DNS_LABEL_PATTERN, &["web", "a-1", "0"], &["Web", "-a", "a-", "a.b"]),
            (DNS_SUBDOMAIN_PATTERN, &["a.b-c.d", "web"], &["a..b", ".a", "A.b"]),
        ];
        for (pattern, good, bad) in cases {
            let re = regex::Regex::new(pattern).unwrap();
            for g in good {
                assert!(re.is_match(g), "{pattern} should accept {g}");
            }
            for b in bad {
                assert!(!re.is_match(b), "{pattern} should refuse {b}");
            }
        }
    }

    #[test]
    fn float_is_kros_spelling_of_number() {
        assert_eq!(builtin("float"), builtin("number"));
        assert_eq!(builtin("Person"), None);
    }
}
