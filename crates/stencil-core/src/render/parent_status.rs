//! Readiness of each child and the parent's status: fields, conditions, the status
//! template, `Ready`, `Reconciling` and `observedGeneration`.

use std::collections::BTreeMap;

use minijinja::value::{Serde, Value as JinjaValue};
use serde_json::{Map, Value, json};

use super::entries::Entries;
use super::*;
use crate::conditions::condition;
use crate::readiness::default_readiness;

/// A child is ready when every object it rendered is observed and ready.
pub(super) fn child_readiness(
    def: &CompiledDefinition,
    index: usize,
    desired: &[Value],
    observed: &[Value],
) -> Readiness {
    for want in desired {
        let name = want
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let kind = want.get("kind").and_then(Value::as_str).unwrap_or_default();
        let Some(live) = observed
            .iter()
            .find(|o| ObjectKey::of_value(want).is_some_and(|w| ObjectKey::of_value(o) == Some(w)))
        else {
            return Readiness::NotReady(format!("{kind} {name} does not exist yet"));
        };
        let state = match def.ready_rule(index) {
            Some(rule) => match rule.holds(live) {
                Ok(true) => Readiness::Ready,
                Ok(false) => Readiness::NotReady(format!("readyWhen `{}` does not hold", rule.source())),
                Err(e) => Readiness::NotReady(format!("readyWhen `{}` failed: {e}", rule.source())),
            },
            None => default_readiness(live),
        };
        if let Readiness::NotReady(why) = state {
            return Readiness::NotReady(format!("{kind} {name}: {why}"));
        }
    }
    Readiness::Ready
}

/// The parent's status: fields, user conditions, the status template, `Ready`,
/// `Reconciling` while not ready, and `observedGeneration`.
pub(super) fn status(info: &ParentInfo<'_>, context: &Value, entries: &Entries<'_>) -> Result<Value, RenderError> {
    let (ready, waiting) = (&entries.ready, entries.waiting.as_slice());
    let generation = info.object.pointer("/metadata/generation").and_then(Value::as_i64);
    let mut status = Map::new();
    if let Some(g) = generation {
        status.insert("observedGeneration".into(), g.into());
    }
    fields(info, context, &mut status)?;
    let not_ready = not_ready_children(info.def, ready, waiting);
    let all_ready = not_ready.is_empty() && waiting.is_empty();
    if let Some(source) = &info.def.spec.status.template {
        let mut ctx = context.clone();
        ctx["ready"] = all_ready.into();
        ctx["waiting"] = serde_json::to_value(waiting).unwrap_or_default();
        from_template(info, source, &ctx, &mut status)?;
    }
    let mut conditions = rule_conditions(info, context, generation)?;
    let Said { reason, mut message } = readiness_said(
        info.def.spec.children.len() - entries.excluded.len(),
        &not_ready,
        waiting,
    );
    if !entries.excluded.is_empty() {
        let names: Vec<&str> = entries.excluded.iter().copied().collect();
        message.push_str(&format!("; left out by includeWhen: {}", names.join(", ")));
    }
    conditions.push(condition("Ready", all_ready, &reason, &message, generation));
    if !all_ready {
        conditions.push(condition("Reconciling", true, &reason, &message, generation));
    }
    status.insert("conditions".into(), Value::Array(conditions));
    Ok(Value::Object(status))
}

/// Adds the definition's status fields: one value as it is, several as a list.
fn fields(info: &ParentInfo<'_>, context: &Value, status: &mut Map<String, Value>) -> Result<(), RenderError> {
    for (field, rule) in info.def.field_rules() {
        let mut values = rule.select(context).map_err(|e| info.rule_error(rule, e))?;
        match values.len() {
            0 => {}
            1 => {
                status.insert(field.clone(), values.remove(0));
            }
            _ => {
                status.insert(field.clone(), Value::Array(values));
            }
        }
    }
    Ok(())
}

/// The children rendered but not ready, each with why (`name (why)`); a child held back
/// by `dependsOn` is waiting, not counted here.
fn not_ready_children(def: &CompiledDefinition, ready: &BTreeMap<&str, Readiness>, waiting: &[Waiting]) -> Vec<String> {
    def.spec
        .children
        .iter()
        .filter(|c| !waiting.iter().any(|w| w.child == c.name))
        .filter_map(|c| match ready.get(c.name.as_str()) {
            Some(Readiness::NotReady(why)) => Some(format!("{} ({why})", c.name)),
            _ => None,
        })
        .collect()
}

/// Adds what the status template renders over `ctx`: a mapping, none of whose keys is
/// Stencil's own.
fn from_template(
    info: &ParentInfo<'_>,
    source: &str,
    ctx: &Value,
    status: &mut Map<String, Value>,
) -> Result<(), RenderError> {
    let text = info.render_template(names::STATUS, source, &JinjaValue::from(Serde(ctx)))?;
    let at = || info.place(names::STATUS, None);
    let extra: Value = crate::yaml::document(&text).map_err(|e| RenderError::Output {
        at: at(),
        line: e.line,
        message: e.message,
    })?;
    let map = match extra {
        Value::Null => return Ok(()),
        Value::Object(map) => map,
        _ => {
            return Err(RenderError::Object {
                at: at(),
                message: "the status template must render a YAML mapping".into(),
            });
        }
    };
    for (k, v) in map {
        if crate::compile::RESERVED_STATUS_FIELDS.contains(&k.as_str()) {
            return Err(RenderError::Object {
                at: at(),
                message: format!("status.{k} is written by Stencil"),
            });
        }
        status.insert(k, v);
    }
    Ok(())
}

/// The definition's own conditions, each True when its rule holds; a latched one that
/// held keeps its True until the spec changes.
fn rule_conditions(info: &ParentInfo<'_>, context: &Value, generation: Option<i64>) -> Result<Vec<Value>, RenderError> {
    let mut conditions = Vec::new();
    for (rule_spec, rule) in info.def.condition_rules() {
        let holds = rule.holds(context).map_err(|e| info.rule_error(rule, e))?;
        if !holds
            && rule_spec.latch
            && let Some(kept) = latched(info.object, &rule_spec.type_, generation)
        {
            conditions.push(kept);
            continue;
        }
        let (reason, message) = if holds {
            (
                rule_spec.reason.clone().unwrap_or_else(|| "RuleSatisfied".into()),
                rule_spec.message.clone().unwrap_or_default(),
            )
        } else {
            ("RuleNotSatisfied".into(), format!("`{}` does not hold", rule.source()))
        };
        conditions.push(condition(&rule_spec.type_, holds, &reason, &message, generation));
    }
    Ok(conditions)
}

/// A condition's reason and message.
struct Said {
    reason: String,
    message: String,
}

/// What `Ready` (and `Reconciling`) say of `total` children, some `not_ready`, some
/// `waiting`.
fn readiness_said(total: usize, not_ready: &[String], waiting: &[Waiting]) -> Said {
    if not_ready.is_empty() && waiting.is_empty() {
        return Said {
            reason: "AllChildrenReady".to_string(),
            message: format!("{total} of {total} children ready"),
        };
    }
    let mut parts = Vec::new();
    if !waiting.is_empty() {
        let w: Vec<String> = waiting
            .iter()
            .map(|w| format!("{} (on {})", w.child, w.on.join(", ")))
            .collect();
        parts.push(format!("waiting: {}", w.join(", ")));
    }
    if !not_ready.is_empty() {
        parts.push(format!("not ready: {}", not_ready.join(", ")));
    }
    let reason = if waiting.is_empty() {
        "ChildrenNotReady"
    } else {
        "Waiting"
    };
    Said {
        reason: reason.to_string(),
        message: parts.join("; "),
    }
}

/// The parent's condition `type_` as it stands, when it is True and was set at
/// `generation`: a latched condition keeps it until the spec changes.
fn latched(parent: &Value, type_: &str, generation: Option<i64>) -> Option<Value> {
    let current = parent
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))?;
    let set_at = current.get("observedGeneration").and_then(Value::as_i64);
    (current.get("status").and_then(Value::as_str) == Some("True") && set_at == generation).then(|| {
        let text = |key: &str| current.get(key).and_then(Value::as_str).unwrap_or_default();
        condition(type_, true, text("reason"), text("message"), generation)
    })
}

/// The status of a parent whose render failed: `Ready` False and `Stalled` True, with the
/// errors as the message, and each of the `latched` condition types that is set as
/// `latched` keeps it. The controller writes it and changes nothing else.
pub fn failure_status(parent: &Value, failure: &RenderFailure, latched_types: &[&str]) -> Value {
    let generation = parent.pointer("/metadata/generation").and_then(Value::as_i64);
    let message = failure.to_string();
    let mut conditions: Vec<Value> = latched_types
        .iter()
        .filter_map(|t| latched(parent, t, generation))
        .collect();
    conditions.push(condition("Ready", false, "RenderFailed", &message, generation));
    conditions.push(condition("Stalled", true, "RenderFailed", &message, generation));
    let mut status = json!({"conditions": conditions});
    if let Some(g) = generation {
        status["observedGeneration"] = g.into();
    }
    status
}

/// The status of a parent Stencil holds still (`stencil.dev/paused`): its current status
/// as it is, with the `Paused` condition True saying why. Nothing else changes while
/// paused (the condition names no generation, so a spec edit writes nothing either); the
/// first pass after the annotation goes writes the rendered status, without it.
pub fn paused_status(current: Option<&Value>, message: &str) -> Value {
    let mut status = current.cloned().filter(Value::is_object).unwrap_or_else(|| json!({}));
    let mut conditions: Vec<Value> = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    crate::conditions::set(&mut conditions, condition("Paused", true, "Paused", message, None));
    status["conditions"] = Value::Array(conditions);
    status
}

/// `rendered` with `Ready` False (and `Reconciling` True) for `reason`, the rest kept: a
/// child could not be applied (`ApplyFailed`), or its object is not this parent's
/// (`Conflict`).
pub fn not_ready(rendered: &Value, reason: &str, message: &str) -> Value {
    let mut status = rendered.clone();
    if let Some(conditions) = status.get_mut("conditions").and_then(Value::as_array_mut) {
        conditions.retain(|c| c["type"] != "Ready" && c["type"] != "Reconciling");
        let generation = rendered.get("observedGeneration").cloned().unwrap_or(Value::Null);
        let generation = generation.as_i64();
        conditions.push(condition("Ready", false, reason, message, generation));
        conditions.push(condition("Reconciling", true, reason, message, generation));
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paused_status_keeps_everything_and_says_paused() {
        let current = json!({"url": "x", "conditions": [
            {"type": "Ready", "status": "True", "reason": "AllChildrenReady", "lastTransitionTime": "t"}]});
        let paused = paused_status(Some(&current), "held");
        assert_eq!(paused["url"], "x");
        let conditions = paused["conditions"].as_array().unwrap();
        assert_eq!(conditions.len(), 2);
        assert_eq!(conditions[0]["type"], "Paused");
        assert_eq!(
            (conditions[0]["status"].as_str(), conditions[0]["message"].as_str()),
            (Some("True"), Some("held"))
        );
        assert_eq!(conditions[1], current["conditions"][0], "Ready stays as it was");
        assert_eq!(paused_status(None, "held")["conditions"][0]["type"], "Paused");
    }

    #[test]
    fn a_failed_apply_turns_ready_false_and_keeps_the_rest() {
        let rendered = json!({"observedGeneration": 3, "url": "x", "conditions": [
            {"type": "Available", "status": "True"}, {"type": "Ready", "status": "True"}]});
        let failed = not_ready(&rendered, "ApplyFailed", "apply Service s: forbidden");
        assert_eq!(failed["url"], "x");
        let ready = failed["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .unwrap();
        assert_eq!(
            (ready["status"].as_str(), ready["reason"].as_str()),
            (Some("False"), Some("ApplyFailed"))
        );
        assert_eq!(ready["observedGeneration"], 3);
        assert_eq!(failed["conditions"].as_array().unwrap().len(), 3);
    }
}
