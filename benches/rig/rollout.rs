//! A canary rollout over N parents (B11): the Lite definition of B1b with
//! `rollout: {strategy: Canary, steps: [10, 50, 100]}` and no pauses, so each step
//! advances as soon as its parents are Ready. An edit of the child template goes out;
//! the bench times each step from the end of the one before (the first from the edit) to
//! the moment every parent it moves renders the edit, and counts Stencil's writes
//! against the children the edit changes.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::lite::{self, LITES};
use super::{Controller, apps, count_ready, namespace, root, service_account_kubeconfig, stencil_rbac, until};

/// The steps, in percent.
const STEPS: [u8; 3] = [10, 50, 100];

fn definition(edited: bool) -> String {
    let steps: String = STEPS.iter().map(|p| format!("      - percent: {p}\n")).collect();
    let text = lite::definition();
    let text = if edited {
        text.replace(
            "greeting: {{ parent.spec.greeting | quote }}",
            "greeting: {{ (parent.spec.greeting ~ \"!\") | quote }}",
        )
    } else {
        text
    };
    text.replace(
        "  children:\n",
        &format!("  rollout:\n    strategy: Canary\n    steps:\n{steps}  children:\n"),
    )
}

/// How many ConfigMaps of `ns` carry the edit.
async fn edited(client: &Client, ns: &str) -> usize {
    let Ok(list) = Api::<ConfigMap>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
    else {
        return 0;
    };
    list.items
        .iter()
        .filter(|c| {
            c.data
                .as_ref()
                .and_then(|d| d.get("greeting"))
                .is_some_and(|g| g.ends_with('!'))
        })
        .count()
}

/// B11 at N: converge N Lites, then roll an edit out in three steps.
pub(super) async fn run(client: &Client, dir: &Path, n: usize, results: &mut BTreeMap<&'static str, Value>) {
    let defs = dir.join("rollout-definitions");
    std::fs::create_dir_all(&defs).unwrap();
    let file = defs.join("lites.yaml");
    std::fs::write(&file, definition(false)).unwrap();
    let kubeconfig = service_account_kubeconfig(client, "stencil", stencil_rbac(&defs), dir).await;
    let ns = "bench-rollout";
    namespace(client, ns).await;
    let stencil = Controller::stencil(&defs, &kubeconfig, &root().join("target/bench/stencil-rollout.log"));
    let api = apps(client, ns, LITES);
    until("the Lite kind to be served", Duration::from_secs(120), || async {
        api.list(&ListParams::default().limit(1)).await.is_ok()
    })
    .await;
    lite::converge(client, ns, n, LITES).await;

    // The parents each step moves, as Stencil chooses them.
    let spec: stencil::definition::OperatorDefinition = stencil::yaml::document(&definition(true)).unwrap();
    let revision = stencil::rollout::revision_name(
        spec.metadata.name.as_deref().unwrap_or_default(),
        &stencil::rollout::revision_hash(&spec.spec),
    );
    let uids: Vec<String> = api
        .list_metadata(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|p| p.uid().unwrap_or_default())
        .collect();
    let writes_before = stencil.writes().await;
    let started = Instant::now();
    std::fs::write(&file, definition(true)).unwrap();
    let mut steps = Vec::new();
    let mut last = Instant::now();
    for percent in STEPS {
        let share = uids
            .iter()
            .filter(|u| stencil::rollout::chosen(&revision, u, percent))
            .count();
        until(
            &format!("the {percent} % step over {n} parents"),
            Duration::from_secs(1800),
            || async { edited(client, ns).await >= share },
        )
        .await;
        steps.push(last.elapsed().as_secs_f64());
        last = Instant::now();
    }
    until("every parent Ready on the edit", Duration::from_secs(600), || async {
        count_ready(&api).await >= n
    })
    .await;
    let total = started.elapsed().as_secs_f64();
    let writes = stencil.writes().await - writes_before;
    results.insert("rollout_n", json!(n));
    results.insert("rollout_step_s", json!(steps));
    results.insert("rollout_total_s", json!(total));
    results.insert("rollout_writes", json!(writes));
    // The edit changes two children per parent (the ConfigMap and the Secret).
    results.insert("rollout_writes_per_parent", json!(writes / n as f64));
    stencil.stop();
    lite::teardown(client, ns, LITES).await;
}
