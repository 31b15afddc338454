//! Sharding: the same N parents served by one unsharded Stencil, then by three
//! `stencil run --sharding` replicas, for B1b's definition (children ready on creation)
//! and for B4's (the App, its Deployment without replicas): converge time, each
//! replica's share and RSS, and their sum against the one process, in one run.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Client;
use kube::api::ListParams;
use serde_json::{Value, json};
use stencil::labels::SHARD;

use super::{
    APPS, Controller, Parents, apps, definition, lite, namespace, rbac_for, root, service_account_kubeconfig, until,
};

/// Replicas of the sharded run.
const REPLICAS: usize = 3;

/// Where the membership and leader Leases live.
const LEASE_NAMESPACE: &str = "stencil-bench";

/// One definition's figures: converge time and RSS, unsharded and sharded.
struct Case {
    key: &'static str,
    text: String,
    parents: Parents,
}

/// Both cases at N.
pub(super) async fn run(client: &Client, dir: &Path, n: usize, results: &mut BTreeMap<&'static str, Value>) {
    let cases = [
        Case {
            key: "b1b",
            text: lite::definition(),
            parents: lite::LITES,
        },
        Case {
            key: "b4",
            text: definition(300, 0),
            parents: APPS,
        },
    ];
    // BENCH_SHARD_CASES=b1b runs B1b's case alone: at 30,000 parents and more the App's
    // Deployments wait on the controller manager for hours.
    let chosen = std::env::var("BENCH_SHARD_CASES").unwrap_or_else(|_| "b1b,b4".into());
    results.insert("shard_n", json!(n));
    results.insert("shard_replicas", json!(REPLICAS));
    for case in cases
        .into_iter()
        .filter(|c| chosen.split(',').any(|k| k.trim() == c.key))
    {
        let figures = one_case(client, dir, n, &case).await;
        for (name, value) in figures {
            // The bench is one short process; its keys live as long as it does.
            let key: &'static str = Box::leak(format!("shard_{}{name}", prefix(case.key)).into_boxed_str());
            results.insert(key, value);
        }
    }
}

/// B4's keys are the plain `shard_*` ones benches/README.md quotes; B1b's carry its name.
fn prefix(key: &str) -> String {
    if key == "b4" { String::new() } else { format!("{key}_") }
}

async fn one_case(client: &Client, dir: &Path, n: usize, case: &Case) -> Vec<(&'static str, Value)> {
    let defs = dir.join(format!("shard-{}", case.key));
    std::fs::create_dir_all(&defs).unwrap();
    std::fs::write(defs.join("definition.yaml"), &case.text).unwrap();
    let kubeconfig = service_account_kubeconfig(client, "stencil", rbac_for(&defs, &["--sharding"]), dir).await;
    let key = case.key;
    let log = move |name: &str| root().join(format!("target/bench/stencil-shard-{key}-{name}.log"));
    let mut out = Vec::new();

    // One process over every parent.
    let ns = format!("bench-shard-{}-one", case.key);
    namespace(client, &ns).await;
    // Each process serves its namespace only: parents another part left behind (B1b's
    // plain client's, their namespace still terminating) are not in the figures.
    let one = Controller::stencil_with(&defs, &kubeconfig, &log("one"), &[format!("--namespace={ns}")], None);
    serving(client, &ns, case.parents, &[&one]).await;
    let took = lite::converge(client, &ns, n, case.parents).await.took;
    let rss = one.rss_kib().0 as f64 / 1024.0;
    out.push(("one_converge_s", json!(took.as_secs_f64())));
    out.push(("one_rss_mib", json!(rss)));
    lite::teardown(client, &ns, case.parents).await;
    one.stop();

    // Three members.
    let ns = format!("bench-shard-{}", case.key);
    namespace(client, &ns).await;
    let ring = format!("bench-ring-{}", case.key);
    let args = [
        format!("--namespace={ns}"),
        "--sharding".to_string(),
        format!("--leader-election-id={ring}"),
        format!("--leader-election-namespace={LEASE_NAMESPACE}"),
    ];
    let names: Vec<String> = (0..REPLICAS).map(|i| format!("{ring}-{i}")).collect();
    let start = {
        let (defs, kubeconfig, names) = (defs.clone(), kubeconfig.clone(), names.clone());
        move |i: usize, restart: usize| {
            let name = &names[i];
            let file = if restart == 0 {
                name.clone()
            } else {
                format!("{name}-restart{restart}")
            };
            Controller::stencil_with(&defs, &kubeconfig, &log(&file), &args, Some(name))
        }
    };
    let members: Vec<Controller> = (0..REPLICAS).map(|i| start(i, 0)).collect();
    {
        let controllers: Vec<&Controller> = members.iter().collect();
        serving(client, &ns, case.parents, &controllers).await;
        until("every member in the ring", Duration::from_secs(120), || async {
            let mut seen = 0.0_f64;
            for c in &controllers {
                seen = seen.max(c.metric("stencil_shard_members").await);
            }
            seen >= REPLICAS as f64
        })
        .await;
    }
    let ring_members = Supervised::start(members, start);
    let took = lite::converge(client, &ns, n, case.parents).await.took;
    // Each parent's member, from its label (the sharder's gauge is counted per resync).
    let placed = apps(client, &ns, case.parents)
        .list_metadata(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let shares: Vec<usize> = names
        .iter()
        .map(|name| {
            placed
                .iter()
                .filter(|p| p.metadata.labels.as_ref().and_then(|l| l.get(SHARD)) == Some(name))
                .count()
        })
        .collect();
    let rss = ring_members.rss_mib();
    out.push(("converge_s", json!(took.as_secs_f64())));
    out.push(("parents", json!(shares)));
    out.push(("rss_mib", json!(rss)));
    out.push(("rss_sum_mib", json!(rss.iter().sum::<f64>())));
    out.push(("restarts", json!(ring_members.restarts())));
    // The teardown of a large run can take long: the figures show before it.
    for (key, value) in &out {
        println!("shard {}: {key} = {value}", case.key);
    }
    lite::teardown(client, &ns, case.parents).await;
    for c in ring_members.stop().await {
        c.stop();
    }
    out
}

/// Waits until the kind is served and every controller serves the definition.
async fn serving(client: &Client, ns: &str, parents: Parents, controllers: &[&Controller]) {
    let api = apps(client, ns, parents);
    until("the parent kind to be served", Duration::from_secs(120), || async {
        api.list(&ListParams::default().limit(1)).await.is_ok()
    })
    .await;
    until(
        "every Stencil to serve the definition",
        Duration::from_secs(120),
        || async {
            let mut all = true;
            for c in controllers {
                all &= c.metric("stencil_definitions{state=\"running\"}").await >= 1.0;
            }
            all
        },
    )
    .await;
}

/// The members, each started again when it exits, as a Deployment would: under a
/// saturated API server a member that misses its Lease's renew deadline exits by design.
struct Supervised {
    members: Arc<Mutex<Vec<Controller>>>,
    restarts: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Supervised {
    /// Looks at the members every two seconds; `start(i, k)` starts member i for the
    /// k-th time.
    fn start(members: Vec<Controller>, start: impl Fn(usize, usize) -> Controller + Send + 'static) -> Supervised {
        let members = Arc::new(Mutex::new(members));
        let restarts = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn({
            let (members, restarts) = (members.clone(), restarts.clone());
            async move {
                loop {
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    let mut members = members.lock().unwrap();
                    for (i, member) in members.iter_mut().enumerate() {
                        if let Ok(Some(status)) = member.child.try_wait() {
                            let k = restarts.fetch_add(1, Ordering::SeqCst) + 1;
                            println!("shard: member {i} exited ({status}); started again ({k} so far)");
                            *member = start(i, k);
                        }
                    }
                }
            }
        });
        Supervised {
            members,
            restarts,
            task,
        }
    }

    fn rss_mib(&self) -> Vec<f64> {
        let members = self.members.lock().unwrap();
        members.iter().map(|c| c.rss_kib().0 as f64 / 1024.0).collect()
    }

    fn restarts(&self) -> usize {
        self.restarts.load(Ordering::SeqCst)
    }

    /// Stops looking and hands the members back to be stopped.
    async fn stop(self) -> Vec<Controller> {
        self.task.abort();
        let _ = self.task.await;
        std::mem::take(&mut *self.members.lock().unwrap())
    }
}
