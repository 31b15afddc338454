//! The rig's API server and etcd, reached past Stencil: a kubeconfig for another user,
//! the API server stopped and started, and what etcd stores.

use kube::config::Kubeconfig;

use super::kubeconfig_path;

/// A kubeconfig for the rig's API server that authenticates with `token`.
pub fn token_kubeconfig(token: &str, dir: &std::path::Path) -> std::path::PathBuf {
    let admin = Kubeconfig::read_from(kubeconfig_path()).unwrap();
    let cluster = admin.clusters[0].cluster.clone().unwrap();
    let mut ca = cluster.certificate_authority_data.clone();
    if ca.is_none()
        && let Some(path) = &cluster.certificate_authority
    {
        use base64::Engine as _;
        ca = Some(base64::engine::general_purpose::STANDARD.encode(std::fs::read(path).unwrap()));
    }
    let config = serde_json::json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "rig", "cluster": {"server": cluster.server, "certificate-authority-data": ca}}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "rig", "user": "sa"}}],
    });
    let path = dir.join("sa-kubeconfig.yaml");
    std::fs::write(&path, stencil::yaml::to_string(&config).unwrap()).unwrap();
    path
}

/// Runs `tests/testenv/apiserver.sh` with `args` (kill, start, etcd-url) and returns its output.
pub fn apiserver(args: &[&str]) -> String {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/testenv/apiserver.sh");
    let out = std::process::Command::new(script)
        .args(args)
        .output()
        .expect("apiserver.sh");
    assert!(
        out.status.success(),
        "apiserver.sh {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A POST to etcd's JSON gateway.
pub async fn etcd(url: &str, path: &str, body: serde_json::Value) -> serde_json::Value {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = url.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("etcd answers");
    let body = body.to_string();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).await.unwrap();
    let (head, json) = response.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "etcd {path}: {response}");
    // The gateway may answer chunked: the JSON object is what lies between the braces.
    let start = json.find('{').expect("a JSON body");
    let end = json.rfind('}').expect("a JSON body");
    serde_json::from_str(&json[start..=end]).unwrap()
}

/// The object etcd stores under `key` (`/registry/<group>/<plural>/<namespace>/<name>`
/// for a custom resource, which it keeps as JSON), read past the API server.
pub async fn stored_in_etcd(key: &str) -> Option<serde_json::Value> {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let range = etcd(
        &apiserver(&["etcd-url"]),
        "/v3/kv/range",
        serde_json::json!({"key": b64.encode(key)}),
    )
    .await;
    let value = range["kvs"].as_array()?.first()?["value"].as_str()?.to_string();
    serde_json::from_slice(&b64.decode(value).ok()?).ok()
}
