//! The conversion webhook on the rig: the bundled website's v1alpha1 (its own schema,
//! converted by templates) read as v1 and back with nothing lost, a template that fails
//! for one object, and a webhook that keeps answering while the leader is killed, with
//! one certificate for every replica. Storage migration is in `tests/migration.rs`.

mod common;

use std::time::Duration;

use common::{TestNamespace, client, free_port, spawn_stencil_env, unique_group, wait_established, wait_for};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt as _;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(60);

/// The bundled website definition, in a group of its own so that tests do not share
/// its CRD.
fn website(group: &str, dir: &std::path::Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/operators/website.yaml"))
        .unwrap()
        .replace("examples.stencil.dev", group);
    let path = dir.join("website.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

fn sites(client: &kube::Client, group: &str, version: &str, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, "Website"), "websites");
    Api::namespaced_with(client.clone(), ns, &ar)
}

fn object(value: Value) -> DynamicObject {
    serde_json::from_value(value).unwrap()
}

#[tokio::test]
async fn an_old_version_is_read_as_the_new_and_back_with_nothing_lost() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "convert").await;
    let group = unique_group();
    let dir = tempfile::tempdir().unwrap();
    let webhook = common::loopback_webhook(&ns.name, "webhook-cert");
    let _stencil = common::start_stencil_with(&[website(&group, dir.path())], false, Some(webhook)).await;
    let crd_name = format!("websites.{group}");
    wait_established(&client, &crd_name).await;
    let crd = Api::<CustomResourceDefinition>::all(client.clone())
        .get(&crd_name)
        .await
        .unwrap();
    let conversion = crd.spec.conversion.unwrap();
    assert_eq!(conversion.strategy, "Webhook");
    let config = conversion.webhook.unwrap().client_config.unwrap();
    assert!(config.url.unwrap().ends_with(&format!("/convert/{crd_name}")));
    assert!(!config.ca_bundle.unwrap().0.is_empty(), "the generated CA is injected");

    let old = sites(&client, &group, "v1alpha1", &ns.name);
    let new = sites(&client, &group, "v1", &ns.name);

    // Written at v1alpha1, read at v1.
    let written = object(json!({"apiVersion": format!("{group}/v1alpha1"), "kind": "Website",
        "metadata": {"name": "blog", "namespace": ns.name},
        "spec": {"content": {"index.html": "hi"}, "domain": "blog.example.com"}}));
    common::create_when_served(&old, &written).await;
    let read = new.get("blog").await.unwrap();
    assert_eq!(read.data["spec"]["domains"], json!(["blog.example.com"]));
    assert_eq!(
        read.data["spec"]["replicas"], 2,
        "v1's default applies to what v1alpha1 wrote"
    );
    // The children are rendered from the v1 view: the Ingress serves `domains`.
    let ingresses: Api<k8s_openapi::api::networking::v1::Ingress> = Api::namespaced(client.clone(), &ns.name);
    let ingress = wait_for("the blog's Ingress", TIMEOUT, || async {
        ingresses.get_opt("blog").await.ok()?
    })
    .await;
    let hosts: Vec<_> = ingress
        .spec
        .unwrap()
        .rules
        .unwrap()
        .into_iter()
        .filter_map(|r| r.host)
        .collect();
    assert_eq!(hosts, vec!["blog.example.com".to_string()]);

    // Written at v1 with two domains and TLS, which v1alpha1 cannot hold, read and
    // patched through v1alpha1.
    let full = object(json!({"apiVersion": format!("{group}/v1"), "kind": "Website",
        "metadata": {"name": "docs", "namespace": ns.name},
        "spec": {"content": {"index.html": "hi"}, "domains": ["docs.example.com", "www.docs.example.com"],
                 "tls": true, "ingressClassName": "nginx", "replicas": 3}}));
    new.create(&PostParams::default(), &full).await.unwrap();
    let seen = old.get("docs").await.unwrap();
    assert_eq!(seen.data["spec"]["domain"], "docs.example.com");
    assert!(seen.data["spec"].get("tls").is_none(), "{:?}", seen.data);
    assert!(seen.data["spec"].get("ingressClassName").is_none(), "{:?}", seen.data);
    let label = json!({"metadata": {"labels": {"tier": "web"}}});
    old.patch("docs", &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap();
    let back = new.get("docs").await.unwrap();
    assert_eq!(back.data["spec"]["ingressClassName"], "nginx", "{:?}", back.data);
    assert_eq!(
        back.data["spec"]["domains"],
        json!(["docs.example.com", "www.docs.example.com"])
    );
    assert_eq!(back.data["spec"]["tls"], true);
    assert_eq!(back.data["spec"]["replicas"], 3);
    assert_eq!(back.labels().get("tier").map(String::as_str), Some("web"));
    assert!(
        !back.annotations().contains_key("stencil.dev/conversion-data"),
        "the storage version carries no conversion annotation"
    );

    // A change made through v1alpha1 wins over what v1 held.
    let rename = json!({"spec": {"domain": "www.example.com"}});
    old.patch("docs", &PatchParams::default(), &Patch::Merge(&rename))
        .await
        .unwrap();
    let renamed = new.get("docs").await.unwrap();
    assert_eq!(renamed.data["spec"]["domains"], json!(["www.example.com"]));
    assert_eq!(renamed.data["spec"]["ingressClassName"], "nginx");
    assert_eq!(renamed.data["spec"]["tls"], true);
    assert_eq!(old.list(&Default::default()).await.unwrap().items.len(), 2);
}

#[tokio::test]
async fn the_webhook_keeps_answering_while_the_leader_is_killed() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "convha").await;
    let group = unique_group();
    let dir = tempfile::tempdir().unwrap();
    website(&group, dir.path());
    // Both replicas tell the API server to call the second one, as a Service would reach
    // any replica; killing the first (the leader) must not interrupt conversion.
    let (first, second) = (free_port(), free_port());
    let args = |port: u16| {
        vec![
            format!("--definitions={}", dir.path().display()),
            format!("--namespace={}", ns.name),
            "--no-cluster-definitions".to_string(),
            "--leader-elect".to_string(),
            format!("--leader-election-id=stencil-{}", &group[..9]),
            format!("--leader-election-namespace={}", ns.name),
            format!("--webhook-addr=127.0.0.1:{port}"),
            format!("--webhook-url=https://127.0.0.1:{second}"),
            "--webhook-secret=webhook-cert".to_string(),
        ]
    };
    let env = [("POD_NAMESPACE", ns.name.clone())];
    let kubeconfig = common::kubeconfig_path();
    let mut leader = spawn_stencil_env(&args(first), &kubeconfig, dir.path().join("a.log"), &env);
    let crd_name = format!("websites.{group}");
    wait_established(&client, &crd_name).await;
    let standby = spawn_stencil_env(&args(second), &kubeconfig, dir.path().join("b.log"), &env);
    let old = sites(&client, &group, "v1alpha1", &ns.name);
    let site = object(json!({"apiVersion": format!("{group}/v1alpha1"), "kind": "Website",
        "metadata": {"name": "docs", "namespace": ns.name},
        "spec": {"content": {"index.html": "hi"}, "domain": "docs.example.com"}}));
    wait_for("the standby's webhook to convert", TIMEOUT, || async {
        old.create(&PostParams::default(), &site).await.ok()
    })
    .await;
    let lease = format!("leader_election_master_status{{name=\"stencil-{}\"}}", &group[..9]);
    assert_eq!(standby.metric(&lease).await, Some(0.0), "the second replica stands by");

    leader.child.kill().unwrap();
    leader.child.wait().unwrap();
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    let mut reads = 0;
    while standby.metric(&lease).await != Some(1.0) {
        assert!(tokio::time::Instant::now() < deadline, "the standby never took over");
        let read = old.get("docs").await;
        let read = read.unwrap_or_else(|e| panic!("conversion failed during the failover: {e}\n{}", standby.logs()));
        assert_eq!(read.data["spec"]["domain"], "docs.example.com");
        reads += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(reads > 0, "conversion was exercised while no replica led");

    // The generated certificate is one, kept in the Secret: the survivor presents what
    // the first replica made, and a replica started again reuses it.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), &ns.name);
    let secret = secrets.get("webhook-cert").await.unwrap();
    let data = secret.data.clone().unwrap();
    let (ca, kept) = (&data["ca.crt"].0, &data["tls.crt"].0);
    let kept_leaf = pem_certificates(kept).remove(0);
    assert_eq!(
        presented_certificate(second, ca),
        kept_leaf,
        "the standby serves the Secret's certificate"
    );
    let restarted = spawn_stencil_env(&args(first), &kubeconfig, dir.path().join("c.log"), &env);
    let presented = wait_for("the restarted replica to serve", TIMEOUT, || async {
        std::panic::catch_unwind(|| presented_certificate(first, ca)).ok()
    })
    .await;
    assert_eq!(presented, kept_leaf, "a restart reuses the kept certificate");
    let after_restart = secrets.get("webhook-cert").await.unwrap();
    assert_eq!(
        after_restart.resource_version(),
        secret.resource_version(),
        "nobody rewrote the Secret"
    );
    drop(restarted);
    let mut after = site.clone();
    after.metadata.name = Some("after".into());
    old.create(&PostParams::default(), &after).await.unwrap();
    let v1 = sites(&client, &group, "v1", &ns.name);
    wait_for("the new leader to reconcile a new site", TIMEOUT, || async {
        let s = v1.get("after").await.ok()?;
        s.data.pointer("/status/conditions").map(|_| ())
    })
    .await;
}

/// The certificates in a PEM bundle, as DER.
fn pem_certificates(pem: &[u8]) -> Vec<Vec<u8>> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    CertificateDer::pem_slice_iter(pem)
        .map(|c| c.expect("a PEM certificate").to_vec())
        .collect()
}

/// The serving certificate the webhook on loopback `port` presents, verified against
/// the CA in `ca_pem` for the name 127.0.0.1.
fn presented_certificate(port: u16, ca_pem: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut roots = rustls::RootCertStore::empty();
    for der in pem_certificates(ca_pem) {
        roots.add(der.into()).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut conn = rustls::ClientConnection::new(std::sync::Arc::new(config), name).unwrap();
    let mut tcp = std::net::TcpStream::connect(("127.0.0.1", port)).expect("the webhook listens");
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut tls = rustls::Stream::new(&mut conn, &mut tcp);
    tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .expect("a TLS handshake the CA verifies");
    conn.peer_certificates().expect("a certificate")[0].to_vec()
}

#[tokio::test]
async fn a_template_that_fails_for_one_object_fails_its_request_by_name_and_line_and_the_webhook_serves_on() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "convfail").await;
    let group = unique_group();
    let dir = tempfile::tempdir().unwrap();
    let path = website(&group, dir.path());
    // v1alpha1 → v1 fails for one domain only.
    let text = std::fs::read_to_string(&path).unwrap().replacen(
        "{%- if object.spec.domain %}",
        "{%- if object.spec.domain == \"fail.example.com\" %}{{ object.spec.missing | required(\"spec.missing is required\") }}{% endif %}{%- if object.spec.domain %}",
        1,
    );
    assert!(
        text.contains("fail.example.com"),
        "the bundled website's toStorage changed"
    );
    std::fs::write(&path, text).unwrap();
    let webhook = common::loopback_webhook(&ns.name, "webhook-cert");
    let _stencil = common::start_stencil_with(&[path], false, Some(webhook)).await;
    wait_established(&client, &format!("websites.{group}")).await;
    let old = sites(&client, &group, "v1alpha1", &ns.name);
    let site = |name: &str, host: &str| {
        object(json!({"apiVersion": format!("{group}/v1alpha1"), "kind": "Website",
            "metadata": {"name": name, "namespace": ns.name},
            "spec": {"content": {"index.html": "hi"}, "domain": host}}))
    };
    wait_for("the webhook to convert", TIMEOUT, || async {
        old.create(&PostParams::default(), &site("good", "docs.example.com"))
            .await
            .ok()
    })
    .await;
    let err = old
        .create(&PostParams::default(), &site("bad", "fail.example.com"))
        .await
        .expect_err("a template that fails fails the request");
    let message = err.to_string();
    assert!(message.contains("bad"), "names the object: {message}");
    assert!(
        message.contains("spec.missing is required"),
        "says what failed: {message}"
    );
    assert!(message.contains("website.yaml:"), "names the file and line: {message}");
    assert!(old.get_opt("bad").await.unwrap().is_none(), "nothing was stored");
    old.create(&PostParams::default(), &site("after", "www.example.com"))
        .await
        .expect("the webhook serves on");
    assert_eq!(old.list(&Default::default()).await.unwrap().items.len(), 2);
}
