//! Shared helpers of the integration tests: a client for the rig (or the cluster named by
//! STENCIL_TEST_KUBECONFIG), a fresh namespace per test, and waiting on a condition with
//! a deadline instead of sleeping.

#![allow(dead_code)]

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
