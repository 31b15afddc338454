//! `make bench`: Stencil against the API server's own limit on the rig. Measures
//! convergence (B1), create-to-children latency (B2), steady-state writes (B3), memory
//! (B4), CPU (B5), restart (B6) and deletion (B7) ([`Bench::stencil`]), kro on the same
//! graph ([`kro`]) and a plain kube client making the same writes ([`limit`]); B2 against
//! a watching plain client ([`floor`]); convergence of children that need no controller
//! manager (B1b, [`lite`]); B2 while every parent is re-checked ([`recheck`]); B1b's and B4's parents over three sharded replicas
//! ([`shard`]); a canary rollout of an edit over B1b's parents (B11, [`rollout`]); then a
//! decorator and a selector lookup (B8, B9, [`decorate`]) and conversion through the
//! webhook (B10, [`convert`]). BENCH_PART=b1b, recheck, shard, rollout, decorate or convert runs
//! that part alone; BENCH_PART=b4 runs Stencil's B1-B7 and stops there. Sizes come from
//! BENCH_N, BENCH_LATENCY_SAMPLES, BENCH_IDLE_SECONDS and BENCH_DECORATE_OTHERS; results
//! go to stdout, target/bench/results.md and target/bench/results.json ([`report`]). The
//! rig and the processes measured are reached through [`cluster`] and [`controller`].

#[path = "rig/cluster.rs"]
mod cluster;
#[path = "rig/controller.rs"]
mod controller;
#[path = "rig/convert.rs"]
mod convert;
#[path = "rig/decorate.rs"]
mod decorate;
#[path = "rig/floor.rs"]
mod floor;
#[path = "rig/kro.rs"]
mod kro;
#[path = "rig/limit.rs"]
mod limit;
#[path = "rig/lite.rs"]
mod lite;
#[path = "rig/observe.rs"]
mod observe;
#[path = "rig/recheck.rs"]
mod recheck;
#[path = "rig/report.rs"]
mod report;
#[path = "rig/rollout.rs"]
mod rollout;
#[path = "rig/shard.rs"]
mod shard;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cluster::{
    admin, apply_all, kubeconfig_path, namespace, rbac_for, remove_leftover_namespaces, remove_namespace,
    server_cpu_seconds, service_account_kubeconfig, stencil_rbac,
};
use controller::{Controller, cpu_seconds_of, free_port, stencil_bin};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use kro::{kro, kro_crds, kro_dir, kro_rbac};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, Config};
use limit::plain_client;
use observe::Observer;
use report::{keep_saved, report, save};
use serde_json::{Value, json};
use stencil_core::fixtures::{self, ParentKind, child};

const GROUP: &str = "bench.stencil.dev";

const PLAIN_CONCURRENCY: usize = 32;

/// How long the API server looks a deleted namespace's name up live (its
/// `forceLiveLookupTTL`), with a second to spare.
const NAMESPACE_LIVE_LOOKUP: Duration = Duration::from_secs(31);

/// A parent kind: Stencil's App, or the equivalent kro instance kind.
#[derive(Clone, Copy)]
struct Parents {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
}

const APPS: Parents = Parents {
    group: GROUP,
    version: "v1",
    kind: "App",
    plural: "apps",
};

const KRO_APPS: Parents = Parents {
    group: "kro.run",
    version: "v1alpha1",
    kind: "KApp",
    plural: "kapps",
};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn definition(resync: u64, replicas: u64) -> String {
    let app = ParentKind {
        group: GROUP,
        kind: "App",
        plural: "apps",
    };
    let config = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ parent.metadata.name }}\ndata:\n  greeting: {{ parent.spec.greeting | quote }}";
    let service = "apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ parent.metadata.name }}\nspec:\n  clusterIP: None\n  selector: {app: {{ parent.metadata.name }}}\n  ports: [{port: 80}]";
    let deployment = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{{{ parent.metadata.name }}}}\nspec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{app: {{{{ parent.metadata.name }}}}}}}}\n  template:\n    metadata: {{labels: {{app: {{{{ parent.metadata.name }}}}}}}}\n    spec:\n      containers: [{{name: app, image: nginx, resources: {{requests: {{cpu: 1000m, memory: 64Mi}}}}}}]"
    );
    let children = [
        child("config", config),
        child("service", service),
        child("deployment", &deployment),
    ]
    .concat();
    fixtures::definition(app, &children, &format!("  resyncSeconds: {resync}\n"))
}

async fn until<F, Fut>(what: &str, timeout: Duration, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !check().await {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    start.elapsed()
}

fn apps(client: &Client, ns: &str, p: Parents) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(p.group, p.version, p.kind), p.plural);
    Api::namespaced_with(client.clone(), ns, &ar)
}

fn app(name: &str, p: Parents) -> DynamicObject {
    serde_json::from_value(
        json!({"apiVersion": format!("{}/{}", p.group, p.version), "kind": p.kind, "metadata": {"name": name},
        "spec": {"greeting": "hello"}}),
    )
    .unwrap()
}

/// Creates `objects` through `api`, [`PLAIN_CONCURRENCY`] at a time; one that exists
/// already is fine.
async fn create_all<K>(api: &Api<K>, objects: impl IntoIterator<Item = K>, what: &str)
where
    K: Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    futures::stream::iter(objects)
        .map(|object| async move {
            match api.create(&PostParams::default(), &object).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
                Err(e) => Err(e),
            }
        })
        .buffer_unordered(PLAIN_CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await
        .unwrap_or_else(|e| panic!("create {what}: {e}"));
}

async fn create_parents(api: &Api<DynamicObject>, names: &[String], p: Parents) {
    futures::stream::iter(names.iter().cloned())
        .map(|n| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &app(&n, p)).await.map(|_| ()) }
        })
        .buffer_unordered(PLAIN_CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await
        .expect("create parents");
}

async fn count_ready(api: &Api<DynamicObject>) -> usize {
    let list = api
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    list.iter().filter(|a| observe::is_ready(a)).count()
}

/// Children of any controller here (ConfigMaps, Deployments, Services and Secrets): each
/// labels what it manages with
/// `app.kubernetes.io/managed-by`.
async fn count_children(client: &Client, ns: &str) -> usize {
    let lp = ListParams::default().labels("app.kubernetes.io/managed-by");
    let cms = Api::<ConfigMap>::namespaced(client.clone(), ns)
        .list(&lp)
        .await
        .map(|l| l.items.len())
        .unwrap_or(0);
    let deps = Api::<Deployment>::namespaced(client.clone(), ns)
        .list(&lp)
        .await
        .map(|l| l.items.len())
        .unwrap_or(0);
    let svcs = Api::<k8s_openapi::api::core::v1::Service>::namespaced(client.clone(), ns)
        .list(&lp)
        .await
        .map(|l| l.items.len())
        .unwrap_or(0);
    let secrets = Api::<Secret>::namespaced(client.clone(), ns)
        .list(&lp)
        .await
        .map(|l| l.items.len())
        .unwrap_or(0);
    cms + deps + svcs + secrets
}

/// The parents B1 creates at once: N less the latency samples created meanwhile.
fn bulk_names(n: usize, samples: usize) -> Vec<String> {
    (0..n.saturating_sub(samples)).map(|i| format!("app-{i}")).collect()
}

/// Deletes the idle latency samples and waits for their children to go, so that B1 starts
/// from an empty namespace.
async fn clear(client: &Client, api: &Api<DynamicObject>, ns: &str) {
    delete_all(api).await;
    until("the latency samples to be gone", Duration::from_secs(600), || async {
        count_children(client, ns).await == 0
            && api
                .list(&ListParams::default().limit(1))
                .await
                .is_ok_and(|l| l.items.is_empty())
    })
    .await;
}

/// Deletes every parent of `api`. The request can outlive the connection while the API
/// server works through a large collection; it is then repeated until it is answered
/// (30,000 Lites took more than 10 minutes).
async fn delete_all(api: &Api<DynamicObject>) {
    until(
        "a delete of every parent to be answered",
        Duration::from_secs(3600),
        || async {
            match api
                .delete_collection(&DeleteParams::default(), &ListParams::default())
                .await
            {
                Ok(_) => true,
                Err(e) => {
                    eprintln!("delete collection: {e}; repeating");
                    false
                }
            }
        },
    )
    .await;
}

/// Records a sorted latency sample's p50 and p99, in milliseconds, under `keys`.
fn record_latency(results: &mut BTreeMap<&str, Value>, keys: [&'static str; 2], sorted: &[Duration]) {
    for (key, p) in keys.into_iter().zip([0.5, 0.99]) {
        results.insert(key, json!(percentile(sorted, p).as_secs_f64() * 1000.0));
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Sequential create → all three children exist, in milliseconds.
async fn latency(client: &Client, ns: &str, samples: usize, prefix: &str, p: Parents) -> Vec<Duration> {
    let api = apps(client, ns, p);
    let cms = Api::<ConfigMap>::namespaced(client.clone(), ns);
    let deps = Api::<Deployment>::namespaced(client.clone(), ns);
    let svcs = Api::<k8s_openapi::api::core::v1::Service>::namespaced(client.clone(), ns);
    let mut out = Vec::new();
    for i in 0..samples {
        let name = format!("{prefix}-{i}");
        let started = Instant::now();
        api.create(&PostParams::default(), &app(&name, p)).await.unwrap();
        loop {
            let (cm, dep, svc) = tokio::join!(cms.get_opt(&name), deps.get_opt(&name), svcs.get_opt(&name));
            if matches!((cm, dep, svc), (Ok(Some(_)), Ok(Some(_)), Ok(Some(_)))) {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(600),
                "{name} never got its children"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        out.push(started.elapsed());
    }
    out.sort();
    out
}

/// One run's sizes and what its phases share.
struct Bench {
    client: Client,
    n: usize,
    samples: usize,
    /// B3's idle window, in seconds.
    idle: u64,
    replicas: u64,
    /// Scratch space: definitions, kubeconfigs and the parts' files.
    dir: tempfile::TempDir,
    /// The App definition's directory.
    defs: PathBuf,
    /// A kubeconfig with the RBAC `stencil rbac` derives for the App definition.
    kubeconfig: PathBuf,
    log: PathBuf,
}

/// B1-B7's namespace.
const NS: &str = "bench";

/// Another team's namespace: B2 is sampled there too while B1's burst runs in [`NS`].
const TENANT_NS: &str = "bench-tenant";

impl Bench {
    /// Sizes from the environment, the App definition written, the rig cleared.
    async fn start() -> Bench {
        let n = env_or("BENCH_N", 1000) as usize;
        let resync = env_or("BENCH_RESYNC_SECONDS", 30);
        // 0 skips the pods: a memory run at 10k parents that does not wait on kwok.
        let replicas = env_or("BENCH_REPLICAS", 1);
        let client = admin().await;
        remove_leftover_namespaces(&client).await;
        let dir = tempfile::tempdir().unwrap();
        let defs = dir.path().join("definitions");
        std::fs::create_dir(&defs).unwrap();
        std::fs::write(defs.join("apps.yaml"), definition(resync, replicas)).unwrap();
        let kubeconfig = service_account_kubeconfig(&client, "stencil", stencil_rbac(&defs), dir.path()).await;
        namespace(&client, NS).await;
        namespace(&client, TENANT_NS).await;
        let log = root().join("target/bench/stencil.log");
        std::fs::create_dir_all(log.parent().unwrap()).unwrap();
        Bench {
            client,
            n,
            samples: env_or("BENCH_LATENCY_SAMPLES", 200) as usize,
            idle: env_or("BENCH_IDLE_SECONDS", 300),
            replicas,
            dir,
            defs,
            kubeconfig,
            log,
        }
    }

    /// Runs the part `part` alone (b1b, recheck, shard, rollout, decorate or convert).
    async fn part(&self, part: &str, results: &mut BTreeMap<&'static str, Value>) {
        let (client, dir, n) = (&self.client, self.dir.path(), self.n);
        match part {
            "b1b" => lite::run(client, dir, n, results).await,
            "shard" => shard::run(client, dir, n, results).await,
            "rollout" => rollout::run(client, dir, n, results).await,
            "decorate" => self.decorate(results).await,
            "recheck" => recheck::run(client, dir, (n, self.samples), results).await,
            _ => convert::run(client, dir, (n, self.samples), results).await,
        }
    }

    async fn decorate(&self, results: &mut BTreeMap<&'static str, Value>) {
        let others = env_or("BENCH_DECORATE_OTHERS", 10_000) as usize;
        decorate::run(&self.client, self.dir.path(), (others, self.samples, self.n), results).await;
    }

    /// Stencil's own B1-B7 on the App definition; returns B1's convergence time.
    async fn stencil(&self, results: &mut BTreeMap<&'static str, Value>) -> Duration {
        let stencil = Controller::stencil(&self.defs, &self.kubeconfig, &self.log);
        let api = apps(&self.client, NS, APPS);
        until("the App kind to be served", Duration::from_secs(120), || async {
            api.list(&ListParams::default().limit(1)).await.is_ok()
        })
        .await;
        until("Stencil to serve the definition", Duration::from_secs(60), || async {
            stencil.metric("stencil_definitions{state=\"running\"}").await >= 1.0
        })
        .await;
        // B4's base: the definition served, no parent yet.
        let base_rss = stencil.rss_kib().0;
        results.insert("b4_base_rss_mib", json!(base_rss as f64 / 1024.0));
        let idle_latency = latency(&self.client, NS, self.samples, "lat", APPS).await;
        record_latency(results, ["b2_idle_p50_ms", "b2_idle_p99_ms"], &idle_latency);
        let converge = self.converge(&stencil, &api, base_rss, results).await;
        self.steady_state(&stencil, results).await;
        stencil.stop();
        let restarted = self.restart(results).await;
        self.delete(&api, results).await;
        save(results);
        restarted.stop();
        converge
    }

    /// B1 convergence of N parents, with B4/B5 sampled; B2 is sampled again while the
    /// creates run: in B1's namespace (its parents part of the N), in another, and on
    /// the floor beside Stencil.
    async fn converge(
        &self,
        stencil: &Controller,
        api: &Api<DynamicObject>,
        base_rss: u64,
        results: &mut BTreeMap<&'static str, Value>,
    ) -> Duration {
        let n = self.n;
        clear(&self.client, api, NS).await;
        let names = bulk_names(n, self.samples);
        let beside = floor::Beside::start(&self.client, (self.samples, self.replicas), results).await;
        let mut observer = Observer::start(&self.client, NS, APPS).await;
        let cpu_before = stencil.cpu_seconds();
        let started = Instant::now();
        let ((), busy_latency, tenant_latency, beside_latency) = tokio::join!(
            create_parents(api, &names, APPS),
            latency(&self.client, NS, self.samples, "busy", APPS),
            latency(&self.client, TENANT_NS, self.samples, "tenant", APPS),
            beside.sample("busy")
        );
        record_latency(results, ["b2_busy_p50_ms", "b2_busy_p99_ms"], &busy_latency);
        record_latency(results, ["b2_tenant_p50_ms", "b2_tenant_p99_ms"], &tenant_latency);
        beside.stop(&beside_latency, results).await;
        for (ratio, busy) in [
            ("b2_busy_over_idle", "b2_busy_p50_ms"),
            ("b2_tenant_over_idle", "b2_tenant_p50_ms"),
        ] {
            floor::insert_ratio(results, ratio, busy, "b2_idle_p50_ms");
        }
        // From the first create, as the plain client's time is.
        let converge = observer.converged(n, 3 * n, Duration::from_secs(3600)).await - started;
        drop(observer);
        let cpu = stencil.cpu_seconds() - cpu_before;
        let (rss, peak) = stencil.rss_kib();
        results.insert("b1_converge_s", json!(converge.as_secs_f64()));
        results.insert("b4_rss_mib", json!(rss as f64 / 1024.0));
        results.insert(
            "b4_kib_per_parent",
            json!(rss.saturating_sub(base_rss) as f64 / n as f64),
        );
        results.insert("b4_peak_mib", json!(peak as f64 / 1024.0));
        results.insert("b5_cpu_s_per_1k", json!(cpu * 1000.0 / n as f64));
        clear(&self.client, &apps(&self.client, TENANT_NS, APPS), TENANT_NS).await;
        converge
    }

    /// B3 steady state: an idle window spanning resyncs; writes must be zero (the
    /// Deployment asks for `cpu: 1000m`, which the API server stores as `"1"`).
    async fn steady_state(&self, stencil: &Controller, results: &mut BTreeMap<&'static str, Value>) {
        let idle = self.idle;
        tokio::time::sleep(Duration::from_secs(5)).await;
        let writes_before = stencil.writes().await;
        let cpu_idle_before = stencil.cpu_seconds();
        let reconciles_before = stencil.metric("controller_runtime_reconcile_total").await;
        tokio::time::sleep(Duration::from_secs(idle)).await;
        results.insert("b3_idle_s", json!(idle));
        results.insert("b3_writes", json!(stencil.writes().await - writes_before));
        results.insert(
            "b3_reconciles",
            json!(stencil.metric("controller_runtime_reconcile_total").await - reconciles_before),
        );
        results.insert(
            "b5_idle_cpu_percent",
            json!((stencil.cpu_seconds() - cpu_idle_before) * 100.0 / idle as f64),
        );
        results.insert("b4_steady_rss_mib", json!(stencil.rss_kib().0 as f64 / 1024.0));
    }

    /// B6 restart with everything in place; returns the restarted Stencil, which serves
    /// B7.
    async fn restart(&self, results: &mut BTreeMap<&'static str, Value>) -> Controller {
        let restarted = Controller::stencil(&self.defs, &self.kubeconfig, &self.log);
        let first = until(
            "the first reconcile after a restart",
            Duration::from_secs(300),
            || async { restarted.metric("controller_runtime_reconcile_total").await >= 1.0 },
        )
        .await;
        until(
            "every parent reconciled after the restart",
            Duration::from_secs(600),
            || async { restarted.metric("controller_runtime_reconcile_total").await >= self.n as f64 },
        )
        .await;
        results.insert("b6_first_reconcile_s", json!(first.as_secs_f64()));
        results.insert("b6_writes", json!(restarted.writes().await));
        results.insert("b6_rss_mib", json!(restarted.rss_kib().0 as f64 / 1024.0));
        restarted
    }

    /// B7 deletion of every parent, until their children are gone.
    async fn delete(&self, api: &Api<DynamicObject>, results: &mut BTreeMap<&'static str, Value>) {
        let started = Instant::now();
        delete_all(api).await;
        until(
            "every parent and child to be gone",
            Duration::from_secs(1800),
            || async {
                count_children(&self.client, NS).await == 0
                    && api
                        .list(&ListParams::default().limit(1))
                        .await
                        .is_ok_and(|l| l.items.is_empty())
            },
        )
        .await;
        results.insert("b7_delete_s", json!(started.elapsed().as_secs_f64()));
    }

    /// kro, the limit and the floor, then every part, each saved as it ends.
    async fn peers_and_parts(&self, converge: Duration, results: &mut BTreeMap<&'static str, Value>) {
        let (client, n) = (&self.client, self.n);
        if self.replicas == 1 {
            kro(client, n, self.samples, self.dir.path(), results).await;
            save(results);
        } else {
            results.insert("kro_skipped", json!("its graph waits for one available replica"));
        }
        let plain = plain_client(client, n, self.replicas).await;
        results.insert("limit_plain_s", json!(plain.as_secs_f64()));
        results.insert("b1_ratio", json!(converge.as_secs_f64() / plain.as_secs_f64()));
        results.insert(
            "etcd",
            json!("kwokctl binary runtime defaults: etcd with fsync on, one member, loopback"),
        );
        save(results);
        floor::run(client, (n, self.samples, self.replicas), results).await;
        save(results);
        for part in ["b1b", "recheck", "shard", "rollout", "decorate", "convert"] {
            self.part(part, results).await;
            save(results);
        }
    }
}

#[tokio::main]
async fn main() {
    let bench = Bench::start().await;
    let mut results: BTreeMap<&str, Value> = BTreeMap::new();
    results.insert("n", json!(bench.n));
    results.insert("replicas", json!(bench.replicas));
    // A part alone keeps the other figures of the last run; BENCH_PART=b4 runs
    // Stencil's own B1-B7 (B4 at 10,000 parents without the rest).
    let part = std::env::var("BENCH_PART").unwrap_or_default();
    let alone = ["b1b", "recheck", "decorate", "convert", "shard", "rollout"].contains(&part.as_str());
    if alone || part == "b4" {
        keep_saved(&mut results);
    }
    if alone {
        bench.part(&part, &mut results).await;
    } else {
        let converge = bench.stencil(&mut results).await;
        if part != "b4" {
            bench.peers_and_parts(converge, &mut results).await;
        }
    }
    report(&results);
}
