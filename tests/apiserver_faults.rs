//! The fault suite's cases that take the API server away, so they run one after another
//! in a single test: a watch that expires (410 Gone after an etcd compaction), and the
//! API server killed with -9 for a while in the middle of reconciling parents. Stencil
//! must recover without a restart, converge, and make no write it did not need.
//! `make test` runs a 5 s outage over 30 parents; `make test-faults` a 5 s and a 60 s
//! outage over 200 parents.

mod common;

use std::time::{Duration, Instant};

use common::{
    CM, Process, TestNamespace, apiserver, assert_invariants, child, client, count_ready, definition, etcd,
    full_faults, spawn_stencil_env, unique_group, wait_established, wait_for,
};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::json;

/// Kills the API server, moves etcd on and compacts away the revisions the watches would
/// resume from, and starts the API server again: every watch gets 410 Gone and relists.
async fn expire_watches() {
    let etcd_url = apiserver(&["etcd-url"]);
    apiserver(&["kill"]);
    let mut revision = String::new();
    for _ in 0..5 {
        // Key `stencil-fault`, value `x`, base64 as the gateway wants them.
        let put = etcd(
            &etcd_url,
            "/v3/kv/put",
            json!({"key": "c3RlbmNpbC1mYXVsdA==", "value": "eA=="}),
        )
        .await;
        revision = put["header"]["revision"].as_str().unwrap().to_string();
    }
    etcd(
        &etcd_url,
        "/v3/kv/compaction",
        json!({"revision": revision, "physical": true}),
    )
    .await;
    apiserver(&["start"]);
}

/// The last 30 writes logged before line `until`, with the warnings among them.
fn recent_writes(logs: &str, until: usize) -> String {
    let lines: Vec<&str> = logs
        .lines()
        .take(until)
        .filter(|l| l.contains(" write ") || l.contains("WARN"))
        .collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

async fn writes(p: &Process) -> f64 {
    p.requests(&["POST", "PUT", "PATCH", "DELETE"]).await
}

/// Every reconcile so far, whatever its result.
async fn reconciles(p: &Process) -> f64 {
    let (_, body) = p.get("/metrics").await.unwrap_or_default();
    body.lines()
        .filter(|l| l.starts_with("controller_runtime_reconcile_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn create(api: &Api<DynamicObject>, group: &str, names: impl Iterator<Item = String>) {
    for name in names {
        let obj: DynamicObject = serde_json::from_value(json!({"apiVersion": format!("{group}/v1"),
            "kind": "Widget", "metadata": {"name": name}, "spec": {"size": 1}}))
        .unwrap();
        common::create_when_served(api, &obj).await;
    }
}

/// Kills the API server, keeps it down for `outage`, starts it again, and returns how long
/// Stencil then took until `expected` parents are Ready.
async fn outage(api: &Api<DynamicObject>, expected: usize, outage: Duration) -> Duration {
    apiserver(&["kill"]);
    // The outage itself: a fault held for a fixed time, not a wait for a condition.
    tokio::time::sleep(outage).await;
    apiserver(&["start"]);
    let restarted = Instant::now();
    wait_for(
        &format!("{expected} parents Ready after a {outage:?} outage"),
        Duration::from_secs(300),
        || async { (count_ready(api).await == expected).then_some(()) },
    )
    .await;
    restarted.elapsed()
}

#[tokio::test]
async fn stencil_survives_watch_expiry_and_api_server_loss() {
    let client = client().await;
    let group = unique_group();
    let ns = TestNamespace::new(&client, "apiserver").await;
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    std::fs::create_dir(&defs).unwrap();
    std::fs::write(defs.join("widgets.yaml"), definition(&group, &child("cm", CM), "")).unwrap();
    // Every write is logged (at debug, from the client), so a write after convergence
    // says what it was.
    let stencil = spawn_stencil_env(
        &[
            format!("--definitions={}", defs.display()),
            "--no-cluster-definitions".into(),
        ],
        &common::kubeconfig_path(),
        dir.path().join("stencil.log"),
        &[("RUST_LOG", "stencil=info,stencil::runtime::client=debug".into())],
    );
    wait_established(&client, &format!("widgets.{group}")).await;
    let api: Api<DynamicObject> = common::widgets(&client, &group, &ns.name);
    // The full suite relists more than one page (the watcher lists 500 a page).
    let first = if full_faults() { 520 } else { 10 };
    create(&api, &group, (0..first).map(|i| format!("w{i}"))).await;
    wait_for("the first parents Ready", Duration::from_secs(180), || async {
        (count_ready(&api).await == first).then_some(())
    })
    .await;

    // Watch expiry: while the API server is down, etcd moves on and compacts away the
    // revisions Stencil's watches would resume from, so they get 410 Gone and relist.
    let quiet = writes(&stencil).await;
    let reconciled = reconciles(&stencil).await;
    expire_watches().await;
    let expired = wait_for(
        "a watch to expire and Stencil to relist",
        Duration::from_secs(120),
        || async {
            stencil
                .logs()
                .lines()
                .find(|l| {
                    l.contains("watch failed") && (l.contains("code: 410") || l.contains("too old resource version"))
                })
                .map(str::to_string)
        },
    )
    .await;
    println!("watch expiry seen by Stencil: {expired}");
    wait_for(
        "the parents Ready after the relist",
        Duration::from_secs(90),
        || async { (count_ready(&api).await == first).then_some(()) },
    )
    .await;
    // Let every parent be reconciled after the relist, then check nothing was written:
    // the relisted objects matched what Stencil had applied.
    wait_for(
        "a reconcile of every parent after the relist",
        Duration::from_secs(90),
        || async { (reconciles(&stencil).await >= reconciled + first as f64).then_some(()) },
    )
    .await;
    assert_eq!(writes(&stencil).await - quiet, 0.0, "a relist wrote");
    assert_invariants(&client, &api, &[ns.name.as_str()]).await;

    // Parents created and edited while the watches relist after another compaction: the
    // relist publishes them only once its store holds them, so none is dropped as not
    // found and none is rendered from its old copy.
    expire_watches().await;
    let during = if full_faults() { 50 } else { 20 };
    create(&api, &group, (0..during).map(|i| format!("d{i}"))).await;
    for i in 0..5 {
        let edit = json!({"spec": {"size": 2}});
        api.patch(&format!("w{i}"), &PatchParams::default(), &Patch::Merge(&edit))
            .await
            .unwrap();
    }
    let first = first + during;
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    wait_for(
        "the parents made and edited during the relist to converge",
        Duration::from_secs(30),
        || async {
            for i in 0..5 {
                let cm = cms.get_opt(&format!("w{i}-cm")).await.ok()??;
                (cm.data?.get("size")? == "2").then_some(())?;
            }
            (count_ready(&api).await == first).then_some(())
        },
    )
    .await;

    // API server loss in the middle of reconciling.
    let (batch, outages): (usize, &[u64]) = if full_faults() { (200, &[5, 60]) } else { (30, &[5]) };
    let mut expected = first;
    for (round, &seconds) in outages.iter().enumerate() {
        create(&api, &group, (0..batch).map(|i| format!("r{round}-{i}"))).await;
        expected += batch;
        let recovery = outage(&api, expected, Duration::from_secs(seconds)).await;
        println!("API server down {seconds} s: every parent Ready {recovery:?} after it came back");
        assert_invariants(&client, &api, &[ns.name.as_str()]).await;
        // Reconciles that failed during the outage retry on their backoff (up to 8 s)
        // from a store that may still be relisting; let them land: a storm never would.
        let settle_by = Instant::now() + Duration::from_secs(60);
        let (mut last, mut quiet_since) = (writes(&stencil).await, Instant::now());
        while quiet_since.elapsed() < Duration::from_secs(10) {
            assert!(
                Instant::now() < settle_by,
                "Stencil kept writing a minute after the outage"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
            let now = writes(&stencil).await;
            if now != last {
                (last, quiet_since) = (now, Instant::now());
            }
        }
        let before = writes(&stencil).await;
        let logged_before = stencil.logs().lines().count();
        let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns.name);
        let children = cms
            .list(&ListParams::default().labels("app.kubernetes.io/managed-by=stencil"))
            .await
            .unwrap();
        assert_eq!(children.items.len(), expected, "one child per parent");
        // No write storm: once converged, a window in which parents are reconciled again
        // (one is touched without a change its children see) costs no writes.
        assert!(before > 0.0, "the write counter exists and counted the children");
        let reconciled = reconciles(&stencil).await;
        let touch = json!({"metadata": {"annotations": {"touched": round.to_string()}}});
        api.patch("w0", &PatchParams::default(), &Patch::Merge(&touch))
            .await
            .unwrap();
        wait_for("a reconcile of the touched parent", Duration::from_secs(30), || async {
            (reconciles(&stencil).await > reconciled).then_some(())
        })
        .await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        let written = writes(&stencil).await - before;
        if written != 0.0 {
            let (_, metrics) = stencil.get("/metrics").await.unwrap_or_default();
            let applied: Vec<&str> = metrics
                .lines()
                .filter(|l| {
                    l.starts_with("stencil_children_applied_total") || l.starts_with("rest_client_requests_total")
                })
                .collect();
            let logs = stencil.logs();
            let since: Vec<&str> = logs.lines().skip(logged_before).collect();
            panic!(
                "{written} writes after convergence\n{}\nthe log since convergence:\n{}\nthe writes of the last minute before it:\n{}",
                applied.join("\n"),
                since.join("\n"),
                recent_writes(&logs, logged_before)
            );
        }
    }
}
