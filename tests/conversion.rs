//! The conversion webhook on the rig: the bundled website's v1alpha1 (its own schema,
//! converted by templates) read as v1 and back with nothing lost, a template that fails
//! for one object, a webhook that keeps answering while the leader is killed, with one
//! certificate for every replica, and conversion that follows what the CRD carries
//! through a refused edit, a removal and a restart. Storage migration is in
//! `tests/migration.rs`.

mod common;

use std::time::Duration;

use common::{TestNamespace, client, free_port, spawn_stencil_env, unique_group, wait_established, wait_for};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt as _;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use stencil::definition::OperatorDefinition;

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
    let args = |port: u16| common::tls::webhook_replica_args(dir.path(), &ns.name, &group, port, second);
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
    let kept_leaf = common::tls::pem_certificates(kept).remove(0);
    assert_eq!(
        common::tls::presented_certificate(second, ca).expect("the standby serves"),
        kept_leaf,
        "the standby serves the Secret's certificate"
    );
    let restarted = spawn_stencil_env(&args(first), &kubeconfig, dir.path().join("c.log"), &env);
    let presented = wait_for("the restarted replica to serve", TIMEOUT, || async {
        common::tls::presented_certificate(first, ca)
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

/// The website definition of `group` as an OperatorDefinition, with `edit` applied to its
/// text and the label `label` (`key=value`) that the Stencil under test selects.
fn website_resource(group: &str, label: &str, edit: impl Fn(String) -> String) -> OperatorDefinition {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/operators/website.yaml"))
        .unwrap()
        .replace("examples.stencil.dev", group);
    let mut def: OperatorDefinition = stencil::yaml::document(&edit(text)).unwrap();
    let (key, value) = label.split_once('=').unwrap();
    def.metadata.labels = Some([(key.to_string(), value.to_string())].into());
    def
}

#[tokio::test]
async fn the_webhook_converts_with_what_the_crd_carries_through_a_refused_edit_a_removal_and_a_restart() {
    let client = client().await;
    common::install_crd(&client, &stencil::crd::operator_definition_crd()).await;
    let ns = TestNamespace::new(&client, "carried").await;
    let group = unique_group();
    let label = format!("stencil-test={}", &group[..9]);
    let name = format!("websites.{group}");
    let defs: Api<OperatorDefinition> = Api::all(client.clone());
    let apply = |def: OperatorDefinition| {
        let (defs, name) = (defs.clone(), name.clone());
        async move {
            defs.patch(&name, &PatchParams::apply("test").force(), &Patch::Apply(&def))
                .await
                .unwrap();
        }
    };
    apply(website_resource(&group, &label, |t| t)).await;
    let port = free_port();
    let args = vec![
        format!("--definition-selector={label}"),
        format!("--namespace={}", ns.name),
        format!("--webhook-addr=127.0.0.1:{port}"),
        format!("--webhook-url=https://127.0.0.1:{port}"),
        "--webhook-secret=webhook-cert".to_string(),
    ];
    // Stencil's namespace keeps the definition's revisions and the certificate.
    let env = [("POD_NAMESPACE", ns.name.clone())];
    let (kubeconfig, dir) = (common::kubeconfig_path(), tempfile::tempdir().unwrap());
    let mut stencil = spawn_stencil_env(&args, &kubeconfig, dir.path().join("a.log"), &env);
    wait_established(&client, &name).await;
    let (old, new) = (
        sites(&client, &group, "v1alpha1", &ns.name),
        sites(&client, &group, "v1", &ns.name),
    );
    let site = |name: &str| {
        object(json!({"apiVersion": format!("{group}/v1alpha1"), "kind": "Website",
            "metadata": {"name": name, "namespace": ns.name},
            "spec": {"content": {"index.html": "hi"}, "domain": format!("{name}.example.com")}}))
    };
    common::create_when_served(&old, &site("before")).await;

    // v1 renames `domains` to `hosts`, and the v1alpha1 templates follow: the CRD change
    // is refused, and the CRD keeps `domains`.
    apply(website_resource(&group, &label, |t| t.replace("domains", "hosts"))).await;
    wait_for("the edit refused as breaking", TIMEOUT, || async {
        let d = serde_json::to_value(defs.get(&name).await.ok()?).ok()?;
        (common::condition(&d, "Ready")?["reason"] == "BreakingSchemaChange").then_some(())
    })
    .await;
    // Each check writes at v1alpha1, which the API server converts through the webhook
    // (a read of an unchanged object may be served from the API server's cache of what
    // it already converted), and reads the object back at v1.
    let written = |name: &'static str, when: &'static str| {
        let (old, new, site) = (old.clone(), new.clone(), site(name));
        async move {
            old.create(&PostParams::default(), &site)
                .await
                .unwrap_or_else(|e| panic!("written at v1alpha1 {when}: {e}"));
            let read = new.get(name).await.unwrap();
            assert_eq!(
                read.data["spec"]["domains"],
                json!([format!("{name}.example.com")]),
                "converted {when} into the schema the CRD has: {:?}",
                read.data
            );
        }
    };
    written("after", "after the refused edit").await;

    // Removed, the definition goes on converting: its CRD still sends reviews here.
    defs.delete(&name, &Default::default()).await.unwrap();
    wait_for("the definition to stop", TIMEOUT, || async {
        (stencil.metric("stencil_definitions{state=\"running\"}").await == Some(0.0)).then_some(())
    })
    .await;
    written("removed", "after the removal").await;

    // A restarted Stencil never loaded the definition: it converts with the kept revision
    // the CRD carries.
    stencil.child.kill().unwrap();
    stencil.child.wait().unwrap();
    let restarted = spawn_stencil_env(&args, &kubeconfig, dir.path().join("b.log"), &env);
    wait_for("the restarted webhook to serve", TIMEOUT, || async {
        std::net::TcpStream::connect(("127.0.0.1", port)).ok()
    })
    .await;
    written("restarted", "after a restart").await;
    assert!(
        restarted.logs().contains("kept revision the CRD carries"),
        "{}",
        restarted.logs()
    );
    let all = old.list(&Default::default()).await.unwrap();
    assert_eq!(all.items.len(), 4, "every site reads at v1alpha1");
}

/// What the API server sends the webhook for a large list read at a spoke version: 30
/// objects of 100 KiB (3 MiB), read from its watch cache and at an exact resourceVersion
/// from etcd. On the rig it never sends more than one object in a review; the test
/// proves both lists convert whole, and prints how many reviews each took.
#[tokio::test]
async fn a_three_mib_list_read_at_a_spoke_version_converts_whole() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "convlist").await;
    let group = unique_group();
    let dir = tempfile::tempdir().unwrap();
    let webhook = common::loopback_webhook(&ns.name, "webhook-cert");
    let stencil = common::start_stencil_with(&[website(&group, dir.path())], false, Some(webhook)).await;
    wait_established(&client, &format!("websites.{group}")).await;
    let (old, new) = (
        sites(&client, &group, "v1alpha1", &ns.name),
        sites(&client, &group, "v1", &ns.name),
    );
    let page = "x".repeat(100 * 1024);
    for i in 0..30 {
        let site = object(json!({"apiVersion": format!("{group}/v1"), "kind": "Website",
            "metadata": {"name": format!("s{i:02}"), "namespace": ns.name},
            "spec": {"content": {"index.html": page}, "domains": [format!("s{i:02}.example.com")]}}));
        common::create_when_served(&new, &site).await;
    }
    let at = new
        .list(&Default::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let reviews = || stencil.metric_sum("stencil_conversion_review_seconds_count", "");
    let exact = kube::api::ListParams::default()
        .at(&at)
        .matching(kube::api::VersionMatch::Exact);
    for (how, params) in [
        ("from the watch cache", Default::default()),
        ("at an exact resourceVersion", exact),
    ] {
        let before = reviews();
        let list = old
            .list(&params)
            .await
            .unwrap_or_else(|e| panic!("a 3 MiB list at v1alpha1 {how}: {e}"));
        eprintln!(
            "a 30-object list read at v1alpha1 {how}: {} ConversionReviews answered meanwhile",
            reviews() - before
        );
        let mut domains: Vec<&str> = list
            .items
            .iter()
            .filter_map(|s| s.data["spec"]["domain"].as_str())
            .collect();
        domains.sort_unstable();
        let want: Vec<String> = (0..30).map(|i| format!("s{i:02}.example.com")).collect();
        assert_eq!(domains, want, "{how}");
    }
}
