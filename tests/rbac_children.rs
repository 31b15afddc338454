//! RBAC children on the rig, with Stencil running as a ServiceAccount bound to exactly
//! what `stencil rbac` derives (not as admin): each parent gets a ClusterRole with
//! literal rules and a RoleBinding to it, and a role whose rules are templated is refused
//! by the API server as privilege escalation, which the parent's status says in words.

mod common;

use std::time::Duration;

use common::{
    TestNamespace, child, client, condition, definition, run_tool, spawn_stencil, token_kubeconfig, unique_group,
    wait_for, widgets,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
use kube::api::{Api, DynamicObject};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(90);

/// A ClusterRole with literal rules (one `resourceNames` templated) and a binding of it,
/// with a templated `roleRef`, to the parent's ServiceAccount.
const READER: &str = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {{ parent.metadata.namespace }}-{{ parent.metadata.name }}-reader\nrules:\n  - apiGroups: [\"\"]\n    resources: [configmaps]\n    verbs: [get, list, watch]\n  - apiGroups: [\"\"]\n    resources: [secrets]\n    resourceNames: [\"{{ parent.metadata.name }}-credentials\"]\n    verbs: [get]";
const BINDING: &str = "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: {{ parent.metadata.name }}-reader\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: {{ parent.metadata.namespace }}-{{ parent.metadata.name }}-reader\nsubjects:\n  - kind: ServiceAccount\n    name: {{ parent.metadata.name }}\n    namespace: {{ parent.metadata.namespace }}";
/// A Role whose verbs come from the parent: `stencil rbac` cannot hold them in advance.
const TEMPLATED: &str = "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: {{ parent.metadata.name }}-custom\nrules:\n  - apiGroups: [\"\"]\n    resources: [pods]\n    verbs: {{ parent.spec.verbs | tojson }}";

#[tokio::test]
async fn rbac_children_are_written_with_the_derived_rbac_and_escalation_is_reported() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "rbac-children").await;
    let (roles, custom) = (unique_group(), unique_group());
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("definitions");
    std::fs::create_dir(&defs).unwrap();
    let children = format!("{}{}", child("reader", READER), child("binding", BINDING));
    std::fs::write(defs.join("roles.yaml"), definition(&roles, &children, "")).unwrap();
    std::fs::write(
        defs.join("custom.yaml"),
        definition(&custom, &child("role", TEMPLATED), ""),
    )
    .unwrap();

    // The ServiceAccount gets exactly what `stencil rbac` derives; it says what it could not.
    let sa = "stencil";
    run_tool("kubectl", &["create", "serviceaccount", sa, "--namespace", &ns.name]);
    let name = format!("stencil-rbac-{}", &roles[..9]);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stencil"))
        .args(["rbac", "--no-cluster-definitions", "--definitions"])
        .arg(&defs)
        .args(["--name", &name, "--service-account", &format!("{}/{sa}", ns.name)])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let notes = String::from_utf8_lossy(&out.stderr);
    assert!(
        notes.contains("children[role]") && notes.contains("escalate"),
        "{notes}"
    );
    let rbac = dir.path().join("rbac.yaml");
    std::fs::write(&rbac, &out.stdout).unwrap();
    let objects: Vec<serde_json::Value> = stencil::yaml::documents(&String::from_utf8_lossy(&out.stdout)).unwrap();
    let rules = serde_json::to_string(&objects).unwrap();
    assert!(!rules.contains("escalate") && !rules.contains("\"*\""), "{rules}");
    run_tool("kubectl", &["apply", "-f", rbac.to_str().unwrap()]);
    let token = run_tool(
        "kubectl",
        &["create", "token", sa, "--namespace", &ns.name, "--duration", "1h"],
    );
    let kubeconfig = token_kubeconfig(token.trim(), dir.path());
    let args = vec![
        "--definitions".to_string(),
        defs.display().to_string(),
        "--no-cluster-definitions".into(),
    ];
    let stencil = spawn_stencil(&args, &kubeconfig, dir.path().join("stencil.log"));

    let make = |api: Api<DynamicObject>, group: String, spec: serde_json::Value| async move {
        let w: DynamicObject = serde_json::from_value(json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
            "metadata": {"name": "app"}, "spec": spec}))
        .unwrap();
        common::create_when_served(&api, &w).await;
    };
    make(widgets(&client, &roles, &ns.name), roles.clone(), json!({})).await;
    make(
        widgets(&client, &custom, &ns.name),
        custom.clone(),
        json!({"verbs": ["get", "delete"]}),
    )
    .await;

    let role_name = format!("{}-app-reader", ns.name);
    let cluster_roles: Api<ClusterRole> = Api::all(client.clone());
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), &ns.name);
    wait_for("the ClusterRole and its binding", TIMEOUT, || async {
        let role = cluster_roles.get_opt(&role_name).await.ok()??;
        let binding = bindings.get_opt("app-reader").await.ok()??;
        Some((role, binding))
    })
    .await;
    let ready = wait_for("the roles parent to be Ready", TIMEOUT, || async {
        let w = widgets(&client, &roles, &ns.name).get("app").await.ok()?;
        let c = condition(&serde_json::to_value(&w).ok()?, "Ready")?;
        (c["status"] == "True").then_some(c)
    })
    .await;
    assert_eq!(ready["reason"], "AllChildrenReady");

    let refused = wait_for("the templated role to be refused", TIMEOUT, || async {
        let w = widgets(&client, &custom, &ns.name).get("app").await.ok()?;
        let c = condition(&serde_json::to_value(&w).ok()?, "Ready")?;
        (c["status"] == "False" && c["message"].as_str()?.contains("escalat")).then_some(c)
    })
    .await;
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains("escalate") && message.contains("roles"),
        "{message}\nlog:\n{}",
        stencil.logs()
    );

    drop(stencil);
    let _ = cluster_roles.delete(&role_name, &Default::default()).await;
    for kind in ["ClusterRole", "ClusterRoleBinding"] {
        let _ = run_tool("kubectl", &["delete", kind, &name, "--ignore-not-found"]);
    }
}
