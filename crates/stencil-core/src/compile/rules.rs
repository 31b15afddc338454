//! Rules: a JSONPath (RFC 9535, via jsonpath-rust), one minijinja expression in `{{ }}`
//! or one CEL expression in `${ }`, compiled once and evaluated over JSON.
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
//!
//! A CEL rule sees the document's top-level keys as variables too, and, as kro's
//! expressions do, each child and lookup by its own name and the parent as `schema`:
//! `${deployment.status.availableReplicas == schema.spec.replicas}`. A readiness rule
//! also sees the observed object as `self`, as `each` (kro's name for one object of a
//! collection) and by its child's name. It holds when its
//! value is `true`; another type is an error. Reading something absent selects nothing
//! and does not hold, as above.

use std::sync::{Arc, LazyLock};

use jsonpath_rust::parser::model::JpQuery;
use jsonpath_rust::parser::parse_json_path;
use jsonpath_rust::query::js_path_process;
use minijinja::value::{Serde, Value as JinjaValue};
use minijinja::{Environment, Expression, UndefinedBehavior};
use serde_json::Value;

use super::position::line_column;
use super::templates::{template_message, template_position};
use crate::cel_dialect::{self, CelError, CelString};

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
    Cel(Arc<CelString>),
}

/// A compiled rule.
#[derive(Debug, Clone)]
pub struct Rule {
    source: String,
    name: String,
    form: Form,
    /// The name the whole document also goes by in CEL: a readiness rule's child.
    subject: Option<String>,
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
        } else if trimmed.starts_with("${") {
            let start = source.find("${").unwrap_or(0);
            Form::Cel(Arc::new(cel_rule(trimmed).map_err(|(column, message)| {
                fail(start + column.saturating_sub(1), message)
            })?))
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
                "a rule is a JSONPath that starts with `$`, one minijinja expression in `{{ }}` or one CEL expression in `${ }` (quote it in YAML)"
                    .to_string(),
            ));
        };
        Ok(Rule {
            source: source.to_string(),
            name: String::new(),
            form,
            subject: None,
        })
    }

    /// The rule with the whole document also in scope as `self` and as `name` in CEL, as
    /// a readiness rule sees the object it judges.
    pub fn about(mut self, name: &str) -> Rule {
        self.subject = Some(name.to_string());
        self
    }

    /// The rule named after the field it was written in (`status.conditions[Complete].when`),
    /// as errors show it.
    pub fn named(mut self, name: String) -> Rule {
        self.name = name;
        self
    }

    /// The names a CEL rule reads; nothing for the other forms.
    pub fn cel_variables(&self) -> Vec<&str> {
        match &self.form {
            Form::Cel(cel) => cel.variables().collect(),
            _ => Vec::new(),
        }
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
            Form::Cel(cel) => Ok(self.evaluate_cel(cel, document)?.into_iter().collect()),
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
            Form::Cel(cel) => match self.evaluate_cel(cel, document)? {
                None | Some(Value::Bool(false)) => Ok(false),
                Some(Value::Bool(true)) => Ok(true),
                Some(other) => Err(RuleFailure {
                    message: format!("a CEL rule gives a bool; this one gave {other}"),
                    position: None,
                }),
            },
        }
    }

    /// A CEL rule's value over `document`; `None` when it read something absent.
    fn evaluate_cel(&self, cel: &CelString, document: &Value) -> Result<Option<Value>, RuleFailure> {
        let subject = self.subject.as_deref();
        match cel.evaluate(|name| cel_variable(document, subject, name)) {
            Ok(value) => Ok(value),
            Err(CelError::Missing { .. }) => Ok(None),
            Err(e) => Err(RuleFailure {
                message: e.to_string(),
                position: None,
            }),
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

/// `text` compiled as one CEL expression; a failure's 1-based column in `text` and what
/// is wrong.
fn cel_rule(text: &str) -> Result<CelString, (usize, String)> {
    let cel = cel_dialect::parse(text).map_err(|e| match e {
        CelError::Unclosed { column } | CelError::Parse { column, .. } => (column, e.to_string()),
        other => (1, other.to_string()),
    })?;
    if !cel.is_expression() {
        return Err((1, "a CEL rule is one `${...}` and nothing around it".to_string()));
    }
    Ok(cel)
}

/// What `name` is in a CEL rule over `document`: a top-level key, the `subject` the
/// document is about (also `self`, and `each`, kro's name for one object of a
/// collection), the parent as `schema`, a child or a lookup.
pub(crate) fn cel_variable<'a>(document: &'a Value, subject: Option<&str>, name: &str) -> Option<&'a Value> {
    if subject.is_some_and(|s| s == name) || (subject.is_some() && matches!(name, "self" | "each")) {
        return Some(document);
    }
    let member = |key: &str| document.get(key).and_then(|m| m.get(name));
    document
        .get(name)
        .or_else(|| (name == "schema").then(|| document.get("parent")).flatten())
        .or_else(|| member("children"))
        .or_else(|| member("lookups"))
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
    fn a_cel_rule_reads_children_by_name_and_the_parent_as_schema() {
        let doc = json!({"parent": {"spec": {"replicas": 3}},
            "children": {"deployment": {"status": {"availableReplicas": 3}}}});
        let rule = "${deployment.status.availableReplicas == schema.spec.replicas}";
        assert!(holds(rule, &doc));
        assert!(holds(
            "${children.deployment.status.availableReplicas >= parent.spec.replicas}",
            &doc
        ));
        assert!(!holds(
            rule,
            &json!({"parent": {"spec": {"replicas": 3}}, "children": {}})
        ));
        let value = Rule::compile("${deployment.status.availableReplicas * 2}").unwrap();
        assert_eq!(value.select(&doc).unwrap(), vec![json!(6)]);
        assert_eq!(value.select(&json!({"children": {}})).unwrap(), Vec::<Value>::new());
    }

    #[test]
    fn a_cel_readiness_rule_sees_its_object_by_name_and_as_self() {
        let rule = Rule::compile("${deployment.status.ready && self.spec.x == 1 && spec.x == 1}")
            .unwrap()
            .about("deployment");
        assert!(
            rule.holds(&json!({"spec": {"x": 1}, "status": {"ready": true}}))
                .unwrap()
        );
        assert!(!rule.holds(&json!({"spec": {"x": 1}})).unwrap());
    }

    #[test]
    fn a_cel_rule_that_is_not_a_bool_or_not_one_expression_fails() {
        let err = Rule::compile("${parent.spec}")
            .unwrap()
            .holds(&json!({"parent": {"spec": {}}}))
            .unwrap_err();
        assert!(err.message.contains("gives a bool"), "{err}");
        let err = Rule::compile("ready: ${true}").unwrap_err();
        assert!(err.message.contains("starts with `$`"), "{err:?}");
        let err = Rule::compile("${true} and ${false}").unwrap_err();
        assert!(err.message.contains("one `${...}`"), "{err:?}");
        let err = Rule::compile("  ${parent.spec.(}").unwrap_err();
        assert_eq!((err.line, err.column), (1, 3), "{err:?}");
        let err = Rule::compile("${parent.x + 'a'}")
            .unwrap()
            .holds(&json!({"parent": {"x": 1}}))
            .unwrap_err();
        assert!(err.message.contains("parent.x + 'a'"), "{err}");
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
