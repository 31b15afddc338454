//! Rules: a JSONPath (RFC 9535, via jsonpath-rust) or one minijinja expression in
//! `{{ }}`, compiled once and evaluated over JSON.
//!
//! The truth rule: a JSONPath rule **holds** when it selects at least one node whose
//! value is neither `false` nor `null`. A filter on the root compares two fields of one
//! document: `$[?$.status.readyReplicas == $.spec.replicas]` selects the root's members
//! when the comparison is true and nothing otherwise. RFC 9535's functions work inside
//! filters: `$[?length($.children.pods) == $.parent.spec.replicas]`.
//!
//! An expression rule sees the document's top-level keys as variables and holds when its
//! value is true in minijinja's sense (not false, none, undefined, zero, "" or empty). It
//! is how a rule counts and aggregates:
//! `{{ children.pods | selectattr("status.phase", "eq", "Succeeded") | list | length >= parent.spec.completions }}`.
//! Reading through something absent gives undefined, not an error, so a rule over a child
//! that does not exist yet is simply false, as a JSONPath over it selects nothing.

use std::sync::{Arc, LazyLock};

use jsonpath_rust::parser::model::JpQuery;
use jsonpath_rust::parser::parse_json_path;
use jsonpath_rust::query::js_path_process;
use minijinja::value::{Serde, Value as JinjaValue};
use minijinja::{Environment, Expression, UndefinedBehavior};
use serde_json::Value;

use super::position::line_column;
use super::templates::{template_message, template_position};

/// A rule that failed to parse, with its 1-based position in the rule text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid rule `{rule}`: {message}")]
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

/// An expression rule that failed while it was evaluated (out of fuel, a filter given the
/// wrong type, a function's own error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RuleFailure {
    /// What the engine said.
    pub message: String,
    /// 1-based line and column inside the rule, when the engine knows.
    pub position: Option<(u64, u64)>,
}

/// The environment expression rules run in: the templates' functions and fuel, with
/// undefined values chaining instead of failing.
static EXPRESSIONS: LazyLock<Environment<'static>> = LazyLock::new(|| {
    let mut env = super::templates::environment();
    env.set_undefined_behavior(UndefinedBehavior::Chainable);
    env
});

#[derive(Debug, Clone)]
enum Form {
    Path(JpQuery),
    /// The expression and the byte offset of its text inside the rule.
    Expression(Arc<Expression<'static, 'static>>, usize),
}

/// A compiled rule.
#[derive(Debug, Clone)]
pub struct Rule {
    source: String,
    name: String,
    form: Form,
}

impl Rule {
    /// Parses a rule: a JSONPath starting with `$`, or `{{ expression }}`.
    ///
    /// # Errors
    ///
    /// The rule is neither a JSONPath starting with `$` nor one expression in `{{ }}`, or it
    /// does not parse; the error has its line and column.
    pub fn compile(source: &str) -> Result<Rule, RuleError> {
        let trimmed = source.trim();
        let fail = |offset: usize, message: String| {
            let (line, column) = line_column(source, offset);
            RuleError {
                rule: source.to_string(),
                line,
                column,
                message,
            }
        };
        let form = if let Some(inner) = trimmed.strip_prefix("{{").and_then(|t| t.strip_suffix("}}")) {
            let start = source.find("{{").unwrap_or(0) + 2;
            let expression = EXPRESSIONS.compile_expression_owned(inner.to_string()).map_err(|e| {
                let at = e.range().map_or(0, |r| r.start);
                fail(start + at, template_message(&e))
            })?;
            Form::Expression(Arc::new(expression), start)
        } else if trimmed.starts_with('$') {
            Form::Path(parse_json_path(trimmed).map_err(|e| {
                let text = e.to_string();
                let (line, column) = pest_position(&text).unwrap_or((1, 1));
                RuleError {
                    rule: source.to_string(),
                    line,
                    column,
                    message: pest_message(&text),
                }
            })?)
        } else {
            return Err(fail(
                0,
                "a rule is a JSONPath that starts with `$`, or one minijinja expression in `{{ }}` (quote it in YAML)"
                    .to_string(),
            ));
        };
        Ok(Rule {
            source: source.to_string(),
            name: String::new(),
            form,
        })
    }

    /// The rule named after the field it was written in (`status.conditions[Complete].when`),
    /// as errors show it.
    pub fn named(mut self, name: String) -> Rule {
        self.name = name;
        self
    }

    /// The rule as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The field the rule was written in; empty when it was compiled on its own.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every node a JSONPath selects, in document order; an expression's value, or nothing
    /// when it is undefined or none.
    ///
    /// # Errors
    ///
    /// An expression fails while it is evaluated (see [`RuleFailure`]); a JSONPath never does.
    pub fn select(&self, document: &Value) -> Result<Vec<Value>, RuleFailure> {
        match &self.form {
            // A query that evaluates to a bare value instead of nodes selects nothing.
            Form::Path(query) => Ok(js_path_process(query, document)
                .map(|nodes| nodes.into_iter().map(|n| n.val().clone()).collect())
                .unwrap_or_default()),
            Form::Expression(expression, start) => {
                let value = self.evaluate(expression, *start, document)?;
                if value.is_undefined() || value.is_none() {
                    return Ok(Vec::new());
                }
                serde_json::to_value(&value).map(|v| vec![v]).map_err(|e| RuleFailure {
                    message: format!("the value is not JSON: {e}"),
                    position: None,
                })
            }
        }
    }

    /// Whether the rule holds (see the module documentation for the truth rule).
    ///
    /// # Errors
    ///
    /// As [`Rule::select`].
    pub fn holds(&self, document: &Value) -> Result<bool, RuleFailure> {
        match &self.form {
            Form::Path(_) => Ok(self
                .select(document)?
                .iter()
                .any(|v| !matches!(v, Value::Null | Value::Bool(false)))),
            Form::Expression(expression, start) => Ok(self.evaluate(expression, *start, document)?.is_true()),
        }
    }

    /// `expression`, whose text starts at byte `start` of the rule, over `document`.
    fn evaluate(
        &self,
        expression: &Expression<'_, '_>,
        start: usize,
        document: &Value,
    ) -> Result<JinjaValue, RuleFailure> {
        expression.eval(JinjaValue::from(Serde(document))).map_err(|e| {
            let inner = &self.source[start..];
            let position = template_position(&e, inner).map(|(line, column)| {
                let (l0, c0) = line_column(&self.source, start);
                if line == 1 {
                    (l0, c0 + column - 1)
                } else {
                    (l0 + line - 1, column)
                }
            });
            RuleFailure {
                message: template_message(&e),
                position,
            }
        })
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

    fn holds(rule: &str, document: &Value) -> bool {
        Rule::compile(rule).unwrap().holds(document).unwrap()
    }

    /// A Job-like parent with four Pods, three of them done.
    fn job() -> Value {
        let pod = |phase: &str| json!({"status": {"phase": phase}});
        json!({"parent": {"spec": {"completions": 3}},
            "children": {"pods": [pod("Succeeded"), pod("Running"), pod("Succeeded"), pod("Succeeded")]}})
    }

    #[test]
    fn a_condition_filter_holds_when_it_matches() {
        assert!(holds(
            r#"$.status.conditions[?@.type=="Ready" && @.status=="True"]"#,
            &sts()
        ));
        assert!(!holds(
            r#"$.status.conditions[?@.type=="Ready" && @.status=="False"]"#,
            &sts()
        ));
    }

    #[test]
    fn two_fields_compare_with_a_root_filter() {
        let rule = "$[?$.status.readyReplicas == $.spec.replicas]";
        assert!(holds(rule, &sts()));
        let mut behind = sts();
        behind["status"]["readyReplicas"] = json!(2);
        assert!(!holds(rule, &behind));
    }

    #[test]
    fn false_and_null_and_nothing_do_not_hold() {
        assert!(!holds("$.status.available", &sts()));
        assert!(!holds("$.status.absent", &sts()));
        assert!(!holds("$.x", &json!({"x": null})));
        assert!(holds("$.status.readyReplicas", &sts()));
    }

    #[test]
    fn rfc_9535_functions_count_inside_filters() {
        let doc = job();
        assert!(holds("$[?length($.children.pods) == 4]", &doc));
        assert!(holds(
            r#"$[?count($.children.pods[?@.status.phase == "Succeeded"]) == 3]"#,
            &doc
        ));
        assert!(!holds(
            r#"$[?count($.children.pods[?@.status.phase == "Failed"]) > 0]"#,
            &doc
        ));
    }

    #[test]
    fn an_expression_aggregates_and_compares_with_the_parent() {
        let doc = job();
        let done = r#"{{ children.pods | selectattr("status.phase", "eq", "Succeeded") | list | length >= parent.spec.completions }}"#;
        assert!(holds(done, &doc));
        let all = r#"{{ children.pods | rejectattr("status.phase", "eq", "Succeeded") | list | length == 0 }}"#;
        assert!(!holds(all, &doc));
        let sum = Rule::compile(
            "{{ children.pods | map(attribute='status.phase') | select('eq', 'Succeeded') | list | length }}",
        )
        .unwrap();
        assert_eq!(sum.select(&doc).unwrap(), vec![json!(3)]);
    }

    #[test]
    fn an_expression_over_something_absent_is_false_not_an_error() {
        let doc = json!({"children": {}});
        assert!(!holds("{{ children.db.status.readyReplicas >= 1 }}", &doc));
        assert!(!holds("{{ children.pods | default([]) | length }}", &doc));
        assert_eq!(
            Rule::compile("{{ children.db.status }}").unwrap().select(&doc).unwrap(),
            Vec::<Value>::new()
        );
    }

    #[test]
    fn an_expression_that_fails_says_where() {
        let rule = Rule::compile("{{ parent.name | regex_match('(') }}").unwrap();
        let err = rule.holds(&json!({"parent": {"name": "x"}})).unwrap_err();
        assert!(err.message.contains("invalid regular expression"), "{err}");
    }

    #[test]
    fn select_returns_values() {
        let rule = Rule::compile("$.status.readyReplicas").unwrap();
        assert_eq!(rule.select(&sts()).unwrap(), vec![json!(3)]);
    }

    #[test]
    fn a_syntax_error_has_a_position() {
        let err = Rule::compile("$.status[?@.x ==]").unwrap_err();
        assert!(err.column > 1, "{err:?}");
        let err = Rule::compile("status.ready").unwrap_err();
        assert!(err.message.contains("starts with `$`"), "{err:?}");
        let err = Rule::compile("{{ parent.spec.x >= }}").unwrap_err();
        assert!(err.column > 3, "{err:?}");
    }
}
