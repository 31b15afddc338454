//! The peer: kro built from its module, its CRDs and RBAC installed, serving the graph
//! equivalent to the App definition at the same N.

use super::*;

/// kro's rules: its chart's default, every verb on every resource.
pub(super) fn kro_rbac() -> Vec<Value> {
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

/// kro's equivalent of the bench definition: the same three children, Ready once the
/// Deployment is available.
pub(super) fn kro_graph() -> Value {
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
pub(super) fn kro_dir() -> Result<PathBuf, String> {
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

/// Installs kro's CRDs from its build.
pub(super) async fn kro_crds(client: &Client, kro: &Path) {
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
pub(super) async fn kro(client: &Client, n: usize, samples: usize, dir: &Path, results: &mut BTreeMap<&str, Value>) {
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
