//! JSONPath rules (RFC 9535, via jsonpath-rust), compiled once and evaluated over JSON.
//!
//! The truth rule: a rule **holds** when it selects at least one node whose value is
//! neither `false` nor `null`. A filter on the root compares two fields of one document:
//! `$[?$.status.readyReplicas == $.spec.replicas]` selects the root's members when the
//! comparison is true and nothing otherwise.

use jsonpath_rust::parser::model::JpQuery;
use jsonpath_rust::parser::parse_json_path;
use jsonpath_rust::query::js_path_process;
use serde_json::Value;

/// A JSONPath rule that failed to parse, with its 1-based position in the rule text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid JSONPath `{rule}`: {message}")]
pub struct RuleError {
    /// The rule as written.
    pub rule: String,
    /// 1-based line inside the rule.
    pub line: u64,
    /// 1-based column inside the rule.
    pub column: u64,
    /// What the parser expected.
    pub message: String,
}

/// A compiled JSONPath rule.
#[derive(Debug, Clone)]
pub struct Rule {
    source: String,
    query: JpQuery,
}

impl Rule {
    /// Parses a rule.
    pub fn compile(source: &str) -> Result<Rule, RuleError> {
        let trimmed = source.trim();
        if !trimmed.starts_with('$') {
            return Err(RuleError {
                rule: source.to_string(),
                line: 1,
                column: 1,
                message: "a rule must start with `$`".to_string(),
            });
        }
        let query = parse_json_path(trimmed).map_err(|e| {
            let text = e.to_string();
            let (line, column) = pest_position(&text).unwrap_or((1, 1));
            RuleError {
                rule: source.to_string(),
                line,
                column,
                message: pest_message(&text),
            }
        })?;
        Ok(Rule {
            source: source.to_string(),
            query,
        })
    }

    /// The rule as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Every node the rule selects, in document order.
    pub fn select(&self, document: &Value) -> Vec<Value> {
        // A query that evaluates to a bare value instead of nodes selects nothing.
        js_path_process(&self.query, document)
            .map(|nodes| nodes.into_iter().map(|n| n.val().clone()).collect())
            .unwrap_or_default()
    }

    /// Whether the rule holds: at least one selected node is neither `false` nor `null`.
    pub fn holds(&self, document: &Value) -> bool {
        self.select(document)
            .iter()
            .any(|v| !matches!(v, Value::Null | Value::Bool(false)))
    }
}

/// The ` --> line:col` position in a pest error message.
fn pest_position(text: &str) -> Option<(u64, u64)> {
    let arrow = text.find("--> ")?;
    let rest = &text[arrow + 4..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == ':'))
        .unwrap_or(rest.len());
    let (line, column) = rest[..end].split_once(':')?;
    Some((line.parse().ok()?, column.parse().ok()?))
}

/// The expectation line of a pest error message, without its ASCII art.
fn pest_message(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|l| l.starts_with("= "))
        .map(|l| l.trim_start_matches("= ").to_string())
        .unwrap_or_else(|| text.lines().next().unwrap_or("syntax error").to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sts() -> Value {
        json!({"spec": {"replicas": 3}, "status": {"readyReplicas": 3, "available": false,
            "conditions": [{"type": "Ready", "status": "True"}]}})
    }

    #[test]
    fn a_condition_filter_holds_when_it_matches() {
        let rule = Rule::compile(r#"$.status.conditions[?@.type=="Ready" && @.status=="True"]"#).unwrap();
        assert!(rule.holds(&sts()));
        let rule = Rule::compile(r#"$.status.conditions[?@.type=="Ready" && @.status=="False"]"#).unwrap();
        assert!(!rule.holds(&sts()));
    }

    #[test]
    fn two_fields_compare_with_a_root_filter() {
        let rule = Rule::compile("$[?$.status.readyReplicas == $.spec.replicas]").unwrap();
        assert!(rule.holds(&sts()));
        let mut behind = sts();
        behind["status"]["readyReplicas"] = json!(2);
        assert!(!rule.holds(&behind));
    }

    #[test]
    fn false_and_null_and_nothing_do_not_hold() {
        assert!(!Rule::compile("$.status.available").unwrap().holds(&sts()));
        assert!(!Rule::compile("$.status.absent").unwrap().holds(&sts()));
        assert!(!Rule::compile("$.x").unwrap().holds(&json!({"x": null})));
        assert!(Rule::compile("$.status.readyReplicas").unwrap().holds(&sts()));
    }

    #[test]
    fn select_returns_values() {
        let rule = Rule::compile("$.status.readyReplicas").unwrap();
        assert_eq!(rule.select(&sts()), vec![json!(3)]);
    }

    #[test]
    fn a_syntax_error_has_a_position() {
        let err = Rule::compile("$.status[?@.x ==]").unwrap_err();
        assert!(err.column > 1, "{err:?}");
        let err = Rule::compile("status.ready").unwrap_err();
        assert!(err.message.contains("start with `$`"));
    }
}
