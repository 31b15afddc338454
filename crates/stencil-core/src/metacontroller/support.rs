//! What of a controller object Stencil serves, purely: every field it cannot honour yet
//! is named (on the object's `Served` condition), and such an object is not served at
//! all (its parents are left as they are) rather than served in part, since a hook that
//! relies on, say, its Authorization header would be called without it.

use serde_json::{Value, json};

use super::api::{CompositeControllerSpec, DecoratorControllerSpec, Hook, UpdateMethod};

/// The condition Stencil keeps on a controller object it watches.
pub const SERVED: &str = "Served";

/// The `Served` condition of a controller object at `generation` with these refusals,
/// without its transition time: True, or False naming each field Stencil cannot honour.
pub fn served_condition(refusals: &[String], generation: Option<i64>) -> Value {
    let (status, reason, message) = if refusals.is_empty() {
        ("True", "Served", "served by Stencil".to_string())
    } else {
        ("False", "Unsupported", format!("not served: {}", refusals.join("; ")))
    };
    json!({"type": SERVED, "status": status, "reason": reason, "message": message,
        "observedGeneration": generation})
}

/// Why Stencil does not serve a CompositeController: one line per field it cannot honour;
/// empty when it serves it.
pub fn composite_refusals(spec: &CompositeControllerSpec) -> Vec<String> {
    let hooks = spec.hooks.clone().unwrap_or_default();
    let mut out = shared_refusals(
        "children",
        [&hooks.sync, &hooks.finalize, &hooks.customize],
        !spec.endpoint_configs.is_empty(),
    );
    for (name, hook) in [
        ("preUpdateChild", &hooks.pre_update_child),
        ("postUpdateChild", &hooks.post_update_child),
    ] {
        if hook.is_some() {
            out.push(format!("spec.hooks.{name} is not supported"));
        }
    }
    for (i, child) in spec.child_resources.iter().enumerate() {
        let method = child
            .update_strategy
            .as_ref()
            .and_then(|s| s.method)
            .unwrap_or_default();
        if matches!(method, UpdateMethod::RollingRecreate | UpdateMethod::RollingInPlace) {
            out.push(format!(
                "spec.childResources[{i}].updateStrategy.method {method:?} is not supported; use Recreate or InPlace"
            ));
        }
    }
    out
}

/// Why Stencil does not serve a DecoratorController; empty when it serves it.
pub fn decorator_refusals(spec: &DecoratorControllerSpec) -> Vec<String> {
    let hooks = spec.hooks.clone().unwrap_or_default();
    let mut out = shared_refusals(
        "attachments",
        [&hooks.sync, &hooks.finalize, &hooks.customize],
        !spec.endpoint_configs.is_empty(),
    );
    if spec.resources.is_empty() {
        out.push("spec.resources is empty: a DecoratorController decorates at least one kind".into());
    }
    out
}

/// What both controller kinds refuse: no sync hook (which decides `decides`), a hook
/// that cannot be called, endpoint configs.
fn shared_refusals(
    decides: &str,
    [sync, finalize, customize]: [&Option<Hook>; 3],
    endpoint_configs: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    if sync.is_none() {
        out.push(format!(
            "spec.hooks.sync is missing: the sync hook decides the {decides}"
        ));
    }
    for (name, hook) in [("sync", sync), ("finalize", finalize), ("customize", customize)] {
        out.extend(hook_refusals(name, hook.as_ref()));
    }
    if endpoint_configs {
        out.push("spec.endpointConfigs is not supported".into());
    }
    out
}

/// Why hook `name` cannot be called; empty when it can (or is absent).
fn hook_refusals(name: &str, hook: Option<&Hook>) -> Vec<String> {
    let Some(hook) = hook else {
        return Vec::new();
    };
    let Some(webhook) = &hook.webhook else {
        return vec![format!("spec.hooks.{name} has no webhook")];
    };
    [
        ("caBundle", webhook.ca_bundle.is_some()),
        ("clientTLS", webhook.client_tls.is_some()),
        ("authorization", webhook.authorization.is_some()),
        ("basicAuth", webhook.basic_auth.is_some()),
    ]
    .into_iter()
    .filter(|(_, set)| *set)
    .map(|(field, _)| format!("spec.hooks.{name}.webhook.{field} is not supported"))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_served_condition_names_every_refusal() {
        let refused = served_condition(&["a".into(), "b".into()], Some(3));
        assert_eq!(refused["status"], "False");
        assert_eq!(refused["message"], "not served: a; b");
        assert_eq!(refused["observedGeneration"], 3);
        assert_eq!(served_condition(&[], Some(3))["status"], "True");
    }

    fn composite(spec: serde_json::Value) -> CompositeControllerSpec {
        serde_json::from_value(spec).unwrap()
    }

    #[test]
    fn a_controller_stencil_can_serve_has_no_refusal() {
        let spec = composite(json!({"parentResource": {"apiVersion": "v1", "resource": "things"},
            "childResources": [{"apiVersion": "v1", "resource": "pods", "updateStrategy": {"method": "Recreate"}}],
            "hooks": {"sync": {"webhook": {"url": "http://h/sync"}}, "finalize": {"webhook": {"url": "http://h/fin"}}}}));
        assert!(composite_refusals(&spec).is_empty(), "{:?}", composite_refusals(&spec));
    }

    #[test]
    fn each_field_stencil_cannot_honour_is_named() {
        let spec = composite(json!({"parentResource": {"apiVersion": "v1", "resource": "things"},
            "childResources": [{"apiVersion": "v1", "resource": "pods", "updateStrategy": {"method": "RollingInPlace"}}],
            "hooks": {"finalize": {"webhook": {"url": "http://h/", "authorization": {"secretRef": {}}}},
                "preUpdateChild": {"webhook": {"url": "http://h/"}}}}));
        let refusals = composite_refusals(&spec).join("\n");
        for expect in [
            "spec.hooks.sync is missing",
            "spec.hooks.finalize.webhook.authorization",
            "spec.hooks.preUpdateChild",
            "RollingInPlace",
        ] {
            assert!(refusals.contains(expect), "{expect}: {refusals}");
        }
    }

    #[test]
    fn a_decorator_without_resources_or_a_hook_without_a_webhook_is_refused() {
        let spec: DecoratorControllerSpec =
            serde_json::from_value(json!({"resources": [], "hooks": {"sync": {}}})).unwrap();
        let refusals = decorator_refusals(&spec).join("\n");
        assert!(refusals.contains("spec.resources is empty"), "{refusals}");
        assert!(refusals.contains("spec.hooks.sync has no webhook"), "{refusals}");
    }
}
