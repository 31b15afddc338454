//! Leader election between two `stencil run` processes: only the leader reconciles, both
//! are ready, and when the leader is killed with SIGKILL the standby takes over.

mod common;

use std::time::{Duration, Instant};

use common::{CM, Process, TestNamespace, child, client, definition, spawn_stencil, unique_group, wait_for};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

async fn create_widget(api: &Api<DynamicObject>, group: &str, name: &str) {
    let obj: DynamicObject = serde_json::from_value(json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
        "metadata": {"name": name}, "spec": {"size": 1}}))
    .unwrap();
    common::create_when_served(api, &obj).await;
}

async fn applied(p: &Process, definition: &str) -> f64 {
    let sample =
        format!("stencil_children_applied_total{{definition=\"{definition}\",kind=\"ConfigMap\",result=\"created\"}}");
    p.metric(&sample).await.unwrap_or(0.0)
}

#[tokio::test]
async fn only_the_leader_reconciles_and_the_standby_takes_over_after_a_kill() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "leader").await;
    let group = unique_group();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("widgets.yaml"),
        definition(&group, &child("cm", CM), ""),
    )
    .unwrap();
    let lease = format!("stencil-{}", &group[..9]);
    let args = vec![
        format!("--definitions={}", dir.path().display()),
        format!("--namespace={}", ns.name),
        "--no-cluster-definitions".to_string(),
        "--leader-elect".to_string(),
        format!("--leader-election-id={lease}"),
        format!("--leader-election-namespace={}", ns.name),
    ];
    let kubeconfig = common::kubeconfig_path();
    let mut procs = vec![
        spawn_stencil(&args, &kubeconfig, dir.path().join("a.log")),
        spawn_stencil(&args, &kubeconfig, dir.path().join("b.log")),
    ];
    let gauge = format!("leader_election_master_status{{name=\"{lease}\"}}");
    let leader = wait_for("one leader and one standby", Duration::from_secs(60), || async {
        match (procs[0].metric(&gauge).await, procs[1].metric(&gauge).await) {
            (Some(x), Some(y)) if x + y == 1.0 => Some(if x == 1.0 { 0 } else { 1 }),
            _ => None,
        }
    })
    .await;
    let standby = 1 - leader;
    for p in &procs {
        assert_eq!(
            p.get("/readyz").await.unwrap().0,
            200,
            "leader and standby are both ready"
        );
    }

    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Widget"), "widgets");
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &ar);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let def = format!("widgets.{group}");
    create_widget(&widgets, &group, "one").await;
    wait_for("the leader to create the child", Duration::from_secs(60), || async {
        cms.get_opt("one-cm").await.ok()?
    })
    .await;
    assert!(applied(&procs[leader], &def).await >= 1.0, "the leader wrote the child");
    assert_eq!(applied(&procs[standby], &def).await, 0.0, "the standby writes nothing");

    let killed = Instant::now();
    procs[leader].child.kill().unwrap();
    procs[leader].child.wait().unwrap();
    let survivor = &procs[standby];
    wait_for("the standby to take over", Duration::from_secs(90), || async {
        (survivor.metric(&gauge).await == Some(1.0)).then_some(())
    })
    .await;
    let failover = killed.elapsed();
    create_widget(&widgets, &group, "two").await;
    let created = tokio::time::timeout(Duration::from_secs(60), async {
        while !matches!(cms.get_opt("two-cm").await, Ok(Some(_))) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(
        created.is_ok(),
        "the new leader did not create the child; its log:\n{}",
        survivor.logs()
    );
    eprintln!(
        "leader failover after SIGKILL: {:.1} s (lease duration 15 s, retry period 2 s)",
        failover.as_secs_f64()
    );
    assert!(failover < Duration::from_secs(60), "failover took {failover:?}");
}
