//! A mock API service: every request the controller sends is recorded and answered like
//! a small API server would answer it, so a test can say exactly which requests a state of
//! the world causes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use http::{Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{Value, json};

use crate::reconcile::apply;

/// One request the controller sent.
#[derive(Debug, Clone)]
pub(super) struct Seen {
    pub(super) method: String,
    pub(super) path: String,
    pub(super) query: String,
    pub(super) body: Value,
}

impl Seen {
    /// The request as `METHOD path`.
    pub(super) fn short(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// Answers the mock API gives instead of accepting a write: path → a `Status`.
pub(super) type Refusals = Arc<Mutex<HashMap<String, Value>>>;

/// The objects the mock API holds, by path.
pub(super) type Objects = Arc<Mutex<HashMap<String, Value>>>;

/// A client and what its mock API service saw and holds.
pub(super) struct MockApi {
    pub(super) client: kube::Client,
    /// Every request, in the order sent.
    pub(super) seen: Arc<Mutex<Vec<Seen>>>,
    /// The ConfigMaps the service holds, by path.
    pub(super) objects: Objects,
    /// Writes to refuse, by path.
    pub(super) refusals: Refusals,
}

impl MockApi {
    /// A service holding the ConfigMaps `existing`, that answers a merge patch (of a
    /// parent's finalizers or labels) with `patched`.
    ///
    /// It answers like a small API server: an applied object is kept and echoed back (with
    /// a uid), a create-only apply of an object that exists is refused (409) as the API
    /// server refuses it, a read finds what was applied (or what `existing` holds) or
    /// answers 404, a list of ConfigMaps finds those kept with the selected label, a delete
    /// succeeds, and a write to a path in `refusals` is refused with its status.
    pub(super) fn start(existing: Vec<Value>, patched: Value) -> MockApi {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let api = MockApi {
            client: kube::Client::new(service, "default"),
            seen: Arc::default(),
            objects: Arc::new(Mutex::new(existing.iter().map(|o| (path_of(o), o.clone())).collect())),
            refusals: Refusals::default(),
        };
        let (seen, objects, refusals) = (api.seen.clone(), api.objects.clone(), api.refusals.clone());
        tokio::spawn(async move {
            while let Some((request, respond)) = handle.next_request().await {
                let method = request.method().to_string();
                let path = request.uri().path().to_string();
                let query = request.uri().query().unwrap_or_default().to_string();
                let bytes = request.into_body().collect_bytes().await.unwrap_or_default();
                let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                let request = Seen {
                    method,
                    path,
                    query,
                    body,
                };
                seen.lock().unwrap().push(request.clone());
                let refused = refusals.lock().unwrap().get(&request.path).cloned();
                let (code, answer) = answer(request, refused, &mut objects.lock().unwrap(), &patched);
                let response = Response::builder()
                    .status(code)
                    .body(Body::from(serde_json::to_vec(&answer).unwrap()))
                    .unwrap();
                respond.send_response(response);
            }
        });
        api
    }
}

/// Where the API serves the ConfigMap `o`.
fn path_of(o: &Value) -> String {
    format!(
        "/api/v1/namespaces/{}/configmaps/{}",
        o["metadata"]["namespace"].as_str().unwrap_or("ns"),
        o["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// The service's answer to `request`, given the refusal for its path.
fn answer(
    request: Seen,
    refused: Option<Value>,
    objects: &mut HashMap<String, Value>,
    patched: &Value,
) -> (StatusCode, Value) {
    let Seen {
        method,
        path,
        query,
        body,
    } = request;
    match method.as_str() {
        "PATCH" | "DELETE" if refused.is_some() => {
            let status = refused.unwrap();
            let code = status["code"]
                .as_u64()
                .and_then(|c| StatusCode::from_u16(c as u16).ok());
            (code.unwrap_or(StatusCode::UNPROCESSABLE_ENTITY), status)
        }
        "DELETE" => (
            StatusCode::OK,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
        ),
        "PATCH" if body["metadata"]["resourceVersion"] == apply::CREATE_ONLY && objects.contains_key(&path) => {
            let conflict = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409,
                "message": "the object has been modified; please apply your changes to the latest version and try again"});
            (StatusCode::CONFLICT, conflict)
        }
        "GET" if path == "/api/v1/configmaps" => (StatusCode::OK, list(objects, &query)),
        "GET" => match objects.get(&path) {
            Some(o) => (StatusCode::OK, o.clone()),
            None => (StatusCode::NOT_FOUND, not_found()),
        },
        _ => {
            let mut obj = if body.get("metadata").is_some() && body.get("apiVersion").is_some() {
                body
            } else {
                patched.clone()
            };
            obj["metadata"]["uid"] = json!("answered-uid");
            if path.contains("/configmaps/") {
                objects.insert(path, obj.clone());
            }
            (StatusCode::OK, obj)
        }
    }
}

/// The `Status` of a 404.
pub(super) fn not_found() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404, "message": "not found"})
}

/// A list of the objects whose labels hold the query's `labelSelector=key=value`.
fn list(objects: &HashMap<String, Value>, query: &str) -> Value {
    let selector = query
        .split('&')
        .find_map(|p| p.strip_prefix("labelSelector="))
        .unwrap_or_default()
        .replace("%2F", "/")
        .replace("%3D", "=");
    let (key, value) = selector.split_once('=').unwrap_or_default();
    let items: Vec<Value> = objects
        .values()
        .filter(|o| o["metadata"]["labels"][key] == value)
        .cloned()
        .collect();
    json!({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {"resourceVersion": "9"}, "items": items})
}
