//! The Lua health check run by a real Lua 5.4 interpreter, as Argo CD runs it: the parent
//! as a table without JSON nulls, the script's returned table read back.

use mlua::{Lua, LuaSerdeExt, SerializeOptions, Table};
use serde_json::{Value, json};

use super::*;

fn health(obj: &Value) -> (String, String) {
    let lua = Lua::new();
    let options = SerializeOptions::new()
        .serialize_none_to_null(false)
        .serialize_unit_to_null(false);
    let value = lua.to_value_with(obj, options).expect("the parent converts");
    lua.globals().set("obj", value).expect("set obj");
    let hs: Table = lua.load(HEALTH_LUA).eval().expect("the script runs");
    (hs.get("status").expect("status"), hs.get("message").expect("message"))
}

fn parent(status: Value) -> Value {
    json!({"apiVersion": "examples.stencil.dev/v1", "kind": "Database",
        "metadata": {"name": "db", "namespace": "shop", "generation": 2}, "status": status})
}

fn cond(type_: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({"type": type_, "status": status, "reason": reason, "message": message})
}

#[test]
fn ready_is_healthy() {
    let p = parent(
        json!({"observedGeneration": 2, "conditions": [cond("Ready", "True", "AllChildrenReady", "all 3 children are ready")]}),
    );
    assert_eq!(health(&p), ("Healthy".into(), "all 3 children are ready".into()));
}

#[test]
fn not_ready_is_progressing_with_stencils_message() {
    let p = parent(json!({"observedGeneration": 2, "conditions": [
        cond("Ready", "False", "ChildrenNotReady", "not ready: statefulset (0/1 replicas ready)"),
        cond("Reconciling", "True", "ChildrenNotReady", "not ready: statefulset (0/1 replicas ready)")]}));
    assert_eq!(
        health(&p),
        (
            "Progressing".into(),
            "not ready: statefulset (0/1 replicas ready)".into()
        )
    );
}

#[test]
fn stalled_and_conflict_are_degraded() {
    let stalled = parent(json!({"observedGeneration": 2, "conditions": [
        cond("Ready", "False", "RenderFailed", "w.yaml:12:3: required"),
        cond("Stalled", "True", "RenderFailed", "w.yaml:12:3: required")]}));
    assert_eq!(health(&stalled).0, "Degraded");
    let conflict = parent(json!({"observedGeneration": 2, "conditions": [
        cond("Ready", "False", "Conflict", "ConfigMap shop/db exists and was not created by Stencil")]}));
    assert_eq!(health(&conflict).0, "Degraded");
}

#[test]
fn no_status_or_an_old_one_is_progressing() {
    let mut none = parent(Value::Null);
    none.as_object_mut().unwrap().remove("status");
    assert_eq!(health(&none).0, "Progressing");
    assert_eq!(health(&parent(Value::Null)).0, "Progressing", "a JSON null status");
    let old = parent(json!({"observedGeneration": 1, "conditions": [cond("Ready", "True", "AllChildrenReady", "")]}));
    let (status, message) = health(&old);
    assert_eq!(status, "Progressing");
    assert!(message.contains("generation 2"), "{message}");
}

#[test]
fn the_statuses_stencil_renders_read_as_they_should() {
    let failure =
        stencil::render::failure_status(&parent(Value::Null), &stencil::render::RenderFailure(Vec::new()), &[]);
    let p = json!({"metadata": {"generation": 2}, "status": failure});
    assert_eq!(health(&p).0, "Degraded", "{p}");
}

#[test]
fn every_parent_kind_gets_one_entry() {
    let (defs, diags) = stencil::compile::compile_file("db.yaml", include_str!("../../../operators/database.yaml"));
    assert!(diags.0.is_empty(), "{diags}");
    let entries = customizations(&defs);
    assert_eq!(
        entries.keys().collect::<Vec<_>>(),
        ["resource.customizations.health.examples.stencil.dev_Database"]
    );
}
