//! The fault suite's cases that can run beside other tests: a Stencil crash after its
//! k-th write (plain children, an adoption with a wave teardown, and a decorator while it
//! decorates, prunes on unmatch and cleans up after deleted parents), a child whose
//! finalizer never clears, the deletion of a namespace holding
//! parents, bad parents, bad definitions and isolation, and a restart that first lists
//! an older state. Each case checks the invariants of
//! `common::assert_invariants`: no orphaned child, no duplicate, no parent stuck on a
//! finalizer, and (where Stencil is idle afterwards) no write storm. `make test` runs the
//! fast cases; `make test-faults` (STENCIL_FAULTS=full) runs more crash points.

#[path = "../common/mod.rs"]
mod common;

mod crashes;
mod inputs;
mod stale;
mod teardown;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{
    CM, Process, TestNamespace, assert_invariants, child, client, condition, count_ready, definition, full_faults,
    spawn_stencil, spawn_stencil_env, unique_group, wait_established, wait_for, widget, widgets,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(90);

/// The ConfigMap template, placed in namespace `far` and named `<parent>-far`.
fn far_cm(far: &str) -> String {
    CM.replace("metadata:\n", &format!("metadata:\n  namespace: {far}\n"))
        .replace("-cm", "-far")
}

/// Children: a ConfigMap beside the parent and one in `far`, so every parent carries the
/// finalizer and its deletion needs Stencil's writes.
fn near_and_far(far: &str) -> String {
    format!("{}{}", child("cm", CM), child("far", &far_cm(far)))
}

/// The definitions directory inside a test's scratch directory; logs stay outside it, so
/// writing them does not look like a definition change.
fn defs(dir: &tempfile::TempDir) -> PathBuf {
    let defs = dir.path().join("defs");
    std::fs::create_dir_all(&defs).unwrap();
    defs
}

fn run_args(dir: &Path) -> Vec<String> {
    vec![
        format!("--definitions={}", dir.display()),
        "--no-cluster-definitions".into(),
    ]
}

/// Stencil serving one definition file from a scratch directory that lives as long as
/// this does.
struct Served {
    _dir: tempfile::TempDir,
    stencil: Process,
}

/// Writes `text` as the only definition of `group`'s Widget, starts Stencil on it and
/// waits until the Widget CRD is established.
async fn serve(client: &Client, group: &str, text: String) -> Served {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(defs(&dir).join("widgets.yaml"), text).unwrap();
    let stencil = spawn_stencil(
        &run_args(&defs(&dir)),
        &common::kubeconfig_path(),
        dir.path().join("stencil.log"),
    );
    wait_established(client, &format!("widgets.{group}")).await;
    Served { _dir: dir, stencil }
}

/// Waits for a process to end by itself (an injected abort), or until the work it was
/// given is done (`done`), whichever comes first; then kills it.
async fn until_exit_or<F, Fut>(mut p: Process, what: &str, done: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while p.child.try_wait().ok().flatten().is_none() && !done().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn count_children(client: &Client, namespaces: &[&str]) -> usize {
    let mut n = 0;
    for ns in namespaces {
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        let lp = ListParams::default().labels("app.kubernetes.io/managed-by=stencil");
        n += cms.list(&lp).await.map(|l| l.items.len()).unwrap_or(usize::MAX / 4);
    }
    n
}

/// Panics when a parent's far child (the dependent) exists while its near child (what
/// it depends on) is gone: teardown must go in reverse dependsOn order.
async fn assert_wave_order(client: &Client, ns: &str, far: &str, parents: usize) {
    let near: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let far: Api<ConfigMap> = Api::namespaced(client.clone(), far);
    for i in 0..parents {
        let (Ok(n), Ok(f)) = (
            near.get_opt(&format!("w{i}-cm")).await,
            far.get_opt(&format!("w{i}-far")).await,
        ) else {
            continue;
        };
        assert!(
            !(n.is_none() && f.is_some()),
            "w{i}-cm is gone while w{i}-far, which depends on it, still exists"
        );
    }
}
