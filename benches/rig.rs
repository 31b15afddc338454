//! `make bench`: Stencil against the API server's own limit on the rig. Measures
//! convergence (B1), create-to-children latency (B2), steady-state writes (B3), memory
//! (B4), CPU (B5), restart (B6) and deletion (B7), and a plain kube client making the same
//! writes; B2 against a watching plain client ([`floor`]); convergence of children that
//! need no controller manager (B1b, [`lite`]); B1b's and B4's parents over three sharded
//! replicas ([`shard`]); then a decorator and a selector lookup (B8, B9, [`decorate`])
//! and conversion through the webhook (B10, [`convert`]); a canary rollout of an edit
//! over B1b's parents (B11, [`rollout`]). BENCH_PART=b1b, shard, rollout, decorate or
//! convert runs that part alone; BENCH_PART=b4 runs Stencil's B1-B7 and stops there. Sizes come from BENCH_N,
//! BENCH_LATENCY_SAMPLES, BENCH_IDLE_SECONDS and BENCH_DECORATE_OTHERS; results go to
//! stdout, target/bench/results.md and target/bench/results.json.

#[path = "rig/convert.rs"]
mod convert;
#[path = "rig/decorate.rs"]
mod decorate;
#[path = "rig/floor.rs"]
mod floor;
#[path = "rig/lite.rs"]
mod lite;
#[path = "rig/observe.rs"]
mod observe;
#[path = "rig/rollout.rs"]
mod rollout;
#[path = "rig/shard.rs"]
mod shard;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, Config};
use observe::Observer;
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

fn kubeconfig_path() -> PathBuf {
    std::env::var("STENCIL_TEST_KUBECONFIG")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root().join("target/testenv/kubeconfig"))
}

async fn admin() -> Client {
    let kc = Kubeconfig::read_from(kubeconfig_path()).expect("a kubeconfig: run `make testenv-up`");
    Client::try_from(
        Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .unwrap(),
    )
    .unwrap()
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

/// Stencil's rules, as `stencil rbac` derives them for the bench's definition.
fn stencil_rbac(defs: &Path) -> Vec<Value> {
    rbac_for(defs, &[])
}

/// The rules `stencil rbac` derives for `defs`, with `extra` arguments.
fn rbac_for(defs: &Path, extra: &[&str]) -> Vec<Value> {
    let rbac = Command::new(stencil_bin())
        .args([
            "rbac",
            "--definitions",
            defs.to_str().unwrap(),
            "--no-cluster-definitions",
            "--name",
            "stencil-bench",
            "--service-account",
            "stencil-bench/stencil",
        ])
        .args(extra)
        .output()
        .unwrap();
    assert!(rbac.status.success(), "{}", String::from_utf8_lossy(&rbac.stderr));
    stencil::yaml::documents::<Value>(&String::from_utf8(rbac.stdout).unwrap()).unwrap()
}

/// kro's rules: its chart's default, every verb on every resource.
fn kro_rbac() -> Vec<Value> {
    vec![
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "kro-bench"},
            "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "kro-bench"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kro-bench"},
            "subjects": [{"kind": "ServiceAccount", "namespace": "stencil-bench", "name": "kro"}]}),
    ]
}

/// A non-admin identity: the ServiceAccount `stencil-bench/<sa>` bound to `rbac`, so API
/// Priority and Fairness applies as it would in production.
async fn service_account_kubeconfig(client: &Client, sa: &str, rbac: Vec<Value>, dir: &Path) -> PathBuf {
    let ns = "stencil-bench";
    let nss: Api<Namespace> = Api::all(client.clone());
    let _ = nss
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
        )
        .await;
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let _ = sas
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": sa}})).unwrap(),
        )
        .await;
    for obj in rbac {
        let kind = obj["kind"].as_str().unwrap();
        let plural = format!("{}s", kind.to_lowercase());
        let ar =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", kind), &plural);
        let api: Api<DynamicObject> = match obj["metadata"]["namespace"].as_str() {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        };
        let name = obj["metadata"]["name"].as_str().unwrap();
        api.patch(name, &PatchParams::apply("bench").force(), &Patch::Apply(&obj))
            .await
            .unwrap();
    }
    let tr: TokenRequest = serde_json::from_value(json!({"spec": {"expirationSeconds": 86400}})).unwrap();
    let token: TokenRequest = sas
        .create_subresource("token", sa, &PostParams::default(), &tr)
        .await
        .unwrap();
    let token = token.status.and_then(|s| s.token).expect("a token");
    let mut kc = Kubeconfig::read_from(kubeconfig_path()).unwrap();
    for auth in &mut kc.auth_infos {
        if let Some(info) = auth.auth_info.as_mut() {
            info.client_certificate = None;
            info.client_key = None;
            info.client_certificate_data = None;
            info.client_key_data = None;
            info.token = Some(token.clone().into());
        }
    }
    let path = dir.join(format!("{sa}-kubeconfig.yaml"));
    std::fs::write(&path, stencil::yaml::to_string(&kc).unwrap()).unwrap();
    path
}

fn stencil_bin() -> PathBuf {
    std::env::var("STENCIL_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root().join("target/release/stencil"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A controller process under measurement: Stencil or kro.
struct Controller {
    child: Child,
    metrics: String,
}

impl Controller {
    fn spawn(mut command: Command, metrics: String, kubeconfig: &Path, log: &Path) -> Controller {
        let file = std::fs::File::create(log).unwrap();
        let child = command
            .env("KUBECONFIG", kubeconfig)
            .stdout(Stdio::from(file.try_clone().unwrap()))
            .stderr(Stdio::from(file))
            .spawn()
            .expect("start the controller");
        Controller { child, metrics }
    }

    fn stencil(defs: &Path, kubeconfig: &Path, log: &Path) -> Controller {
        Controller::stencil_with(defs, kubeconfig, log, &[], None)
    }

    /// Stencil with extra arguments, and `POD_NAME` when given.
    fn stencil_with(defs: &Path, kubeconfig: &Path, log: &Path, extra: &[String], pod: Option<&str>) -> Controller {
        let metrics = format!("127.0.0.1:{}", free_port());
        let mut command = Command::new(stencil_bin());
        command
            .args(["run", "--no-cluster-definitions", "--concurrency", "32"])
            .arg(format!("--definitions={}", defs.display()))
            .arg(format!("--metrics-addr={metrics}"))
            .args(extra)
            .env("RUST_LOG", "stencil=warn")
            // Where it keeps the definitions' revisions, as the chart's release namespace.
            .env("POD_NAMESPACE", "stencil-bench");
        if let Some(pod) = pod {
            command.env("POD_NAME", pod);
        }
        Controller::spawn(command, metrics, kubeconfig, log)
    }

    /// kro with the same concurrency as Stencil and client limits that do not hold it
    /// back below the API server's own.
    fn kro(bin: &Path, kubeconfig: &Path, log: &Path) -> Controller {
        let metrics = format!("127.0.0.1:{}", free_port());
        let mut command = Command::new(bin);
        command
            .arg(format!("--metrics-bind-address={metrics}"))
            .arg(format!("--health-probe-bind-address=127.0.0.1:{}", free_port()))
            .args([
                "--dynamic-controller-concurrent-reconciles=32",
                "--client-qps=500",
                "--client-burst=1000",
            ]);
        Controller::spawn(command, metrics, kubeconfig, log)
    }

    /// Sum of every sample of a metric whose line starts with `prefix`.
    async fn metric(&self, prefix: &str) -> f64 {
        let Ok(body) = http_get(&self.metrics, "/metrics").await else {
            return 0.0;
        };
        body.lines()
            .filter(|l| l.starts_with(prefix))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    async fn writes(&self) -> f64 {
        let total = self.metric("rest_client_requests_total").await;
        total - self.metric("rest_client_requests_total{method=\"GET\"}").await
    }

    fn rss_kib(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        let field = |k: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(k)?.split_whitespace().next()?.parse().ok())
                .unwrap_or(0)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }

    fn cpu_seconds(&self) -> f64 {
        cpu_seconds_of(self.child.id())
    }

    /// Stops the controller gracefully (SIGTERM).
    fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// A benchmark that fails part way must not leave its controller running against the
/// next rig.
impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn http_get(addr: &str, path: &str) -> std::io::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await?;
    let mut out = String::new();
    s.read_to_string(&mut out).await?;
    Ok(out)
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

/// CPU seconds (user and system) a process has used.
fn cpu_seconds_of(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, r)| r.split_whitespace().collect())
        .unwrap_or_default();
    let ticks: f64 = fields.get(11).and_then(|u| u.parse::<f64>().ok()).unwrap_or(0.0)
        + fields.get(12).and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
    ticks / 100.0
}

/// CPU seconds the rig's API server and etcd have used: what a contender's writes cost
/// the control plane, read before and after it converges.
fn server_cpu_seconds() -> f64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let program = cmdline.split(|b| *b == 0).next().unwrap_or_default();
            program.ends_with(b"/kube-apiserver") || program.ends_with(b"/etcd")
        })
        .map(cpu_seconds_of)
        .sum()
}

/// Makes an empty namespace `name`, deleting one left by an earlier run first.
async fn namespace(client: &Client, name: &str) {
    remove_namespace(client, name).await;
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name}})).unwrap(),
        )
        .await
        .unwrap();
}

/// Deletes namespace `name` and waits until it is gone; whether it existed.
async fn remove_namespace(client: &Client, name: &str) -> bool {
    // Parents left by an interrupted run may hold Stencil's finalizer with no Stencil to
    // release it.
    let leftovers = apps(client, name, APPS);
    if let Ok(list) = leftovers.list(&ListParams::default()).await {
        for a in list.items {
            let patch = json!({"metadata": {"finalizers": null}});
            let _ = leftovers
                .patch(
                    &a.metadata.name.unwrap_or_default(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await;
        }
    }
    let api: Api<Namespace> = Api::all(client.clone());
    let deleted = api.delete(name, &DeleteParams::default()).await.is_ok();
    until(&format!("namespace {name} to go"), Duration::from_secs(300), || async {
        matches!(api.get_opt(name).await, Ok(None))
    })
    .await;
    deleted
}

/// Deletes the namespaces an earlier run left (every `bench` and `bench-*`). For 30 s
/// after a namespace is deleted, the API server's NamespaceLifecycle admission reads a
/// namespace of that name from etcd on every write into it (about five GETs per parent
/// in B1b), which would be charged to whoever runs next in it: so the run waits that
/// out once here, and each part's namespace is new to the API server.
async fn remove_leftover_namespaces(client: &Client) {
    let names: Vec<String> = Api::<Namespace>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("list namespaces")
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .filter(|n| n == "bench" || n.starts_with("bench-"))
        .collect();
    let removed = futures::future::join_all(names.iter().map(|n| remove_namespace(client, n))).await;
    if removed.contains(&true) {
        tokio::time::sleep(NAMESPACE_LIVE_LOOKUP).await;
    }
}

/// The limit: the same creates and status writes from a plain client, which writes a
/// parent's Ready condition once its Deployment is Available, as Stencil does.
async fn plain_client(client: &Client, n: usize, replicas: u64) -> Duration {
    let ns = "bench-plain";
    namespace(client, ns).await;
    let started = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let client = client.clone();
            async move {
                let name = format!("plain-{i}");
                let parents = apps(&client, ns, APPS);
                parents.create(&PostParams::default(), &app(&name, APPS)).await?;
                let pp = PostParams::default();
                let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}, "data": {"greeting": "hello"}})).unwrap();
                Api::<ConfigMap>::namespaced(client.clone(), ns).create(&pp, &cm).await?;
                let svc = serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"clusterIP": "None", "selector": {"app": name}, "ports": [{"port": 80}]}})).unwrap();
                Api::<k8s_openapi::api::core::v1::Service>::namespaced(client.clone(), ns).create(&pp, &svc).await?;
                let dep: Deployment = serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"replicas": replicas,
                    "selector": {"matchLabels": {"app": name}}, "template": {"metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "app", "image": "nginx",
                        "resources": {"requests": {"cpu": "1000m", "memory": "64Mi"}}}]}}}})).unwrap();
                Api::<Deployment>::namespaced(client.clone(), ns).create(&pp, &dep).await?;
                Ok::<_, kube::Error>(())
            }
        })
        .buffer_unordered(PLAIN_CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await
        .expect("plain client writes");
    let deployments = Api::<Deployment>::namespaced(client.clone(), ns);
    let parents = apps(client, ns, APPS);
    let mut ready = std::collections::HashSet::new();
    while ready.len() < n {
        assert!(
            started.elapsed() < Duration::from_secs(3600),
            "plain client: deployments never became available"
        );
        let available: Vec<String> = deployments
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
            .into_iter()
            .filter(|d| {
                d.status.as_ref().is_some_and(|s| {
                    s.observed_generation.unwrap_or(0) >= 1 && s.available_replicas.unwrap_or(0) as u64 >= replicas
                })
            })
            .filter_map(|d| d.metadata.name)
            .filter(|name| !ready.contains(name))
            .collect();
        let status = Patch::Merge(
            json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Plain", "message": ""}]}}),
        );
        let params = PatchParams::default();
        futures::stream::iter(available.iter())
            .map(|name| parents.patch_status(name, &params, &status))
            .buffer_unordered(PLAIN_CONCURRENCY)
            .try_collect::<Vec<_>>()
            .await
            .expect("plain client status writes");
        ready.extend(available);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let elapsed = started.elapsed();
    let nss: Api<Namespace> = Api::all(client.clone());
    let _ = nss.delete(ns, &DeleteParams::default()).await;
    elapsed
}

/// kro's equivalent of the bench definition: the same three children, Ready once the
/// Deployment is available.
fn kro_graph() -> Value {
    let name = "${schema.metadata.name}";
    json!({
        "apiVersion": "kro.run/v1alpha1",
        "kind": "ResourceGraphDefinition",
        "metadata": {"name": "kapps"},
        "spec": {
            "schema": {"apiVersion": "v1alpha1", "kind": "KApp", "spec": {"greeting": "string"}},
            "resources": [
                {"id": "config", "template": {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name}, "data": {"greeting": "${schema.spec.greeting}"}}},
                {"id": "service", "template": {"apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": name},
                    "spec": {"clusterIP": "None", "selector": {"app": name}, "ports": [{"port": 80}]}}},
                {"id": "deployment",
                    "readyWhen": ["${deployment.status.availableReplicas == 1}"],
                    "template": {"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": name},
                    "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                        "template": {"metadata": {"labels": {"app": name}},
                            "spec": {"containers": [{"name": "app", "image": "nginx",
                        "resources": {"requests": {"cpu": "1000m", "memory": "64Mi"}}}]}}}}},
            ],
        },
    })
}

/// The built kro, or why there is none.
fn kro_dir() -> Result<PathBuf, String> {
    if std::env::var("BENCH_KRO").is_ok_and(|v| v == "0") {
        return Err("BENCH_KRO=0".into());
    }
    let versions = std::fs::read_to_string(root().join("tests/testenv/versions.env")).unwrap();
    let version = versions
        .lines()
        .find_map(|l| l.strip_prefix("KRO_VERSION="))
        .expect("KRO_VERSION in versions.env");
    let cache = std::env::var("STENCIL_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/stencil"));
    let dir = cache.join(format!("bin/kro-{version}"));
    if dir.join(".complete").exists() {
        Ok(dir)
    } else {
        Err(format!("kro {version} is not built: run `tests/testenv/build.sh kro`"))
    }
}

async fn apply_all(client: &Client, objects: Vec<Value>) {
    for obj in objects {
        let (group, version) = match obj["apiVersion"].as_str().unwrap().split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), obj["apiVersion"].as_str().unwrap().to_string()),
        };
        let kind = obj["kind"].as_str().unwrap();
        let plural = match kind {
            "CustomResourceDefinition" => "customresourcedefinitions".to_string(),
            _ => format!("{}s", kind.to_lowercase()),
        };
        let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, &version, kind), &plural);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        let name = obj["metadata"]["name"].as_str().unwrap();
        api.patch(name, &PatchParams::apply("bench").force(), &Patch::Apply(&obj))
            .await
            .unwrap_or_else(|e| panic!("apply {kind} {name}: {e}"));
    }
}

/// Installs kro's CRDs from its build.
async fn kro_crds(client: &Client, kro: &Path) {
    let mut crds = Vec::new();
    for entry in std::fs::read_dir(kro.join("crds")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        crds.extend(stencil::yaml::documents::<Value>(&text).unwrap());
    }
    apply_all(client, crds).await;
    // A new rig serves them only once they are established.
    let graphs = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kro.run", "v1alpha1", "ResourceGraphDefinition"),
        "resourcegraphdefinitions",
    );
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &graphs);
    until("kro's CRDs to be served", Duration::from_secs(60), || async {
        api.list(&ListParams::default().limit(1)).await.is_ok()
    })
    .await;
}

/// The peer: kro runs the equivalent graph at the same N, on the same rig, under the same
/// conditions (a non-admin identity, the same concurrency).
async fn kro(client: &Client, n: usize, samples: usize, dir: &Path, results: &mut BTreeMap<&str, Value>) {
    let kro = match kro_dir() {
        Ok(kro) => kro,
        Err(why) => {
            results.insert("kro_skipped", json!(why));
            return;
        }
    };
    kro_crds(client, &kro).await;
    let kubeconfig = service_account_kubeconfig(client, "kro", kro_rbac(), dir).await;
    let controller = Controller::kro(&kro.join("kro"), &kubeconfig, &root().join("target/bench/kro.log"));
    apply_all(client, vec![kro_graph()]).await;
    let ns = "bench-kro";
    namespace(client, ns).await;
    let api = apps(client, ns, KRO_APPS);
    until("kro to serve the KApp kind", Duration::from_secs(120), || async {
        api.list(&ListParams::default().limit(1)).await.is_ok()
    })
    .await;

    let idle = latency(client, ns, samples, "lat", KRO_APPS).await;
    record_latency(results, ["kro_b2_idle_p50_ms", "kro_b2_idle_p99_ms"], &idle);

    clear(client, &api, ns).await;
    let names = bulk_names(n, samples);
    let mut observer = Observer::start(client, ns, KRO_APPS).await;
    let cpu_before = controller.cpu_seconds();
    let started = Instant::now();
    let ((), busy) = tokio::join!(
        create_parents(&api, &names, KRO_APPS),
        latency(client, ns, samples, "busy", KRO_APPS)
    );
    record_latency(results, ["kro_b2_busy_p50_ms", "kro_b2_busy_p99_ms"], &busy);
    let converged = observer.converged(n, 3 * n, Duration::from_secs(3600)).await;
    drop(observer);
    results.insert("kro_b1_converge_s", json!((converged - started).as_secs_f64()));
    let (rss, peak) = controller.rss_kib();
    results.insert("kro_b4_rss_mib", json!(rss as f64 / 1024.0));
    results.insert("kro_b4_peak_mib", json!(peak as f64 / 1024.0));
    results.insert(
        "kro_b5_cpu_s_per_1k",
        json!((controller.cpu_seconds() - cpu_before) * 1000.0 / n as f64),
    );

    let started = Instant::now();
    delete_all(&api).await;
    until("kro's children to be gone", Duration::from_secs(1800), || async {
        count_children(client, ns).await == 0
    })
    .await;
    results.insert("kro_b7_delete_s", json!(started.elapsed().as_secs_f64()));
    controller.stop();
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
/// server works through a large collection; it is then repeated until it is answered.
async fn delete_all(api: &Api<DynamicObject>) {
    until(
        "a delete of every parent to be answered",
        Duration::from_secs(600),
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

#[tokio::main]
async fn main() {
    let n = env_or("BENCH_N", 1000) as usize;
    let samples = env_or("BENCH_LATENCY_SAMPLES", 200) as usize;
    let idle = env_or("BENCH_IDLE_SECONDS", 300);
    let resync = env_or("BENCH_RESYNC_SECONDS", 30);
    // 0 skips the pods: a memory run at 10k parents that does not wait on kwok.
    let replicas = env_or("BENCH_REPLICAS", 1);
    let client = admin().await;
    remove_leftover_namespaces(&client).await;
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("definitions");
    std::fs::create_dir(&defs).unwrap();
    std::fs::write(defs.join("apps.yaml"), definition(resync, replicas)).unwrap();
    let sa_kubeconfig = service_account_kubeconfig(&client, "stencil", stencil_rbac(&defs), dir.path()).await;
    let ns = "bench";
    namespace(&client, ns).await;
    let log = root().join("target/bench/stencil.log");
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    let mut results: BTreeMap<&str, Value> = BTreeMap::new();
    results.insert("n", json!(n));
    results.insert("replicas", json!(replicas));
    // BENCH_PART=decorate runs B8 and B9 alone, and BENCH_PART=convert B10 alone,
    // keeping the other figures of the last run.
    // BENCH_PART=b4 runs Stencil's own B1-B7 (B4 at 10,000 parents without the rest).
    let part = std::env::var("BENCH_PART").unwrap_or_default();
    if part == "b4" {
        keep_saved(&mut results);
    }
    if ["b1b", "decorate", "convert", "shard", "rollout"].contains(&part.as_str()) {
        keep_saved(&mut results);
        if part == "b1b" {
            lite::run(&client, dir.path(), n, &mut results).await;
        } else if part == "shard" {
            shard::run(&client, dir.path(), n, &mut results).await;
        } else if part == "rollout" {
            rollout::run(&client, dir.path(), n, &mut results).await;
        } else if part == "decorate" {
            let others = env_or("BENCH_DECORATE_OTHERS", 10_000) as usize;
            decorate::run(&client, dir.path(), (others, samples, n), &mut results).await;
        } else {
            convert::run(&client, dir.path(), samples, &mut results).await;
        }
        report(&results);
        return;
    }

    let stencil = Controller::stencil(&defs, &sa_kubeconfig, &log);
    let api = apps(&client, ns, APPS);
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

    // B2 idle latency.
    let idle_latency = latency(&client, ns, samples, "lat", APPS).await;
    record_latency(&mut results, ["b2_idle_p50_ms", "b2_idle_p99_ms"], &idle_latency);

    // B1 convergence of N parents, with B4/B5 sampled; B2 is sampled again while the
    // creates run, its parents being part of the N.
    clear(&client, &api, ns).await;
    let names = bulk_names(n, samples);
    let mut observer = Observer::start(&client, ns, APPS).await;
    let cpu_before = stencil.cpu_seconds();
    let started = Instant::now();
    let ((), busy_latency) = tokio::join!(
        create_parents(&api, &names, APPS),
        latency(&client, ns, samples, "busy", APPS)
    );
    record_latency(&mut results, ["b2_busy_p50_ms", "b2_busy_p99_ms"], &busy_latency);
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

    // B3 steady state: an idle window spanning resyncs; writes must be zero (the
    // Deployment asks for `cpu: 1000m`, which the API server stores as `"1"`).
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
    stencil.stop();

    // B6 restart with everything in place.
    let restarted = Controller::stencil(&defs, &sa_kubeconfig, &log);
    let first = until(
        "the first reconcile after a restart",
        Duration::from_secs(300),
        || async { restarted.metric("controller_runtime_reconcile_total").await >= 1.0 },
    )
    .await;
    until(
        "every parent reconciled after the restart",
        Duration::from_secs(600),
        || async { restarted.metric("controller_runtime_reconcile_total").await >= n as f64 },
    )
    .await;
    results.insert("b6_first_reconcile_s", json!(first.as_secs_f64()));
    results.insert("b6_writes", json!(restarted.writes().await));
    results.insert("b6_rss_mib", json!(restarted.rss_kib().0 as f64 / 1024.0));

    // B7 deletion.
    let started = Instant::now();
    delete_all(&api).await;
    until(
        "every parent and child to be gone",
        Duration::from_secs(1800),
        || async {
            count_children(&client, ns).await == 0
                && api
                    .list(&ListParams::default().limit(1))
                    .await
                    .is_ok_and(|l| l.items.is_empty())
        },
    )
    .await;
    results.insert("b7_delete_s", json!(started.elapsed().as_secs_f64()));
    save(&results);
    restarted.stop();
    if part == "b4" {
        report(&results);
        return;
    }

    if replicas == 1 {
        kro(&client, n, samples, dir.path(), &mut results).await;
        save(&results);
    } else {
        results.insert("kro_skipped", json!("its graph waits for one available replica"));
    }

    // The limit: the same writes from a plain client.
    let plain = plain_client(&client, n, replicas).await;
    results.insert("limit_plain_s", json!(plain.as_secs_f64()));
    results.insert("b1_ratio", json!(converge.as_secs_f64() / plain.as_secs_f64()));
    results.insert(
        "etcd",
        json!("kwokctl binary runtime defaults: etcd with fsync on, one member, loopback"),
    );
    save(&results);

    floor::run(&client, (n, samples, replicas), &mut results).await;
    save(&results);
    lite::run(&client, dir.path(), n, &mut results).await;
    save(&results);
    shard::run(&client, dir.path(), n, &mut results).await;
    save(&results);
    rollout::run(&client, dir.path(), n, &mut results).await;
    save(&results);

    let others = env_or("BENCH_DECORATE_OTHERS", 10_000) as usize;
    decorate::run(&client, dir.path(), (others, samples, n), &mut results).await;
    convert::run(&client, dir.path(), samples, &mut results).await;

    report(&results);
}

/// One sharding row: the three members against one process, for the keys `shard_<case>*`.
fn shard_row(r: &BTreeMap<&str, Value>, case: &str) -> String {
    let key = |k: &str| format!("shard_{case}{k}");
    let f = |k: &str| r.get(key(k).as_str()).and_then(Value::as_f64).unwrap_or(f64::NAN);
    let list = |k: &str| {
        r.get(key(k).as_str())
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_f64)
                    .map(|v| format!("{v:.0}"))
                    .collect::<Vec<_>>()
                    .join(" / ")
            })
            .unwrap_or_else(|| "not run".into())
    };
    format!(
        "shares {} parents; RSS {} MiB (sum {:.1}) against {:.1} MiB for one process; converge {:.1} s against {:.1} s",
        list("parents"),
        list("rss_mib"),
        f("rss_sum_mib"),
        f("one_rss_mib"),
        f("converge_s"),
        f("one_converge_s")
    )
}

/// Adds the last run's figures that this run does not measure.
fn keep_saved(results: &mut BTreeMap<&'static str, Value>) {
    let saved = std::fs::read_to_string(root().join("target/bench/results.json")).unwrap_or_default();
    let saved: BTreeMap<String, Value> = serde_json::from_str(&saved).unwrap_or_default();
    for (k, v) in saved {
        // The bench is one short process; its keys live as long as it does.
        results.entry(Box::leak(k.into_boxed_str())).or_insert(v);
    }
}

fn report(r: &BTreeMap<&str, Value>) {
    let f = |k: &str| r.get(k).and_then(Value::as_f64).unwrap_or(f64::NAN);
    let kro = |text: String| match r.get("kro_skipped") {
        Some(why) => format!("not run: {}", why.as_str().unwrap_or_default()),
        None => text,
    };
    let ms = |prefix: &str| {
        format!(
            "p50 {:.0} ms, p99 {:.0} ms",
            f(&format!("{prefix}_p50_ms")),
            f(&format!("{prefix}_p99_ms"))
        )
    };
    let rows = [
        (
            "B1 converge N parents x 3 children, all Ready",
            format!("{:.1} s ({:.2}x the limit)", f("b1_converge_s"), f("b1_ratio")),
            format!("{:.1} s", f("limit_plain_s")),
            kro(format!(
                "{:.1} s ({:.2}x the limit)",
                f("kro_b1_converge_s"),
                f("kro_b1_converge_s") / f("limit_plain_s")
            )),
            "<= 1.25x",
        ),
        (
            "B1b converge N parents x 3 children ready on creation (ConfigMap, Secret, headless Service)",
            format!(
                "{:.1} s ({:.2}x the limit; {:.2}x Stencil's writes from a plain client) at N = {}",
                f("b1b_converge_s"),
                f("b1b_ratio"),
                f("b1b_writes_ratio"),
                f("b1b_n")
            ),
            format!(
                "{:.1} s; Stencil's writes: {:.1} s",
                f("b1b_plain_s"),
                f("b1b_writes_s")
            ),
            match r.get("b1b_kro_skipped") {
                Some(why) => format!("not run: {}", why.as_str().unwrap_or_default()),
                None => format!("{:.1} s ({:.1}x Stencil's time)", f("b1b_kro_s"), f("b1b_kro_ratio")),
            },
            "<= 1.10x; kro >= 3x",
        ),
        (
            "B1b API server and etcd CPU per parent converged",
            format!("{:.1} ms", f("b1b_server_cpu_ms_per_parent")),
            format!(
                "{:.1} ms; Stencil's writes: {:.1} ms",
                f("b1b_plain_server_cpu_ms_per_parent"),
                f("b1b_writes_server_cpu_ms_per_parent")
            ),
            match r.get("b1b_kro_skipped") {
                Some(_) => String::new(),
                None => format!("{:.1} ms", f("b1b_kro_server_cpu_ms_per_parent")),
            },
            "",
        ),
        (
            "B2 create -> children, idle",
            format!("{} ({:.2}x the floor's p50)", ms("b2_idle"), f("b2_idle_ratio")),
            ms("b2_floor_idle"),
            kro(ms("kro_b2_idle")),
            "p50 < 50 ms, <= 1.3x",
        ),
        (
            "B2 create -> children, during B1",
            format!("{} ({:.2}x the floor's p50)", ms("b2_busy"), f("b2_busy_ratio")),
            ms("b2_floor_busy"),
            kro(ms("kro_b2_busy")),
            "<= 1.3x",
        ),
        (
            "B3 steady state writes",
            format!(
                "{} in {} s ({} resync reconciles)",
                f("b3_writes"),
                f("b3_idle_s"),
                f("b3_reconciles")
            ),
            String::new(),
            String::new(),
            "0",
        ),
        (
            "B4 RSS",
            format!(
                "{:.1} MiB steady, {:.1} MiB peak; {:.1} MiB after a restart; {:.1} KiB per parent over {:.1} MiB with none",
                f("b4_steady_rss_mib"),
                f("b4_peak_mib"),
                f("b6_rss_mib"),
                f("b4_kib_per_parent"),
                f("b4_base_rss_mib")
            ),
            String::new(),
            kro(format!(
                "{:.1} MiB after B1, {:.1} MiB peak",
                f("kro_b4_rss_mib"),
                f("kro_b4_peak_mib")
            )),
            "< 48 MiB at 1k; <= 20 KiB per parent",
        ),
        (
            "B5 CPU per 1k parents converged",
            format!(
                "{:.1} s ({:.2} % of a core idle)",
                f("b5_cpu_s_per_1k"),
                f("b5_idle_cpu_percent")
            ),
            String::new(),
            kro(format!("{:.1} s", f("kro_b5_cpu_s_per_1k"))),
            "",
        ),
        (
            "B6 restart",
            format!(
                "first reconcile {:.2} s, {} writes",
                f("b6_first_reconcile_s"),
                f("b6_writes")
            ),
            String::new(),
            String::new(),
            "0 writes",
        ),
        (
            "B7 delete every parent, until the children are gone",
            format!("{:.1} s", f("b7_delete_s")),
            String::new(),
            kro(format!("{:.1} s", f("kro_b7_delete_s"))),
            "",
        ),
        (
            "B8 decorator: label -> 3 children; N labelled at once",
            format!("{}; converge {:.1} s", ms("b8_label"), f("b8_converge_s")),
            String::new(),
            String::new(),
            "",
        ),
        (
            "B8 decorator RSS",
            format!(
                "{:.1} MiB alone, {:.1} MiB with {} non-matching Namespaces, {:.1} MiB with N decorated",
                f("b8_rss_before_mib"),
                f("b8_rss_others_mib"),
                f("b8_others"),
                f("b8_rss_matching_mib")
            ),
            String::new(),
            String::new(),
            "flat with non-matching objects",
        ),
        (
            "B9 selector lookup: one Secret copied into N Namespaces",
            format!(
                "{} copies in {:.1} s; {:.1} MiB with every Namespace watched, {:.1} MiB with the copies",
                f("b9_members"),
                f("b9_copies_s"),
                f("b9_rss_idle_mib"),
                f("b9_rss_mib")
            ),
            String::new(),
            String::new(),
            "",
        ),
        (
            "Sharding, B4's App over three replicas",
            shard_row(r, ""),
            String::new(),
            String::new(),
            "each about a third of one process",
        ),
        (
            "Sharding, B1b's Lite over three replicas",
            shard_row(r, "b1b_"),
            String::new(),
            String::new(),
            "",
        ),
        (
            "B11 canary rollout of an edit, steps 10 / 50 / 100 % without pauses",
            format!(
                "{} parents: steps {} s, {:.1} s in all; {:.0} writes ({:.2} per parent: 2 children and an event each, and the revision's own)",
                f("rollout_n"),
                r.get("rollout_step_s")
                    .and_then(Value::as_array)
                    .map(|s| s
                        .iter()
                        .map(|t| format!("{:.1}", t.as_f64().unwrap_or(f64::NAN)))
                        .collect::<Vec<_>>()
                        .join(" / "))
                    .unwrap_or_default(),
                f("rollout_total_s"),
                f("rollout_writes"),
                f("rollout_writes_per_parent")
            ),
            String::new(),
            String::new(),
            "",
        ),
        (
            "B10 GET through the conversion webhook (v1alpha1 of a v1 object)",
            format!(
                "{}; {} at v1; +{:.1} ms p50, {:.2} ms inside the webhook; {:.0} ns per object converted (pure)",
                ms("b10_get_converted"),
                ms("b10_get_v1"),
                f("b10_added_p50_ms"),
                f("b10_webhook_mean_ms"),
                f("b10_convert_ns_per_object")
            ),
            String::new(),
            String::new(),
            "",
        ),
    ];
    let mut md = format!(
        "N = {}, {} replica(s) per Deployment; {}\n\n| benchmark | Stencil | plain client (the limit; for B2 the floor: a client watching the parents) | kro | target |\n|---|---|---|---|---|\n",
        r["n"],
        r["replicas"],
        r.get("etcd").and_then(Value::as_str).unwrap_or_default()
    );
    for (name, stencil, plain, kro, target) in rows {
        md.push_str(&format!("| {name} | {stencil} | {plain} | {kro} | {target} |\n"));
    }
    println!("{md}");
    std::fs::write(root().join("target/bench/results.md"), &md).unwrap();
    save(r);
}

/// Writes the results so far, so that a failure in a later phase keeps the earlier ones.
fn save(r: &BTreeMap<&str, Value>) {
    let path = root().join("target/bench/results.json");
    std::fs::write(path, serde_json::to_string_pretty(r).unwrap()).unwrap();
}
