//! The rig as the bench sees it: the admin client, namespaces made and removed, objects
//! applied, identities with the RBAC `stencil rbac` derives, and the API server's CPU.

use super::*;

pub(super) fn kubeconfig_path() -> PathBuf {
    std::env::var("STENCIL_TEST_KUBECONFIG")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root().join("target/testenv/kubeconfig"))
}

pub(super) async fn admin() -> Client {
    let kc = Kubeconfig::read_from(kubeconfig_path()).expect("a kubeconfig: run `make testenv-up`");
    Client::try_from(
        Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .unwrap(),
    )
    .unwrap()
}

/// Stencil's rules, as `stencil rbac` derives them for the bench's definition.
pub(super) fn stencil_rbac(defs: &Path) -> Vec<Value> {
    rbac_for(defs, &[])
}

/// The rules `stencil rbac` derives for `defs`, with `extra` arguments.
pub(super) fn rbac_for(defs: &Path, extra: &[&str]) -> Vec<Value> {
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

/// A non-admin identity: the ServiceAccount `stencil-bench/<sa>` bound to `rbac`, so API
/// Priority and Fairness applies as it would in production.
pub(super) async fn service_account_kubeconfig(client: &Client, sa: &str, rbac: Vec<Value>, dir: &Path) -> PathBuf {
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

/// Makes an empty namespace `name`, deleting one left by an earlier run first.
pub(super) async fn namespace(client: &Client, name: &str) {
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
pub(super) async fn remove_namespace(client: &Client, name: &str) -> bool {
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
pub(super) async fn remove_leftover_namespaces(client: &Client) {
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

pub(super) async fn apply_all(client: &Client, objects: Vec<Value>) {
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

/// CPU seconds the rig's API server and etcd have used: what a contender's writes cost
/// the control plane, read before and after it converges.
pub(super) fn server_cpu_seconds() -> f64 {
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
