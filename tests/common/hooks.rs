//! metacontroller's side of the compatibility tests: hooks written in the tests from the
//! documented protocol, served on loopback with their calls counted, and a namespaced
//! custom kind for a controller object to serve.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::routing::post;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

/// Stencil serving metacontroller's controller objects, their CRDs installed first, with
/// the hooks of `host` called at `address`. A host of the test's own keeps a controller
/// object of another test (or one an earlier run left) from calling into this test.
pub async fn compat_stencil(client: &kube::Client, host: &str, address: SocketAddr) -> super::Stencil {
    for crd in stencil::metacontroller::crds() {
        super::install_crd(client, &crd).await;
    }
    super::start_stencil_options(stencil::runtime::Options {
        cluster_definitions: false,
        compat_metacontroller: true,
        hook_overrides: [(host.to_string(), address)].into(),
        ..Default::default()
    })
    .await
}

/// A hook: the answer to a request.
pub type Hook = fn(&Value) -> Value;

/// Serves each `(path, hook)` of `routes` on loopback; the counter at a route's index
/// counts its calls.
pub async fn serve_hooks(routes: &[(&str, Hook)]) -> (SocketAddr, Arc<Vec<AtomicUsize>>) {
    let calls: Arc<Vec<AtomicUsize>> = Arc::new(routes.iter().map(|_| AtomicUsize::new(0)).collect());
    let mut app = axum::Router::new();
    for (i, (path, hook)) in routes.iter().enumerate() {
        let (calls, hook) = (calls.clone(), *hook);
        app = app.route(
            path,
            post(move |body: String| async move {
                calls[i].fetch_add(1, Ordering::SeqCst);
                hook(&serde_json::from_str(&body).unwrap()).to_string()
            }),
        );
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (address, calls)
}

/// A kind `kind` (plural `plural`) in `group` of `scope` (`Namespaced` or `Cluster`),
/// with a status subresource and any spec and status.
pub fn open_crd(group: &str, kind: &str, plural: &str, scope: &str) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {"group": group, "scope": scope,
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}
    }))
    .unwrap()
}
