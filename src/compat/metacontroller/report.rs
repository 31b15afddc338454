//! What Stencil says on a controller object it watches: a `Served` condition, True or
//! False naming each field it cannot honour, written only when it changes; and for a
//! refused object a Warning Event and an error log line, so that a user who applied it
//! learns why nothing happens.

use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Api, Client, ResourceExt as _};
use serde_json::{Value, json};

use super::ControllerObject;
use crate::metacontroller::support::{SERVED, served_condition};

/// Reports whether `object` is served, given its `refusals`.
pub(super) async fn report<K: ControllerObject>(client: &Client, events: &Recorder, object: &K, refusals: &[String]) {
    let name = object.name_any();
    if !refusals.is_empty() {
        tracing::error!(kind = %K::kind(&()), controller = %name, refusals = %refusals.join("; "), "controller object not served");
        let event = Event {
            type_: EventType::Warning,
            reason: "Unsupported".into(),
            note: Some(
                format!("not served: {}", refusals.join("; "))
                    .chars()
                    .take(1000)
                    .collect(),
            ),
            action: "Serve".into(),
            secondary: None,
        };
        if let Err(e) = events.publish(&event, &object.object_ref(&())).await {
            tracing::debug!(error = %e, "the event of a refused controller object was not published");
        }
    }
    let Some(conditions) = conditions(object, served_condition(refusals, object.meta().generation)) else {
        return;
    };
    let api: Api<K> = Api::all(client.clone());
    let patch = json!({"status": {"conditions": conditions}});
    if let Err(e) = api
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        tracing::warn!(kind = %K::kind(&()), controller = %name, error = %e, "the Served condition was not written");
    }
}

/// The object's conditions with `wanted` in place of its `Served` condition, or `None`
/// when it holds that already; the transition time moves only when the status does.
fn conditions<K: ControllerObject>(object: &K, mut wanted: Value) -> Option<Vec<Value>> {
    let value = serde_json::to_value(object).ok()?;
    let mut conditions: Vec<Value> = value
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let current = conditions.iter().position(|c| c["type"] == SERVED);
    let same = |c: &Value, key: &str| c.get(key) == wanted.get(key);
    let time = match current.map(|i| &conditions[i]) {
        Some(c)
            if ["status", "reason", "message", "observedGeneration"]
                .iter()
                .all(|k| same(c, k)) =>
        {
            return None;
        }
        Some(c) if same(c, "status") => c.get("lastTransitionTime").cloned(),
        _ => None,
    };
    wanted["lastTransitionTime"] = time.unwrap_or_else(|| {
        let now = k8s_openapi::jiff::Timestamp::now();
        now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string().into()
    });
    match current {
        Some(i) => conditions[i] = wanted,
        None => conditions.push(wanted),
    }
    Some(conditions)
}
