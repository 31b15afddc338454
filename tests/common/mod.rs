//! Shared helpers of the integration tests: a client for the rig (or the cluster named by
//! STENCIL_TEST_KUBECONFIG), a fresh namespace per test, and waiting on a condition with
//! a deadline instead of sleeping.

#![allow(dead_code)]

pub mod tls;

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// The kubeconfig the tests use: STENCIL_TEST_KUBECONFIG, else the rig's.
pub fn kubeconfig_path() -> std::path::PathBuf {
    if let Ok(path) = std::env::var("STENCIL_TEST_KUBECONFIG") {
        return path.into();
    }
    let rig = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/testenv/kubeconfig");
    assert!(
        rig.exists(),
        "no cluster: run `make testenv-up` (or `make test`), or set STENCIL_TEST_KUBECONFIG"
    );
    rig
}

/// A client for the test cluster.
pub async fn client() -> Client {
    let kubeconfig = Kubeconfig::read_from(kubeconfig_path()).expect("read kubeconfig");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig");
    Client::try_from(config).expect("client")
}

/// A namespace that is deleted when the returned guard is dropped.
pub struct TestNamespace {
    pub name: String,
    client: Client,
}

impl TestNamespace {
    /// Creates `stencil-test-<prefix>-<random>`.
    pub async fn new(client: &Client, prefix: &str) -> TestNamespace {
        let suffix: u32 = rand::random();
        let name = format!("st-{prefix}-{suffix:08x}");
        let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .expect("create namespace");
        TestNamespace {
            name,
            client: client.clone(),
        }
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        let client = self.client.clone();
        let name = self.name.clone();
        // Best effort: the rig is thrown away after the run anyway.
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _ = Api::<Namespace>::all(client)
                    .delete(&name, &DeleteParams::default())
                    .await;
            });
        }
    }
}

/// Polls `check` every 100 ms until it returns `Some`, or panics after `timeout` naming
/// what was awaited.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the named CRD reports `Established=True`.
pub async fn wait_established(client: &Client, name: &str) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    wait_for(
        &format!("CRD {name} to be Established"),
        Duration::from_secs(60),
        || async {
            let c = api.get(name).await.ok()?;
            c.status?
                .conditions?
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
                .then_some(())
        },
    )
    .await;
}

/// Runs a request until the API server stops answering 404 for a kind it has just
/// started to serve, and returns its result.
pub async fn once_served<T, F, Fut>(request: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut request = request;
    wait_for("the new kind to be served", Duration::from_secs(60), || {
        let attempt = request();
        async move {
            match attempt.await {
                Err(kube::Error::Api(e)) if e.code == 404 => None,
                other => Some(other),
            }
        }
    })
    .await
}

/// A Stencil controller running inside the test, with every write request it makes
/// recorded as `METHOD path`.
pub struct Stencil {
    task: tokio::task::JoinHandle<()>,
    /// Its metrics.
    pub metrics: std::sync::Arc<stencil::metrics::Metrics>,
    /// Write requests (anything but GET) made by this instance.
    pub writes: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// Its GET requests (reads, lists and watches), with their queries.
    pub reads: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Drop for Stencil {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Stencil {
    /// The writes recorded so far, then forgets them.
    pub fn take_writes(&self) -> Vec<String> {
        std::mem::take(&mut *self.writes.lock().unwrap())
    }

    /// Successful reconciles so far, over every definition.
    pub fn reconciles(&self) -> u64 {
        self.metric_sum("controller_runtime_reconcile_total{", "result=\"success\"") as u64
    }

    /// The sum of the samples whose line starts with `prefix` and contains `with`.
    pub fn metric_sum(&self, prefix: &str, with: &str) -> f64 {
        self.metrics
            .encode()
            .lines()
            .filter(|l| l.starts_with(prefix) && l.contains(with))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }
}

/// Starts Stencil on definition files and, with `cluster`, on OperatorDefinition resources.
pub async fn start_stencil(definitions: &[std::path::PathBuf], cluster: bool) -> Stencil {
    start_stencil_with(definitions, cluster, None).await
}

/// The conversion webhook on a free loopback port, its certificate generated into Secret
/// `secret` of namespace `namespace`.
pub fn loopback_webhook(namespace: &str, secret: &str) -> stencil::webhook::Settings {
    let port = free_port();
    stencil::webhook::Settings {
        addr: ([127, 0, 0, 1], port).into(),
        endpoint: stencil::crd::Endpoint::Url(format!("https://127.0.0.1:{port}")),
        certs: stencil::webhook::CertSource::Secret {
            namespace: namespace.to_string(),
            name: secret.to_string(),
        },
    }
}

/// [`start_stencil`] serving the conversion webhook with `webhook`.
pub async fn start_stencil_with(
    definitions: &[std::path::PathBuf],
    cluster: bool,
    webhook: Option<stencil::webhook::Settings>,
) -> Stencil {
    start_stencil_options(stencil::runtime::Options {
        definitions: definitions.to_vec(),
        cluster_definitions: cluster,
        concurrency: 4,
        webhook,
        ..Default::default()
    })
    .await
}

/// Starts Stencil with `options`.
pub async fn start_stencil_options(options: stencil::runtime::Options) -> Stencil {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(std::env::var("RUST_LOG").unwrap_or_else(|_| "stencil=info".into()))
        .try_init();
    let writes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kubeconfig = Kubeconfig::read_from(kubeconfig_path()).expect("read kubeconfig");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig");
    let record = writes.clone();
    let reads = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record_read = reads.clone();
    let runtime = stencil::runtime::Runtime::new(config, options).observe(std::sync::Arc::new(move |method, path| {
        if method != http::Method::GET {
            record.lock().unwrap().push(format!("{method} {path}"));
        } else {
            record_read.lock().unwrap().push(path.to_string());
        }
    }));
    let metrics = runtime.metrics();
    let task = tokio::spawn(async move {
        if let Err(e) = runtime.run(std::future::pending()).await {
            panic!("stencil stopped: {e}");
        }
    });
    Stencil {
        task,
        metrics,
        writes,
        reads,
    }
}

/// Server-side applies a CRD and waits until it is Established.
pub async fn install_crd(client: &Client, crd: &CustomResourceDefinition) {
    use kube::ResourceExt;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd.name_any();
    api.patch(
        &name,
        &kube::api::PatchParams::apply("stencil-test").force(),
        &kube::api::Patch::Apply(crd),
    )
    .await
    .unwrap_or_else(|e| panic!("CRD {name} rejected: {e}"));
    wait_established(client, &name).await;
}

/// Creates an object of a kind that may have just been installed.
pub async fn create_when_served<K>(api: &Api<K>, obj: &K) -> K
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let params = PostParams::default();
    once_served(|| api.create(&params, obj)).await.expect("create")
}

/// A tool the rig built (`kubectl`, `helm`), found through tests/testenv/versions.env.
pub fn rig_tool(name: &str) -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let versions = std::fs::read_to_string(root.join("tests/testenv/versions.env")).unwrap();
    let version = |key: &str| {
        versions
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("{key} in versions.env"))
            .to_string()
    };
    let cache = std::env::var("STENCIL_CACHE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::path::PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/stencil"));
    let dir = match name {
        "helm" => format!("helm-{}", version("HELM_VERSION")),
        _ => format!("kubernetes-{}", version("KUBERNETES_VERSION")),
    };
    cache.join("bin").join(dir).join(name)
}

/// Runs a rig tool against the test cluster and returns its stdout; panics with its
/// stderr on failure.
pub fn run_tool(name: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(rig_tool(name))
        .args(args)
        .env("KUBECONFIG", kubeconfig_path())
        .output()
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(
        out.status.success(),
        "{name} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A `stencil` process, killed when dropped; its output goes to a log file.
pub struct Process {
    pub child: std::process::Child,
    pub log: std::path::PathBuf,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Process {
    /// What the process has logged so far.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Where it serves its HTTP endpoint, as its log says once it is bound.
    pub fn metrics_addr(&self) -> Option<String> {
        let logs = self.logs();
        let line = logs.lines().rev().find(|l| l.contains("serving /metrics"))?;
        let port: String = line
            .rsplit("127.0.0.1:")
            .next()?
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        (!port.is_empty()).then(|| format!("127.0.0.1:{port}"))
    }

    /// GETs a path of its HTTP endpoint; `None` while it does not answer.
    pub async fn get(&self, path: &str) -> Option<(u16, String)> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(self.metrics_addr()?).await.ok()?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await.ok()?;
        let status = response.split_whitespace().nth(1)?.parse().ok()?;
        let body = response
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        Some((status, body))
    }

    /// Requests the process has made with these HTTP methods, from its metrics.
    pub async fn requests(&self, methods: &[&str]) -> f64 {
        let mut total = 0.0;
        for method in methods {
            total += self
                .metric(&format!("rest_client_requests_total{{method=\"{method}\"}}"))
                .await
                .unwrap_or(0.0);
        }
        total
    }

    /// The value of one metric sample, e.g. `leader_election_master_status{name="x"}`.
    pub async fn metric(&self, sample: &str) -> Option<f64> {
        let (_, body) = self.get("/metrics").await?;
        body.lines().find_map(|l| l.strip_prefix(sample)?.trim().parse().ok())
    }
}

/// A free loopback port.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `stencil run` with `args` against `kubeconfig`, serving metrics on loopback.
pub fn spawn_stencil(args: &[String], kubeconfig: &std::path::Path, log: std::path::PathBuf) -> Process {
    spawn_stencil_env(args, kubeconfig, log, &[])
}

/// [`spawn_stencil`] with extra environment variables (fault injection).
pub fn spawn_stencil_env(
    args: &[String],
    kubeconfig: &std::path::Path,
    log: std::path::PathBuf,
    env: &[(&str, String)],
) -> Process {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .unwrap();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_stencil"))
        .arg("run")
        // Port 0: the process binds a free port and logs it, so processes started at
        // once never race for one.
        .arg("--metrics-addr=127.0.0.1:0")
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env("KUBECONFIG", kubeconfig)
        .env("RUST_LOG", "stencil=info")
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .expect("start stencil");
    Process { child, log }
}

/// A ConfigMap child whose data follows `spec.size`.
pub const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ parent.metadata.name }}-cm\ndata:\n  size: {{ parent.spec.size | required('spec.size is required') | quote }}";

/// A child entry with `template`, indented for a definition.
pub fn child(name: &str, template: &str) -> String {
    stencil_core::fixtures::child(name, template)
}

/// A second child, `{parent}-gate`, whose readiness rule never holds.
pub fn never_ready() -> String {
    let gate = child(
        "gate",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ parent.metadata.name }}-gate\ndata:\n  open: \"no\"",
    );
    format!("{gate}      readyWhen: \"$.data.never\"\n")
}

/// A Widget definition in `group` with its CRD, `children` and `extra` spec fields.
pub fn definition(group: &str, children: &str, extra: &str) -> String {
    let widget = stencil_core::fixtures::ParentKind {
        group,
        kind: "Widget",
        plural: "widgets",
    };
    stencil_core::fixtures::definition(widget, children, extra)
}

/// Replicas of `stencil run` over one Widget definition in a fresh namespace, sharing a
/// Lease there: what `tests/leader.rs` and `tests/sharding.rs` start from.
pub struct Replicated {
    pub client: Client,
    pub ns: TestNamespace,
    pub group: String,
    /// The Lease's name (`--leader-election-id`).
    pub lease: String,
    /// The arguments every replica runs with.
    pub args: Vec<String>,
    /// The definition's directory; the replicas' logs go there too.
    pub dir: tempfile::TempDir,
}

impl Replicated {
    /// A namespace named after `prefix`, a Widget definition with a ConfigMap child, and
    /// the arguments of replicas running with `mode` (`--leader-elect` or `--sharding`)
    /// and `extra`.
    pub async fn new(prefix: &str, mode: &str, extra: &[&str]) -> Replicated {
        let client = client().await;
        let ns = TestNamespace::new(&client, prefix).await;
        let group = unique_group();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("widgets.yaml"),
            definition(&group, &child("cm", CM), ""),
        )
        .unwrap();
        let lease = format!("stencil-{}", &group[..9]);
        let mut args = vec![
            format!("--definitions={}", dir.path().display()),
            format!("--namespace={}", ns.name),
            "--no-cluster-definitions".to_string(),
            mode.to_string(),
            format!("--leader-election-id={lease}"),
            format!("--leader-election-namespace={}", ns.name),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        Replicated {
            client,
            ns,
            group,
            lease,
            args,
            dir,
        }
    }
}

/// The condition of `type_` in an object's status.
pub fn condition(obj: &serde_json::Value, type_: &str) -> Option<serde_json::Value> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .cloned()
}

/// How many objects of `api` are `Ready=True`; 0 while the list fails.
pub async fn count_ready(api: &Api<kube::api::DynamicObject>) -> usize {
    api.list(&Default::default())
        .await
        .map(|l| {
            l.items
                .iter()
                .filter(|o| condition(&o.data, "Ready").is_some_and(|c| c["status"] == "True"))
                .count()
        })
        .unwrap_or(0)
}

/// True when the fault suite runs in full (`make test-faults`), not its fast cases.
pub fn full_faults() -> bool {
    std::env::var("STENCIL_FAULTS").is_ok_and(|v| v == "full")
}

/// Why the fault suite's invariants do not hold for parents `parents` and the managed
/// ConfigMaps of `namespaces`, or `None` when they hold: no orphaned child (every child's
/// parent exists with the UID it names), no duplicate (one child per parent and child
/// entry), and no parent stuck on a finalizer.
pub async fn invariants_broken(
    client: &Client,
    parents: &Api<kube::api::DynamicObject>,
    namespaces: &[&str],
) -> Option<String> {
    use kube::ResourceExt;
    use std::collections::{HashMap, HashSet};
    let listed = match parents.list(&Default::default()).await {
        Ok(l) => l.items,
        Err(e) => return Some(format!("listing parents: {e}")),
    };
    let mut problems = Vec::new();
    for p in &listed {
        if p.metadata.deletion_timestamp.is_some() {
            problems.push(format!(
                "parent {} is stuck deleting ({:?})",
                p.name_any(),
                p.finalizers()
            ));
        }
    }
    let uids: HashSet<String> = listed.iter().filter_map(|p| p.uid()).collect();
    let mut seen: HashMap<(String, String), String> = HashMap::new();
    for ns in namespaces {
        let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), ns);
        let lp = kube::api::ListParams::default().labels("app.kubernetes.io/managed-by=stencil");
        let children = match cms.list(&lp).await {
            Ok(l) => l.items,
            Err(e) => return Some(format!("listing children in {ns}: {e}")),
        };
        for cm in children {
            let labels = cm.labels();
            let uid = labels.get("stencil.dev/parent-uid").cloned().unwrap_or_default();
            let entry = labels.get("stencil.dev/child").cloned().unwrap_or_default();
            let name = format!("{ns}/{}", cm.name_any());
            if !uids.contains(&uid) {
                problems.push(format!("orphan {name} (parent uid {uid})"));
            }
            if let Some(other) = seen.insert((uid, entry), name.clone()) {
                problems.push(format!("duplicate children {other} and {name}"));
            }
        }
    }
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// Waits until the invariants hold (children of deleted parents take a moment to go).
pub async fn assert_invariants(client: &Client, parents: &Api<kube::api::DynamicObject>, namespaces: &[&str]) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let broken = invariants_broken(client, parents, namespaces).await;
        let Some(problem) = broken else { return };
        assert!(tokio::time::Instant::now() < deadline, "invariants broken: {problem}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A group no other test uses.
pub fn unique_group() -> String {
    format!("t{:08x}.stencil.dev", rand::random::<u32>())
}

/// A kubeconfig for the rig's API server that authenticates with `token`.
pub fn token_kubeconfig(token: &str, dir: &std::path::Path) -> std::path::PathBuf {
    let admin = Kubeconfig::read_from(kubeconfig_path()).unwrap();
    let cluster = admin.clusters[0].cluster.clone().unwrap();
    let mut ca = cluster.certificate_authority_data.clone();
    if ca.is_none()
        && let Some(path) = &cluster.certificate_authority
    {
        use base64::Engine as _;
        ca = Some(base64::engine::general_purpose::STANDARD.encode(std::fs::read(path).unwrap()));
    }
    let config = serde_json::json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "rig", "cluster": {"server": cluster.server, "certificate-authority-data": ca}}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "rig", "user": "sa"}}],
    });
    let path = dir.join("sa-kubeconfig.yaml");
    std::fs::write(&path, stencil::yaml::to_string(&config).unwrap()).unwrap();
    path
}

/// Runs `tests/testenv/apiserver.sh` with `args` (kill, start, etcd-url) and returns its output.
pub fn apiserver(args: &[&str]) -> String {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/testenv/apiserver.sh");
    let out = std::process::Command::new(script)
        .args(args)
        .output()
        .expect("apiserver.sh");
    assert!(
        out.status.success(),
        "apiserver.sh {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A POST to etcd's JSON gateway.
pub async fn etcd(url: &str, path: &str, body: serde_json::Value) -> serde_json::Value {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = url.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("etcd answers");
    let body = body.to_string();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).await.unwrap();
    let (head, json) = response.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "etcd {path}: {response}");
    // The gateway may answer chunked: the JSON object is what lies between the braces.
    let start = json.find('{').expect("a JSON body");
    let end = json.rfind('}').expect("a JSON body");
    serde_json::from_str(&json[start..=end]).unwrap()
}

/// The object etcd stores under `key` (`/registry/<group>/<plural>/<namespace>/<name>`
/// for a custom resource, which it keeps as JSON), read past the API server.
pub async fn stored_in_etcd(key: &str) -> Option<serde_json::Value> {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let range = etcd(
        &apiserver(&["etcd-url"]),
        "/v3/kv/range",
        serde_json::json!({"key": b64.encode(key)}),
    )
    .await;
    let value = range["kvs"].as_array()?.first()?["value"].as_str()?.to_string();
    serde_json::from_slice(&b64.decode(value).ok()?).ok()
}
