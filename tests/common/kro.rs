//! kro at the version the bench builds (`KRO_VERSION` of `tests/testenv/versions.env`):
//! its Go module, for its examples, and its build, for its controller and CRDs; and
//! what the tests that run kro share (applying its objects, starting its controller).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::pinned_kind;
use serde_json::Value;

/// How long kro or Stencil may take to serve what a test applied.
pub const TIMEOUT: Duration = Duration::from_secs(120);

/// `KRO_VERSION`, e.g. `v0.9.4`.
pub fn version() -> String {
    super::pinned_version("KRO_VERSION")
}

/// kro's Go module directory (`go mod download`; the module cache, never the repository).
pub fn module() -> PathBuf {
    let out = Command::new("go")
        .args([
            "mod",
            "download",
            "-json",
            &format!("github.com/kubernetes-sigs/kro@{}", version()),
        ])
        .output()
        .expect("go runs");
    assert!(
        out.status.success(),
        "go mod download: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    PathBuf::from(json["Dir"].as_str().expect("the module's directory"))
}

/// kro's build (its `kro` binary and `crds/`), made by `tests/testenv/build.sh kro`.
pub fn build() -> PathBuf {
    let build = super::rig_bin(&format!("kro-{}", version()));
    assert!(
        build.join(".complete").exists(),
        "kro is built by `tests/testenv/build.sh kro` (make integration does)"
    );
    build
}

/// The YAML documents of `path`.
pub fn yaml(path: &Path) -> Vec<Value> {
    stencil::yaml::documents(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Applies `object` (in `namespace` unless it names one) once its kind is served.
pub async fn apply(client: &Client, object: &Value, namespace: &str) {
    let gvk = GroupVersionKind::try_from(&kube::api::TypeMeta {
        api_version: object["apiVersion"].as_str().unwrap().to_string(),
        kind: object["kind"].as_str().unwrap().to_string(),
    })
    .unwrap();
    let name = object["metadata"]["name"].as_str().unwrap().to_string();
    super::wait_for(&format!("{} {name} applied", gvk.kind), TIMEOUT, || async {
        let (resource, caps) = pinned_kind(client, &gvk).await.ok()?;
        let api: Api<DynamicObject> = match caps.scope {
            kube::discovery::Scope::Namespaced => Api::namespaced_with(
                client.clone(),
                object["metadata"]["namespace"].as_str().unwrap_or(namespace),
                &resource,
            ),
            kube::discovery::Scope::Cluster => Api::all_with(client.clone(), &resource),
        };
        api.patch(&name, &PatchParams::apply("kro-tests").force(), &Patch::Apply(object))
            .await
            .ok()
    })
    .await;
}

/// Installs kro's own CRDs (ResourceGraphDefinition and its internals) from its build.
pub async fn install_crds(client: &Client, build: &Path) {
    for crd in std::fs::read_dir(build.join("crds")).unwrap() {
        for object in yaml(&crd.unwrap().path()) {
            apply(client, &object, "default").await;
        }
    }
}

/// kro running with the rig's admin identity, stopped when dropped.
pub struct Kro(Child);

impl Drop for Kro {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts kro's controller from `build`, logging to `target/<log>.log`.
pub fn start(build: &Path, log: &str) -> Kro {
    let log = std::fs::File::create(format!("target/{log}.log")).unwrap();
    let child = Command::new(build.join("kro"))
        .args(["--metrics-bind-address=0", "--health-probe-bind-address=0"])
        .env("KUBECONFIG", super::kubeconfig_path())
        .stdout(Stdio::from(log.try_clone().unwrap()))
        .stderr(Stdio::from(log))
        .spawn()
        .unwrap();
    Kro(child)
}
