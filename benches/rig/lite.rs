//! B1b: N parents whose three children (a ConfigMap, a Secret and a headless Service)
//! need nothing from the controller manager and are ready once they exist, so that
//! convergence is bound by the controller and the API server alone. Stencil, a plain
//! client making creates, the same plain client making Stencil's own writes (rendered by
//! Stencil's core), and kro (when built) converge the same N in turn, each in a fresh
//! namespace, timed from the first create to the moment an [`Observer`] sees every parent
//! Ready, with the CPU the API server and etcd spent meanwhile.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use stencil_core::compile::{self, CompiledDefinition};
use stencil_core::fixtures::{self, ParentKind, child};
use stencil_core::gvk::Scopes;
use stencil_core::render::{self, RenderInput};
use stencil_core::{applied, labels};

use super::observe::Observer;
use super::{
    Controller, GROUP, PLAIN_CONCURRENCY, Parents, app, apply_all, apps, count_children, create_parents, delete_all,
    kro_dir, namespace, remove_namespace, root, server_cpu_seconds, service_account_kubeconfig, stencil_rbac, until,
};

pub(super) const LITES: Parents = Parents {
    group: GROUP,
    version: "v1",
    kind: "Lite",
    plural: "lites",
};

const KRO_LITES: Parents = Parents {
    group: "kro.run",
    version: "v1alpha1",
    kind: "KLite",
    plural: "klites",
};

/// The B1b definition: three children that are ready as soon as they exist.
pub(super) fn definition() -> String {
    let lite = ParentKind {
        group: GROUP,
        kind: "Lite",
        plural: "lites",
    };
    let meta = "metadata:\n  name: {{ parent.metadata.name }}";
    let children = [
        child(
            "config",
            &format!(
                "apiVersion: v1\nkind: ConfigMap\n{meta}\ndata:\n  greeting: {{{{ parent.spec.greeting | quote }}}}"
            ),
        ),
        child(
            "secret",
            &format!(
                "apiVersion: v1\nkind: Secret\n{meta}\nstringData:\n  greeting: {{{{ parent.spec.greeting | quote }}}}"
            ),
        ),
        child(
            "service",
            &format!(
                "apiVersion: v1\nkind: Service\n{meta}\nspec:\n  clusterIP: None\n  selector: {{app: {{{{ parent.metadata.name }}}}}}\n  ports: [{{port: 80}}]"
            ),
        ),
    ];
    fixtures::definition(lite, &children.concat(), "")
}

/// kro's equivalent graph: the same three children, no readiness rule.
fn kro_graph() -> Value {
    let name = "${schema.metadata.name}";
    let greeting = "${schema.spec.greeting}";
    json!({
        "apiVersion": "kro.run/v1alpha1",
        "kind": "ResourceGraphDefinition",
        "metadata": {"name": "klites"},
        "spec": {
            "schema": {"apiVersion": "v1alpha1", "kind": "KLite", "spec": {"greeting": "string"}},
            "resources": [
                {"id": "config", "template": {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name}, "data": {"greeting": greeting}}},
                {"id": "secret", "template": {"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": name}, "stringData": {"greeting": greeting}}},
                {"id": "service", "template": {"apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": name},
                    "spec": {"clusterIP": "None", "selector": {"app": name}, "ports": [{"port": 80}]}}},
            ],
        },
    })
}

/// How long a contender may take to converge B1b's N parents.
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(3600);

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("lite-{i}")).collect()
}

/// How long a contender took to converge B1b's N parents, and what that cost the API
/// server and etcd in CPU seconds.
pub(super) struct Converged {
    pub(super) took: Duration,
    server_cpu: f64,
}

impl Converged {
    /// Records the control plane's CPU per parent, in milliseconds, under `key`.
    fn record(&self, results: &mut BTreeMap<&'static str, Value>, key: &'static str, n: usize) {
        results.insert(key, json!(self.server_cpu * 1000.0 / n as f64));
    }
}

/// Creates N parents at once and waits until each has its children and is Ready, as
/// the watches of an [`Observer`] see it.
pub(super) async fn converge(client: &Client, ns: &str, n: usize, p: Parents) -> Converged {
    let api = apps(client, ns, p);
    let mut observer = Observer::start(client, ns, p).await;
    let server_cpu = server_cpu_seconds();
    let started = Instant::now();
    create_parents(&api, &names(n), p).await;
    Converged {
        took: observer.converged(n, 3 * n, CONVERGE_TIMEOUT).await - started,
        server_cpu: server_cpu_seconds() - server_cpu,
    }
}

/// Deletes every parent of `ns` and waits for their children to go.
pub(super) async fn teardown(client: &Client, ns: &str, p: Parents) {
    delete_all(&apps(client, ns, p)).await;
    until(
        &format!("B1b children in {ns} to go"),
        Duration::from_secs(1800),
        || async { count_children(client, ns).await == 0 },
    )
    .await;
}

/// How the plain client writes each parent's children.
#[derive(Clone, Copy)]
enum Writes {
    /// Three creates, one label each: the least the API server takes.
    Create,
    /// Stencil's own writes: the children its renderer makes of the B1b definition
    /// (labels, applied-hash annotation, owner reference), each a create-only server-side
    /// apply as `stencil`, one Normal event, and the status rendered from the answers.
    Stencil,
}

/// A plain client converging N parents with Stencil's concurrency: per parent, the
/// parent, its three children and its Ready status, written one after another.
async fn plain(client: &Client, n: usize, writes: Writes) -> Converged {
    let ns = match writes {
        Writes::Create => "bench-lite-plain",
        Writes::Stencil => "bench-lite-writes",
    };
    namespace(client, ns).await;
    let def = compiled();
    let mut observer = Observer::start(client, ns, LITES).await;
    let server_cpu = server_cpu_seconds();
    let started = Instant::now();
    futures::stream::iter(names(n))
        .map(|name| {
            let (client, def) = (client.clone(), &def);
            async move {
                let parents = apps(&client, ns, LITES);
                let parent = parents.create(&PostParams::default(), &app(&name, LITES)).await?;
                let status = match writes {
                    Writes::Create => create_children(&client, ns, &name).await?,
                    Writes::Stencil => stencil_writes(&client, def, &parent).await?,
                };
                parents
                    .patch_status(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(&json!({"status": status})),
                    )
                    .await?;
                Ok::<_, kube::Error>(())
            }
        })
        .buffer_unordered(PLAIN_CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await
        .expect("plain client writes");
    let converged = Converged {
        took: observer.converged(n, 3 * n, CONVERGE_TIMEOUT).await - started,
        server_cpu: server_cpu_seconds() - server_cpu,
    };
    // Its deletion would otherwise run on while the next contender converges.
    remove_namespace(client, ns).await;
    converged
}

/// Creates `name`'s three children with one label each; the Ready status to write.
async fn create_children(client: &Client, ns: &str, name: &str) -> Result<Value, kube::Error> {
    let pp = PostParams::default();
    let meta = json!({"name": name, "labels": {"app.kubernetes.io/managed-by": "bench-plain"}});
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": meta, "data": {"greeting": "hello"}})).unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .create(&pp, &cm)
        .await?;
    let secret: Secret =
        serde_json::from_value(json!({"metadata": meta, "stringData": {"greeting": "hello"}})).unwrap();
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&pp, &secret)
        .await?;
    let svc: Service = serde_json::from_value(json!({"metadata": meta,
        "spec": {"clusterIP": "None", "selector": {"app": name}, "ports": [{"port": 80}]}}))
    .unwrap();
    Api::<Service>::namespaced(client.clone(), ns).create(&pp, &svc).await?;
    Ok(json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Plain", "message": ""}]}))
}

/// The B1b definition, compiled by Stencil's core.
fn compiled() -> CompiledDefinition {
    let (mut defs, diagnostics) = compile::compile_file("lites.yaml", &definition());
    assert!(defs.len() == 1, "the B1b definition compiles: {diagnostics:?}");
    defs.remove(0)
}

/// Writes what Stencil writes for a new parent, from the objects its renderer makes;
/// the status rendered from the answers.
async fn stencil_writes(
    client: &Client,
    def: &CompiledDefinition,
    parent: &DynamicObject,
) -> Result<Value, kube::Error> {
    let parent = serde_json::to_value(parent).expect("a parent as JSON");
    let (scopes, lookups) = (Scopes::default(), BTreeMap::new());
    let render = |observed: &BTreeMap<String, Vec<Value>>| {
        let input = RenderInput {
            parent: &parent,
            observed,
            lookups: &lookups,
            scopes: &scopes,
            served: &[],
        };
        render::render(def, input).expect("the B1b definition renders")
    };
    let params = PatchParams::apply(labels::FIELD_MANAGER);
    let applies = render(&BTreeMap::new()).children.into_iter().map(|child| {
        let (mut body, _) = applied::with_hash(child.object);
        body["metadata"]["resourceVersion"] = applied::CREATE_ONLY.into();
        let (api, name) = (
            child_api(client, &body),
            body["metadata"]["name"].as_str().unwrap_or_default().to_string(),
        );
        let params = params.clone();
        async move {
            let answer = api.patch(&name, &params, &Patch::Apply(&body)).await?;
            Ok::<_, kube::Error>((child.child, serde_json::to_value(answer).expect("an answer as JSON")))
        }
    });
    let mut observed: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for (child, answer) in futures::future::try_join_all(applies).await? {
        observed.entry(child).or_default().push(answer);
    }
    let ns = parent["metadata"]["namespace"].as_str().unwrap_or_default();
    Api::<Event>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &created_event(&parent, &observed))
        .await?;
    Ok(render(&observed).status)
}

/// The namespaced API of a rendered child.
fn child_api(client: &Client, body: &Value) -> Api<DynamicObject> {
    let kind = body["kind"].as_str().unwrap_or_default();
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", kind));
    Api::namespaced_with(
        client.clone(),
        body["metadata"]["namespace"].as_str().unwrap_or_default(),
        &ar,
    )
}

/// A Normal event like the one Stencil's pass writes, naming what it created.
fn created_event(parent: &Value, observed: &BTreeMap<String, Vec<Value>>) -> Event {
    let meta = &parent["metadata"];
    let name = meta["name"].as_str().unwrap_or_default();
    let now = k8s_openapi::jiff::Timestamp::now();
    let created: Vec<String> = observed
        .values()
        .flatten()
        .map(|o| {
            format!(
                "{} {}/{} created",
                o["kind"].as_str().unwrap_or_default(),
                meta["namespace"].as_str().unwrap_or_default(),
                o["metadata"]["name"].as_str().unwrap_or_default()
            )
        })
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": format!("{name}.{:x}", now.as_nanosecond()), "namespace": meta["namespace"]},
        "eventTime": now.to_string(),
        "reportingController": "stencil", "reportingInstance": "stencil",
        "action": "Created", "reason": "Created", "type": "Normal", "note": created.join("; "),
        "regarding": {"apiVersion": format!("{}/{}", LITES.group, LITES.version), "kind": LITES.kind,
            "name": name, "namespace": meta["namespace"], "uid": meta["uid"]},
    }))
    .expect("an event")
}

/// kro converging the same N, or why it did not run.
async fn kro(client: &Client, n: usize, dir: &Path) -> Result<Converged, String> {
    let kro = kro_dir()?;
    let kubeconfig = service_account_kubeconfig(client, "kro", super::kro_rbac(), dir).await;
    super::kro_crds(client, &kro).await;
    let controller = Controller::kro(&kro.join("kro"), &kubeconfig, &root().join("target/bench/kro-lite.log"));
    apply_all(client, vec![kro_graph()]).await;
    let ns = "bench-lite-kro";
    namespace(client, ns).await;
    let api = apps(client, ns, KRO_LITES);
    until("kro to serve the KLite kind", Duration::from_secs(120), || async {
        api.list(&ListParams::default().limit(1)).await.is_ok()
    })
    .await;
    let took = converge(client, ns, n, KRO_LITES).await;
    teardown(client, ns, KRO_LITES).await;
    controller.stop();
    Ok(took)
}

/// B1b at N: Stencil, then the plain client, then kro.
pub(super) async fn run(client: &Client, dir: &Path, n: usize, results: &mut BTreeMap<&'static str, Value>) {
    let defs = dir.join("lite-definitions");
    std::fs::create_dir_all(&defs).unwrap();
    std::fs::write(defs.join("lites.yaml"), definition()).unwrap();
    let kubeconfig = service_account_kubeconfig(client, "stencil", stencil_rbac(&defs), dir).await;
    let ns = "bench-lite";
    namespace(client, ns).await;
    let stencil = Controller::stencil(&defs, &kubeconfig, &root().join("target/bench/stencil-lite.log"));
    let api = apps(client, ns, LITES);
    until("the Lite kind to be served", Duration::from_secs(120), || async {
        api.list(&ListParams::default().limit(1)).await.is_ok()
    })
    .await;
    until(
        "Stencil to serve the Lite definition",
        Duration::from_secs(60),
        || async { stencil.metric("stencil_definitions{state=\"running\"}").await >= 1.0 },
    )
    .await;
    let base_rss = stencil.rss_kib().0;
    let cpu_before = stencil.cpu_seconds();
    let stencil_run = converge(client, ns, n, LITES).await;
    let took = stencil_run.took;
    stencil_run.record(results, "b1b_server_cpu_ms_per_parent", n);
    let rss = stencil.rss_kib().0;
    let passes = stencil.metric("controller_runtime_reconcile_total").await;
    results.insert("b1b_passes_per_parent", json!(passes / n as f64));
    results.insert("b1b_n", json!(n));
    results.insert("b1b_converge_s", json!(took.as_secs_f64()));
    results.insert("b1b_rss_mib", json!(rss as f64 / 1024.0));
    results.insert("b1b_base_rss_mib", json!(base_rss as f64 / 1024.0));
    results.insert(
        "b1b_kib_per_parent",
        json!(rss.saturating_sub(base_rss) as f64 / n as f64),
    );
    results.insert(
        "b1b_cpu_s_per_1k",
        json!((stencil.cpu_seconds() - cpu_before) * 1000.0 / n as f64),
    );
    teardown(client, ns, LITES).await;
    stencil.stop();

    let limit = plain(client, n, Writes::Create).await;
    limit.record(results, "b1b_plain_server_cpu_ms_per_parent", n);
    results.insert("b1b_plain_s", json!(limit.took.as_secs_f64()));
    results.insert("b1b_ratio", json!(took.as_secs_f64() / limit.took.as_secs_f64()));
    let writes = plain(client, n, Writes::Stencil).await;
    writes.record(results, "b1b_writes_server_cpu_ms_per_parent", n);
    results.insert("b1b_writes_s", json!(writes.took.as_secs_f64()));
    results.insert(
        "b1b_writes_ratio",
        json!(took.as_secs_f64() / writes.took.as_secs_f64()),
    );
    match kro(client, n, dir).await {
        Ok(kro) => {
            results.remove("b1b_kro_skipped");
            kro.record(results, "b1b_kro_server_cpu_ms_per_parent", n);
            results.insert("b1b_kro_s", json!(kro.took.as_secs_f64()));
            results.insert("b1b_kro_ratio", json!(kro.took.as_secs_f64() / took.as_secs_f64()));
        }
        Err(why) => {
            results.insert("b1b_kro_skipped", json!(why));
        }
    }
}
