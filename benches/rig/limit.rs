//! The limit for B1: the same writes from a plain client.

use super::*;

/// The limit: the same creates and status writes from a plain client, which writes a
/// parent's Ready condition once its Deployment is Available, as Stencil does.
pub(super) async fn plain_client(client: &Client, n: usize, replicas: u64) -> Duration {
    let ns = "bench-plain";
    namespace(client, ns).await;
    let started = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let client = client.clone();
            async move {
                let name = format!("plain-{i}");
                let parents = apps(&client, ns, APPS);
                parents.create(&PostParams::default(), &app(&name, APPS)).await?;
                let pp = PostParams::default();
                let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}, "data": {"greeting": "hello"}})).unwrap();
                Api::<ConfigMap>::namespaced(client.clone(), ns).create(&pp, &cm).await?;
                let svc = serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"clusterIP": "None", "selector": {"app": name}, "ports": [{"port": 80}]}})).unwrap();
                Api::<k8s_openapi::api::core::v1::Service>::namespaced(client.clone(), ns).create(&pp, &svc).await?;
                let dep: Deployment = serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"replicas": replicas,
                    "selector": {"matchLabels": {"app": name}}, "template": {"metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "app", "image": "nginx",
                        "resources": {"requests": {"cpu": "1000m", "memory": "64Mi"}}}]}}}})).unwrap();
                Api::<Deployment>::namespaced(client.clone(), ns).create(&pp, &dep).await?;
                Ok::<_, kube::Error>(())
            }
        })
        .buffer_unordered(PLAIN_CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await
        .expect("plain client writes");
    let deployments = Api::<Deployment>::namespaced(client.clone(), ns);
    let parents = apps(client, ns, APPS);
    let mut ready = std::collections::HashSet::new();
    while ready.len() < n {
        assert!(
            started.elapsed() < Duration::from_secs(3600),
            "plain client: deployments never became available"
        );
        let available: Vec<String> = deployments
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
            .into_iter()
            .filter(|d| {
                d.status.as_ref().is_some_and(|s| {
                    s.observed_generation.unwrap_or(0) >= 1 && s.available_replicas.unwrap_or(0) as u64 >= replicas
                })
            })
            .filter_map(|d| d.metadata.name)
            .filter(|name| !ready.contains(name))
            .collect();
        let status = Patch::Merge(
            json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Plain", "message": ""}]}}),
        );
        let params = PatchParams::default();
        futures::stream::iter(available.iter())
            .map(|name| parents.patch_status(name, &params, &status))
            .buffer_unordered(PLAIN_CONCURRENCY)
            .try_collect::<Vec<_>>()
            .await
            .expect("plain client status writes");
        ready.extend(available);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let elapsed = started.elapsed();
    let nss: Api<Namespace> = Api::all(client.clone());
    let _ = nss.delete(ns, &DeleteParams::default()).await;
    elapsed
}
