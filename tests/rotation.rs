//! The conversion webhook's certificate rotates on the rig with no failed conversion: the
//! Secret made again by a replica that restarted first (the leader takes the new
//! certificate up), and the mounted certificate files swapped as the kubelet swaps a
//! Secret volume (cert-manager renewing the certificate). Meanwhile a client writes a
//! Website through the spoke version every 0.2 s, which the API server converts through
//! the webhook both ways, and once the new certificate is served the CRD's caBundle must
//! verify it (the API server keeps its connections open, so a new one is what breaks).

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::tls::{loopback_certificates, pem_certificates, presented_certificate};
use common::{Process, TestNamespace, client, free_port, spawn_stencil_env, unique_group, wait_established, wait_for};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(90);

/// The bundled website definition in `dir`, in a group of its own.
fn website(group: &str, dir: &Path) {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/operators/website.yaml"))
        .unwrap()
        .replace("examples.stencil.dev", group);
    std::fs::write(dir.join("website.yaml"), text).unwrap();
}

/// Writes through v1alpha1 every 0.2 s until dropped, recording when each write failed.
struct Writer {
    failures: Arc<Mutex<Vec<(tokio::time::Instant, String)>>>,
    writes: Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Writer {
    /// Creates site `docs` at v1alpha1 and starts writing a label on it.
    async fn start(client: &kube::Client, group: &str, ns: &str) -> Writer {
        let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1alpha1", "Website"), "websites");
        let sites: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
        let site: DynamicObject = serde_json::from_value(json!({"apiVersion": format!("{group}/v1alpha1"),
            "kind": "Website", "metadata": {"name": "docs"},
            "spec": {"content": {"index.html": "hi"}, "domain": "docs.example.com"}}))
        .unwrap();
        common::create_when_served(&sites, &site).await;
        let failures = Arc::new(Mutex::new(Vec::new()));
        let writes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (failed, count) = (failures.clone(), writes.clone());
        let task = tokio::spawn(async move {
            for n in 0u64.. {
                let patch = json!({"metadata": {"labels": {"n": n.to_string()}}});
                let result = sites
                    .patch("docs", &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
                match result {
                    Ok(read) if read.data["spec"]["domain"] == "docs.example.com" => {}
                    Ok(read) => failed
                        .lock()
                        .unwrap()
                        .push((tokio::time::Instant::now(), format!("lost the domain: {:?}", read.data))),
                    Err(e) => failed
                        .lock()
                        .unwrap()
                        .push((tokio::time::Instant::now(), e.to_string())),
                }
                count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        Writer { failures, writes, task }
    }

    fn writes(&self) -> usize {
        self.writes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Writes another `n` times, then stops; the failures, and those after `since`.
    async fn finish(self, n: usize, since: tokio::time::Instant) -> (Vec<String>, Vec<String>) {
        let target = self.writes() + n;
        wait_for("the last writes", TIMEOUT, || async {
            (self.writes() >= target).then_some(())
        })
        .await;
        self.task.abort();
        let failures = self.failures.lock().unwrap();
        let late = failures
            .iter()
            .filter(|(t, _)| *t >= since)
            .map(|(_, e)| e.clone())
            .collect();
        (failures.iter().map(|(_, e)| e.clone()).collect(), late)
    }
}

/// Waits until the webhook on `port` presents a certificate that `ca` verifies and that
/// is `leaf`; returns when it did.
async fn wait_serving(port: u16, ca: &[u8], leaf: &[u8], stencil: &Process) -> tokio::time::Instant {
    wait_for("the new certificate served", TIMEOUT, || async {
        let (ca, leaf) = (ca.to_vec(), leaf.to_vec());
        let presented = tokio::task::spawn_blocking(move || presented_certificate(port, &ca))
            .await
            .unwrap();
        (presented.as_deref() == Some(leaf.as_slice())).then(tokio::time::Instant::now)
    })
    .await;
    assert!(
        stencil.logs().contains("reloaded the webhook certificate"),
        "{}",
        stencil.logs()
    );
    tokio::time::Instant::now()
}

/// Asserts that what the webhook on `port` serves now, `leaf`, verifies against the CA
/// bundle CRD `crd` gives the API server: a new connection of the API server's would
/// succeed (the API server keeps its connections, so the writes alone do not prove it).
async fn assert_trusted(client: &kube::Client, crd: &str, port: u16, leaf: &[u8]) {
    let live = Api::<CustomResourceDefinition>::all(client.clone())
        .get(crd)
        .await
        .unwrap();
    let bundle = live
        .spec
        .conversion
        .unwrap()
        .webhook
        .unwrap()
        .client_config
        .unwrap()
        .ca_bundle
        .unwrap()
        .0;
    let presented = tokio::task::spawn_blocking(move || presented_certificate(port, &bundle))
        .await
        .unwrap();
    assert_eq!(
        presented.as_deref(),
        Some(leaf),
        "the CRD's caBundle verifies the served certificate"
    );
}

fn assert_no_failed_write(all: &[String], late: &[String], logs: &str) {
    eprintln!(
        "{} failed writes in all, {} after the new CA was served plus 5 s",
        all.len(),
        late.len()
    );
    assert!(late.is_empty(), "writes failed after the rotation: {late:?}\n{logs}");
    assert!(all.is_empty(), "writes failed during the rotation: {all:?}\n{logs}");
}

#[tokio::test]
async fn a_secret_made_again_by_a_restarted_replica_rotates_with_no_failed_conversion() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "rotate").await;
    let group = unique_group();
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    std::fs::create_dir(&defs).unwrap();
    website(&group, &defs);
    // The API server calls the leader; the standby restarts first and makes the Secret.
    let (leading, standing) = (free_port(), free_port());
    let args = |port: u16| common::tls::webhook_replica_args(&defs, &ns.name, &group, port, leading);
    let env = [("POD_NAMESPACE", ns.name.clone())];
    let kubeconfig = common::kubeconfig_path();
    let leader = spawn_stencil_env(&args(leading), &kubeconfig, dir.path().join("a.log"), &env);
    wait_established(&client, &format!("websites.{group}")).await;
    let standby = spawn_stencil_env(&args(standing), &kubeconfig, dir.path().join("b.log"), &env);
    let writer = Writer::start(&client, &group, &ns.name).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns.name);
    let old = secrets.get("webhook-cert").await.unwrap().data.unwrap();
    wait_for("writes through the first CA", TIMEOUT, || async {
        (writer.writes() >= 5).then_some(())
    })
    .await;

    secrets.delete("webhook-cert", &Default::default()).await.unwrap();
    drop(standby);
    let _standby = spawn_stencil_env(&args(standing), &kubeconfig, dir.path().join("c.log"), &env);
    let new = wait_for("a new certificate in the Secret", TIMEOUT, || async {
        let data = secrets.get_opt("webhook-cert").await.ok()??.data?;
        (data["ca.crt"] != old["ca.crt"]).then_some(data)
    })
    .await;
    let leaf = pem_certificates(&new["tls.crt"].0).remove(0);
    let served = wait_serving(leading, &new["ca.crt"].0, &leaf, &leader).await;
    assert_trusted(&client, &format!("websites.{group}"), leading, &leaf).await;
    let (all, late) = writer.finish(25, served + Duration::from_secs(5)).await;
    assert_no_failed_write(&all, &late, &leader.logs());
}

/// Lays `certs` out in `dir` as the kubelet lays out a Secret volume: the files are links
/// through `..data` to a directory of their own, and `..data` is swapped in one rename.
fn mount(dir: &Path, (cert, key, ca): &(String, String, String), generation: u32) {
    let target = dir.join(format!("..{generation}"));
    std::fs::create_dir(&target).unwrap();
    for (name, text) in [("tls.crt", cert), ("tls.key", key), ("ca.crt", ca)] {
        std::fs::write(target.join(name), text).unwrap();
        let link = dir.join(name);
        if !link.exists() {
            std::os::unix::fs::symlink(Path::new("..data").join(name), &link).unwrap();
        }
    }
    let staged = dir.join("..data_tmp");
    std::os::unix::fs::symlink(format!("..{generation}"), &staged).unwrap();
    std::fs::rename(&staged, dir.join("..data")).unwrap();
}

#[tokio::test]
async fn mounted_certificate_files_swapped_rotate_with_no_failed_conversion() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "rotdir").await;
    let group = unique_group();
    let dir = tempfile::tempdir().unwrap();
    let (defs, certs) = (dir.path().join("defs"), dir.path().join("certs"));
    std::fs::create_dir(&defs).unwrap();
    std::fs::create_dir(&certs).unwrap();
    website(&group, &defs);
    mount(&certs, &loopback_certificates(), 1);
    let port = free_port();
    let args = vec![
        format!("--definitions={}", defs.display()),
        format!("--namespace={}", ns.name),
        "--no-cluster-definitions".to_string(),
        format!("--webhook-addr=127.0.0.1:{port}"),
        format!("--webhook-url=https://127.0.0.1:{port}"),
        format!("--webhook-cert-dir={}", certs.display()),
    ];
    let env = [("POD_NAMESPACE", ns.name.clone())];
    let stencil = spawn_stencil_env(&args, &common::kubeconfig_path(), dir.path().join("a.log"), &env);
    wait_established(&client, &format!("websites.{group}")).await;
    let writer = Writer::start(&client, &group, &ns.name).await;
    wait_for("writes through the first CA", TIMEOUT, || async {
        (writer.writes() >= 5).then_some(())
    })
    .await;

    let renewed = loopback_certificates();
    mount(&certs, &renewed, 2);
    let leaf = pem_certificates(renewed.0.as_bytes()).remove(0);
    let served = wait_serving(port, renewed.2.as_bytes(), &leaf, &stencil).await;
    assert_trusted(&client, &format!("websites.{group}"), port, &leaf).await;
    let (all, late) = writer.finish(25, served + Duration::from_secs(5)).await;
    assert_no_failed_write(&all, &late, &stencil.logs());
}
