//! Shared helpers of the integration tests: a client for the rig (or the cluster named by
//! STENCIL_TEST_KUBECONFIG), a fresh namespace per test, and waiting on a condition with
//! a deadline instead of sleeping. The submodules hold Stencil run in the test
//! ([`in_process`]) or as a process ([`process`]), the definitions tests start from
//! ([`definitions`]), metacontroller's hooks and kinds ([`hooks`]), the fault suite's invariants ([`invariants`]) and the rig's API
//! server and etcd ([`apiserver`]).

#![allow(dead_code)]

pub mod apiserver;
pub mod definitions;
pub mod hooks;
pub mod in_process;
pub mod invariants;
pub mod kro;
pub mod process;
pub mod tls;

// Every test binary compiles this module and uses a few of its helpers.
#[allow(unused_imports)]
pub use {apiserver::*, definitions::*, hooks::*, in_process::*, invariants::*, process::*};

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

/// A version `tests/testenv/versions.env` pins, by its key (`KUBERNETES_VERSION`).
pub fn pinned_version(key: &str) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let versions = std::fs::read_to_string(root.join("tests/testenv/versions.env")).unwrap();
    versions
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("{key} in versions.env"))
        .trim()
        .to_string()
}

/// Where the rig's tools are built: `bin/<tool>-<version>` under `$STENCIL_CACHE`, or
/// `~/.cache/stencil`.
pub fn rig_bin(dir: &str) -> std::path::PathBuf {
    let cache = std::env::var("STENCIL_CACHE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::path::PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/stencil"));
    cache.join("bin").join(dir)
}

/// A tool the rig built (`kubectl`, `helm`), found through tests/testenv/versions.env.
pub fn rig_tool(name: &str) -> std::path::PathBuf {
    let dir = match name {
        "helm" => format!("helm-{}", pinned_version("HELM_VERSION")),
        _ => format!("kubernetes-{}", pinned_version("KUBERNETES_VERSION")),
    };
    rig_bin(&dir).join(name)
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

/// A group no other test uses.
pub fn unique_group() -> String {
    format!("t{:08x}.stencil.dev", rand::random::<u32>())
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
