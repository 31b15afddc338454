//! What the controller decides to send, against a mock API service: every request one
//! reconcile makes is recorded and answered, so a test says exactly which writes a state
//! of the world causes, and that a converged one causes none.

use std::sync::{Arc, Mutex};

use http::{Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{Value, json};

use super::*;
use crate::compile::compile_file;
use crate::gvk::Gvk;
use crate::labels;
use crate::metrics::Metrics;
use crate::watch::HandFed;
use ledger::Tracked;

mod sharded;

/// One request the controller sent.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    query: String,
    body: Value,
}

impl Seen {
    fn short(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// Answers the mock API gives instead of accepting a write: path → a `Status`.
type Refusals = Arc<Mutex<std::collections::HashMap<String, Value>>>;

/// The objects the mock API holds, by path.
type Objects = Arc<Mutex<std::collections::HashMap<String, Value>>>;

/// A client whose every request is recorded and answered like a small API server: an
/// applied object is kept and echoed back (with a uid), a create-only apply of an object
/// that exists is refused (409) as the API server refuses it, a read finds what was applied
/// (or what `existing` holds) or answers 404, a list of ConfigMaps finds those kept with
/// the selected label, a delete succeeds, and a write to a path in `refusals` is refused
/// with its status.
fn mock_client(existing: Vec<Value>, refusals: Refusals) -> (kube::Client, Arc<Mutex<Vec<Seen>>>, Objects) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let path_of = |o: &Value| {
        format!(
            "/api/v1/namespaces/{}/configmaps/{}",
            o["metadata"]["namespace"].as_str().unwrap_or("ns"),
            o["metadata"]["name"].as_str().unwrap_or_default()
        )
    };
    let objects: Objects = Arc::new(Mutex::new(existing.iter().map(|o| (path_of(o), o.clone())).collect()));
    let kept = objects.clone();
    tokio::spawn(async move {
        while let Some((request, respond)) = handle.next_request().await {
            let method = request.method().to_string();
            let path = request.uri().path().to_string();
            let query = request.uri().query().unwrap_or_default().to_string();
            let bytes = request.into_body().collect_bytes().await.unwrap_or_default();
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            record.lock().unwrap().push(Seen {
                method: method.clone(),
                path: path.clone(),
                query: query.clone(),
                body: body.clone(),
            });
            let not_found = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404, "message": "not found"});
            let refused = refusals.lock().unwrap().get(&path).cloned();
            let mut objects = kept.lock().unwrap();
            let (code, answer) = match method.as_str() {
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
                "GET" if path == "/api/v1/configmaps" => (StatusCode::OK, list(&objects, &query)),
                "GET" => match objects.get(&path) {
                    Some(o) => (StatusCode::OK, o.clone()),
                    None => (StatusCode::NOT_FOUND, not_found),
                },
                _ => {
                    // A merge patch of a parent's labels is answered with the parent.
                    let mut obj = if body.get("metadata").is_some() && body.get("apiVersion").is_some() {
                        body
                    } else {
                        parent(None)
                    };
                    obj["metadata"]["uid"] = json!("answered-uid");
                    if path.contains("/configmaps/") {
                        objects.insert(path, obj.clone());
                    }
                    (StatusCode::OK, obj)
                }
            };
            drop(objects);
            let response = Response::builder()
                .status(code)
                .body(Body::from(serde_json::to_vec(&answer).unwrap()))
                .unwrap();
            respond.send_response(response);
        }
    });
    (kube::Client::new(service, "default"), seen, objects)
}

/// A list of the objects whose labels hold the query's `labelSelector=key=value`.
fn list(objects: &std::collections::HashMap<String, Value>, query: &str) -> Value {
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

const DEFINITION: &str = "apiVersion: stencil.dev/v1alpha1
kind: OperatorDefinition
metadata:
  name: widgets.example.org
spec:
  parent:
    apiVersion: example.org/v1
    kind: Widget
  children:
    - name: cm
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: {{ parent.metadata.name }}-cm
        data:
          size: {{ parent.spec.size | quote }}
";

fn parent(status: Option<Value>) -> Value {
    let mut p = json!({"apiVersion": "example.org/v1", "kind": "Widget",
        "metadata": {"name": "w", "namespace": "ns", "uid": "parent-uid", "generation": 1, "resourceVersion": "1"},
        "spec": {"size": 3}});
    if let Some(s) = status {
        p["status"] = s;
    }
    p
}

/// A definition whose child template spends most of its fuel before it renders.
fn busy_definition() -> String {
    DEFINITION.replace(
        "          size: {{ parent.spec.size | quote }}",
        "          size: {% for i in range(300) %}{% for j in range(1000) %}{% endfor %}{% endfor %}{{ parent.spec.size | quote }}",
    )
}

struct World {
    ctx: Arc<Context>,
    parents: HandFed,
    children: HandFed,
    seen: Arc<Mutex<Vec<Seen>>>,
    refusals: Refusals,
    objects: Objects,
}

impl World {
    fn new() -> World {
        World::with(DEFINITION)
    }

    fn with(text: &str) -> World {
        World::existing(text, Vec::new())
    }

    /// A world in which `existing` objects are on the API server but not in the store
    /// (made by hand or by another controller).
    fn existing(text: &str, existing: Vec<Value>) -> World {
        let (mut defs, diags) = compile_file("d.yaml", text);
        assert!(diags.0.is_empty(), "{diags}");
        let def = Arc::new(defs.remove(0));
        let parents = HandFed::new(&def.parent, "widgets", true);
        let children = HandFed::new(&Gvk::parse("v1", "ConfigMap").unwrap(), "configmaps", true);
        let refusals = Refusals::default();
        let (client, seen, objects) = mock_client(existing, refusals.clone());
        let ctx = Arc::new(Context::new(
            client,
            def,
            Arc::new(Metrics::new()),
            parents.lease.clone(),
            vec![children.lease.clone()],
            Vec::new(),
        ));
        World {
            ctx,
            parents,
            children,
            seen,
            refusals,
            objects,
        }
    }

    /// The ConfigMap `name` of namespace `ns` as the mock API holds it.
    fn stored(&self, name: &str) -> Value {
        let path = format!("/api/v1/namespaces/ns/configmaps/{name}");
        self.objects.lock().unwrap().get(&path).cloned().unwrap_or(Value::Null)
    }

    /// Reconciles a new parent and stores the child it applied, as the watch would;
    /// returns the stored child.
    async fn create_child(&mut self) -> Value {
        let first = self.reconcile(parent(None)).await;
        let mut child = first[0].body.clone();
        child["metadata"]["uid"] = json!("child-uid");
        self.children.apply(child.clone());
        child
    }

    /// Reconciles a deleted parent as it is now; returns what the reconcile came to and
    /// the requests sent as `METHOD path`, events left out.
    async fn reconcile_deleted(&mut self, deleted: Value) -> (Result<Action, ReconcileError>, Vec<String>) {
        self.parents.apply(deleted.clone());
        self.seen.lock().unwrap().clear();
        let obj: DynamicObject = serde_json::from_value(deleted).unwrap();
        let result = reconcile(Arc::new(obj), self.ctx.clone()).await;
        let sent = self
            .seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| !s.path.contains("/events"))
            .map(Seen::short)
            .collect();
        (result, sent)
    }

    /// Reconciles the parent as it is now; returns the requests sent, events left out.
    async fn reconcile(&mut self, parent: Value) -> Vec<Seen> {
        self.parents.apply(parent.clone());
        self.seen.lock().unwrap().clear();
        let obj: DynamicObject = serde_json::from_value(parent).unwrap();
        reconcile(Arc::new(obj), self.ctx.clone()).await.expect("reconcile");
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| !s.path.contains("/events"))
            .cloned()
            .collect()
    }
}

#[tokio::test]
async fn a_new_parent_gets_its_child_by_server_side_apply_then_its_status() {
    let mut w = World::new();
    let sent = w.reconcile(parent(None)).await;
    let short: Vec<String> = sent.iter().map(Seen::short).collect();
    assert_eq!(
        short,
        [
            "PATCH /api/v1/namespaces/ns/configmaps/w-cm",
            "PATCH /apis/example.org/v1/namespaces/ns/widgets/w/status",
        ],
        "no read before the first write: a create that cannot write an existing object"
    );
    let apply = &sent[0];
    assert_eq!(apply.body["metadata"]["resourceVersion"], apply::CREATE_ONLY);
    assert!(apply.query.contains("fieldManager=stencil"), "{}", apply.query);
    assert!(
        !apply.query.contains("force"),
        "a first apply does not force: {}",
        apply.query
    );
    assert_eq!(apply.body["data"]["size"], "3");
    assert_eq!(apply.body["metadata"]["labels"][labels::PARENT_UID], "parent-uid");
    assert_eq!(apply.body["metadata"]["ownerReferences"][0]["uid"], "parent-uid");
    let ready = condition(&sent[1].body["status"], "Ready");
    assert_eq!(
        ready["status"], "True",
        "the ConfigMap is ready once it exists, and the write's answer says it does: {ready}"
    );
}

fn condition(status: &Value, type_: &str) -> Value {
    status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == type_))
        .cloned()
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn a_converged_parent_sends_nothing() {
    let mut w = World::new();
    // The world as the first reconcile left it: the applied child, and the written status
    // with the child now observed and Ready.
    w.create_child().await;
    let status = w.reconcile(parent(None)).await[0].body["status"].clone();
    let sent = w.reconcile(parent(Some(status))).await;
    assert!(sent.is_empty(), "a converged parent sent {sent:?}");
}

#[tokio::test]
async fn a_child_no_longer_rendered_is_deleted_with_its_uid_as_precondition() {
    let mut w = World::new();
    let mut old = w.create_child().await;
    old["metadata"]["name"] = json!("w-old");
    old["metadata"]["uid"] = json!("old-uid");
    w.children.apply(old);
    let sent = w.reconcile(parent(None)).await;
    let deletes: Vec<&Seen> = sent.iter().filter(|s| s.method == "DELETE").collect();
    assert_eq!(deletes.len(), 1, "{sent:?}");
    assert_eq!(deletes[0].path, "/api/v1/namespaces/ns/configmaps/w-old");
    assert_eq!(deletes[0].body["preconditions"]["uid"], "old-uid");
}

#[tokio::test]
async fn a_deleted_parent_without_children_only_loses_its_finalizer() {
    let mut w = World::new();
    let mut deleted = parent(None);
    deleted["metadata"]["deletionTimestamp"] = json!("2026-12-03T00:00:00Z");
    deleted["metadata"]["finalizers"] = json!([labels::FINALIZER, "other.example.org/keep"]);
    let sent = w.reconcile(deleted).await;
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(
        sent[0].short(),
        "GET /api/v1/configmaps",
        "the API server confirms that no child is left"
    );
    assert!(
        sent[0]
            .query
            .contains("labelSelector=stencil.dev%2Fparent-uid%3Dparent-uid")
    );
    assert_eq!(sent[1].method, "PATCH");
    assert_eq!(sent[1].path, "/apis/example.org/v1/namespaces/ns/widgets/w");
    assert_eq!(
        sent[1].body["metadata"]["finalizers"],
        json!(["other.example.org/keep"]),
        "only Stencil's finalizer goes"
    );
    assert_eq!(
        sent[1].body["metadata"]["resourceVersion"], "1",
        "guarded by the resourceVersion"
    );
}

#[tokio::test]
async fn a_deleted_parent_whose_garbage_collector_cannot_help_deletes_its_children_first() {
    let mut w = World::new();
    w.create_child().await;
    let (result, sent) = w.reconcile_deleted(deleted_with_finalizer()).await;
    assert!(
        matches!(result, Err(ReconcileError::Waiting(_))),
        "it waits for the child to go"
    );
    assert_eq!(
        sent,
        [
            "DELETE /api/v1/namespaces/ns/configmaps/w-cm",
            "PATCH /apis/example.org/v1/namespaces/ns/widgets/w/status",
        ],
        "the child is deleted and the finalizer stays until it is gone"
    );
}

/// A render that burns its fuel runs on the blocking pool: the async thread that serves
/// every other parent keeps ticking meanwhile. On the async thread, the ticks would
/// stop for as long as the render runs.
#[tokio::test(flavor = "current_thread")]
async fn a_busy_render_leaves_the_async_thread_free() {
    let mut w = World::with(&busy_definition());
    let ticks = Arc::new(Mutex::new(Vec::new()));
    let record = ticks.clone();
    let ticker = tokio::spawn(async move {
        loop {
            record.lock().unwrap().push(std::time::Instant::now());
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    while ticks.lock().unwrap().len() < 2 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let started = std::time::Instant::now();
    let sent = w.reconcile(parent(None)).await;
    let took = started.elapsed();
    ticker.abort();
    assert_eq!(sent[0].body["data"]["size"], "3", "the busy template rendered");
    let ticks = ticks.lock().unwrap();
    let longest = ticks
        .windows(2)
        .filter(|p| p[1] > started)
        .map(|p| p[1] - p[0])
        .max()
        .unwrap_or_default();
    assert!(
        longest * 3 < took,
        "the async thread stalled for {longest:?} of a {took:?} reconcile ({} ticks)",
        ticks.len()
    );
}

/// Backoff counts, pending requests and lookup reads of parents that are gone are
/// dropped, so the maps are bounded by the parents that exist.
#[tokio::test]
async fn the_state_of_a_parent_that_is_gone_is_forgotten() {
    let mut w = World::new();
    let mut refs = Vec::new();
    for i in 0..20 {
        let mut p = parent(None);
        p["metadata"]["name"] = json!(format!("p{i}"));
        w.parents.apply(p.clone());
        let obj: DynamicObject = serde_json::from_value(p).unwrap();
        let me = w.ctx.parent_key(&obj);
        w.ctx.requested(&me);
        error_policy(Arc::new(obj), &ReconcileError::Waiting("x".into()), w.ctx.clone());
        w.ctx.ledger().reads(
            &me,
            vec![crate::object_key::ObjectKey::new(
                &Gvk::parse("v1", "ConfigMap").unwrap(),
                Some("ns"),
                "settings",
            )],
            Vec::new(),
        );
        refs.push(me);
    }
    assert_eq!(
        w.ctx.tracked(),
        Tracked {
            pending: 20,
            failing: 20,
            reading: 20
        },
        "positive control: every map holds each parent"
    );
    for i in 0..20 {
        let mut p = parent(None);
        p["metadata"]["name"] = json!(format!("p{i}"));
        w.parents.delete(p);
    }
    w.ctx.sweep();
    assert_eq!(w.ctx.tracked(), Tracked::default());
    // A request for a parent that is not there is not kept either.
    w.ctx.requested(&refs[0]);
    assert_eq!(w.ctx.tracked(), Tracked::default());
}

/// `orders`' ConfigMap, made by hand: no Stencil label, written by kubectl.
fn hand_made(owners: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "w-cm", "namespace": "ns", "uid": "hand-uid", "resourceVersion": "7",
            "ownerReferences": owners, "managedFields": [{"manager": "kubectl-client-side-apply"}]},
        "data": {"size": "precious"}})
}

fn events(w: &World, reason: &str) -> usize {
    w.seen
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.path.contains("/events") && s.body["reason"] == reason)
        .count()
}

fn adopting(definition: &str) -> String {
    definition.replace("    - name: cm\n", "    - name: cm\n      adopt: IfUnowned\n")
}

#[tokio::test]
async fn a_hand_made_object_is_never_written_and_the_conflict_is_said_once() {
    let mut w = World::existing(DEFINITION, vec![hand_made(json!([]))]);
    let sent = w.reconcile(parent(None)).await;
    let short: Vec<String> = sent.iter().map(Seen::short).collect();
    assert_eq!(
        short,
        [
            "PATCH /api/v1/namespaces/ns/configmaps/w-cm",
            "GET /api/v1/namespaces/ns/configmaps/w-cm",
            "PATCH /apis/example.org/v1/namespaces/ns/widgets/w/status",
        ],
        "a create-only apply, refused because the name is taken; a read; the parent's status"
    );
    assert_eq!(sent[0].body["metadata"]["resourceVersion"], apply::CREATE_ONLY);
    assert_eq!(
        w.stored("w-cm"),
        hand_made(json!([])),
        "the hand-made object is as it was"
    );
    let status = sent[2].body["status"].clone();
    let ready = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap()
        .clone();
    assert_eq!(
        (ready["status"].as_str(), ready["reason"].as_str()),
        (Some("False"), Some("Conflict"))
    );
    let message = ready["message"].as_str().unwrap();
    assert!(
        message.contains("ConfigMap ns/w-cm") && message.contains("kubectl-client-side-apply"),
        "{message}"
    );
    assert_eq!(events(&w, "Conflict"), 1);
    // The same state again: no write, no second event.
    let mut with_status = parent(Some(status));
    with_status["metadata"]["resourceVersion"] = json!("2");
    let again = w.reconcile(with_status).await;
    assert_eq!(
        again.iter().map(Seen::short).collect::<Vec<_>>(),
        [
            "PATCH /api/v1/namespaces/ns/configmaps/w-cm",
            "GET /api/v1/namespaces/ns/configmaps/w-cm"
        ]
    );
    assert_eq!(w.stored("w-cm"), hand_made(json!([])));
    assert_eq!(events(&w, "Conflict"), 0, "the cleared log holds no new Conflict event");
}

#[tokio::test]
async fn an_unowned_object_is_adopted_when_the_child_says_so() {
    let mut w = World::existing(&adopting(DEFINITION), vec![hand_made(json!([]))]);
    let sent = w.reconcile(parent(None)).await;
    let applies: Vec<&Seen> = sent
        .iter()
        .filter(|s| s.method == "PATCH" && s.path.ends_with("/configmaps/w-cm"))
        .collect();
    assert_eq!(
        applies.len(),
        2,
        "a refused create-only apply, then the adoption: {sent:?}"
    );
    let apply = applies[1];
    assert!(
        apply.query.contains("force=true"),
        "adoption takes the fields over: {}",
        apply.query
    );
    assert_eq!(apply.body["metadata"]["labels"][labels::PARENT_UID], "parent-uid");
    assert_eq!(apply.body["metadata"]["ownerReferences"][0]["uid"], "parent-uid");
    assert_eq!(events(&w, "Adopted"), 1);
}

#[tokio::test]
async fn an_object_another_controller_controls_is_not_adopted() {
    let rs =
        json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "rs-uid", "controller": true}]);
    let mut w = World::existing(&adopting(DEFINITION), vec![hand_made(rs.clone())]);
    let sent = w.reconcile(parent(None)).await;
    assert!(
        sent.iter()
            .filter(|s| s.path.ends_with("/configmaps/w-cm") && s.method != "GET")
            .all(|s| s.body["metadata"]["resourceVersion"] == apply::CREATE_ONLY && !s.query.contains("force")),
        "only a create that cannot write it: {sent:?}"
    );
    assert_eq!(w.stored("w-cm"), hand_made(rs));
    let status = &sent.last().unwrap().body["status"];
    assert!(
        status.to_string().contains("controlled by ReplicaSet web-1"),
        "{status}"
    );
}

#[tokio::test]
async fn another_parents_object_in_the_store_stays_with_it_without_a_request() {
    let mut w = World::new();
    let mut theirs = hand_made(
        json!([{"apiVersion": "example.org/v1", "kind": "Widget", "name": "first", "uid": "first-uid", "controller": true}]),
    );
    theirs["metadata"]["labels"] = json!({labels::PARENT_UID: "first-uid", labels::PARENT_NAME: "first",
        labels::PARENT_NAMESPACE: "ns", labels::DEFINITION: "widgets.example.org", labels::CHILD: "cm"});
    w.children.apply(theirs);
    let sent = w.reconcile(parent(None)).await;
    assert_eq!(
        sent.iter().map(Seen::short).collect::<Vec<_>>(),
        ["PATCH /apis/example.org/v1/namespaces/ns/widgets/w/status"]
    );
    assert!(sent[0].body.to_string().contains("parent ns/first"), "{}", sent[0].body);
}

const WAVES: &str = "apiVersion: stencil.dev/v1alpha1
kind: OperatorDefinition
metadata:
  name: widgets.example.org
spec:
  parent:
    apiVersion: example.org/v1
    kind: Widget
  children:
    - name: creds
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: {{ parent.metadata.name }}-creds
    - name: app
      dependsOn: [creds]
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: {{ parent.metadata.name }}-app
";

/// The configmap writes among `sent`, as `METHOD name`.
fn configmap_writes(sent: &[Seen]) -> Vec<String> {
    sent.iter()
        .filter(|s| s.method != "GET" && s.path.contains("/configmaps/"))
        .map(|s| format!("{} {}", s.method, s.path.rsplit('/').next().unwrap()))
        .collect()
}

#[tokio::test]
async fn teardown_goes_in_reverse_depends_on_order() {
    let mut w = World::with(WAVES);
    let first = w.reconcile(parent(None)).await;
    assert_eq!(configmap_writes(&first), ["PATCH w-creds"], "app waits for creds");
    let creds = first
        .iter()
        .find(|s| s.method == "PATCH" && s.path.ends_with("/w-creds"))
        .unwrap()
        .body
        .clone();
    w.children.apply(creds);
    let second = w.reconcile(parent(None)).await;
    assert_eq!(configmap_writes(&second), ["PATCH w-app"]);
    let app = second
        .iter()
        .find(|s| s.method == "PATCH" && s.path.ends_with("/w-app"))
        .unwrap()
        .body
        .clone();
    w.children.apply(app.clone());
    assert!(
        first
            .iter()
            .any(|s| s.body["metadata"]["finalizers"] == json!([labels::FINALIZER])),
        "children that depend on each other need the finalizer, even where the garbage collector could clean up"
    );

    let mut deleted = parent(None);
    deleted["metadata"]["deletionTimestamp"] = json!("2026-12-03T00:00:00Z");
    deleted["metadata"]["finalizers"] = json!([labels::FINALIZER]);
    w.parents.apply(deleted.clone());
    let run = |w: &World| {
        let obj: DynamicObject = serde_json::from_value(deleted.clone()).unwrap();
        let ctx = w.ctx.clone();
        w.seen.lock().unwrap().clear();
        async move { reconcile(Arc::new(obj), ctx).await }
    };
    let waiting = run(&w).await;
    assert_eq!(
        configmap_writes(&w.seen.lock().unwrap()),
        ["DELETE w-app"],
        "the dependent goes first"
    );
    let Err(ReconcileError::Waiting(message)) = waiting else {
        panic!("{waiting:?}")
    };
    assert!(
        message.contains("then creds"),
        "the parent says what comes next: {message}"
    );
    w.children.delete(app);
    let _ = run(&w).await;
    assert_eq!(
        configmap_writes(&w.seen.lock().unwrap()),
        ["DELETE w-creds"],
        "then what it depended on"
    );
}

/// The 422 the API server sends for a change to an immutable ConfigMap's data.
fn immutable_refusal() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Invalid", "code": 422,
        "message": "ConfigMap \"w-cm\" is invalid: data: Forbidden: field is immutable when `immutable` is set",
        "details": {"name": "w-cm", "kind": "ConfigMap", "causes": [{"reason": "FieldValueForbidden",
            "message": "Forbidden: field is immutable when `immutable` is set", "field": "data"}]}})
}

fn resized(size: u64) -> Value {
    let mut p = parent(None);
    p["spec"]["size"] = json!(size);
    p["metadata"]["generation"] = json!(2);
    p
}

#[tokio::test]
async fn an_immutable_change_deletes_nothing_and_the_parent_says_which_field_once() {
    let mut w = World::new();
    w.create_child().await;
    w.refusals
        .lock()
        .unwrap()
        .insert("/api/v1/namespaces/ns/configmaps/w-cm".into(), immutable_refusal());
    let sent = w.reconcile(resized(4)).await;
    assert!(
        !sent.iter().any(|s| s.method == "DELETE"),
        "nothing is deleted: {sent:?}"
    );
    let status = &sent.last().unwrap().body["status"];
    let ready = status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (ready["status"].as_str(), ready["reason"].as_str()),
        (Some("False"), Some("Immutable")),
        "{status}"
    );
    let message = ready["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("ConfigMap ns/w-cm") && message.contains("data: Forbidden") && message.contains("Recreate"),
        "the message names the object, the field and the way out: {message}"
    );
    assert_eq!(events(&w, "Immutable"), 1);
    let again = w.reconcile(resized(4)).await;
    assert!(!again.iter().any(|s| s.method == "DELETE"), "{again:?}");
    assert_eq!(events(&w, "Immutable"), 0, "said once, not on every pass");
}

#[tokio::test]
async fn a_recreate_child_is_deleted_once_and_waited_for_while_it_terminates() {
    let recreate = DEFINITION.replace("    - name: cm\n", "    - name: cm\n      updatePolicy: Recreate\n");
    let mut w = World::with(&recreate);
    let mut child = w.create_child().await;
    let sent = w.reconcile(resized(4)).await;
    assert_eq!(
        configmap_writes(&sent),
        ["DELETE w-cm"],
        "Recreate deletes the old object"
    );
    // Something holds the object (a finalizer): it terminates, and stays.
    child["metadata"]["deletionTimestamp"] = json!("2026-12-04T00:00:00Z");
    child["metadata"]["finalizers"] = json!(["example.org/hold"]);
    w.children.apply(child);
    for _ in 0..3 {
        let sent = w.reconcile(resized(4)).await;
        assert_eq!(
            configmap_writes(&sent),
            Vec::<String>::new(),
            "no DELETE while it terminates"
        );
    }
}

/// A deleted parent whose child the API server has, but the watch has not shown yet
/// (created just before the deletion, or its watch broken).
fn deleted_with_finalizer() -> Value {
    let mut deleted = parent(None);
    deleted["metadata"]["deletionTimestamp"] = json!("2026-12-03T00:00:00Z");
    deleted["metadata"]["finalizers"] = json!([labels::FINALIZER]);
    deleted
}

#[tokio::test]
async fn the_finalizer_stays_while_the_api_server_lists_a_child_the_store_does_not_have() {
    let late = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "w-late", "namespace": "ns", "uid": "late-uid",
            "labels": {labels::PARENT_UID: "parent-uid", labels::CHILD: "cm", labels::DEFINITION: "widgets.example.org"},
            "ownerReferences": [{"apiVersion": "example.org/v1", "kind": "Widget", "name": "w", "uid": "parent-uid", "controller": true}]}});
    let mut w = World::existing(DEFINITION, vec![late]);
    let (result, sent) = w.reconcile_deleted(deleted_with_finalizer()).await;
    assert!(matches!(result, Err(ReconcileError::Waiting(_))), "{result:?}");
    assert_eq!(
        sent,
        [
            "GET /api/v1/configmaps",
            "DELETE /api/v1/namespaces/ns/configmaps/w-late",
            "PATCH /apis/example.org/v1/namespaces/ns/widgets/w/status",
        ],
        "the fresh list finds the child, which is deleted; the finalizer stays"
    );
}

#[tokio::test]
async fn a_child_already_gone_does_not_hold_its_parent() {
    let mut w = World::new();
    w.create_child().await;
    // The child is gone from the API server, but its watch has not said so.
    w.refusals.lock().unwrap().insert(
        "/api/v1/namespaces/ns/configmaps/w-cm".into(),
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404, "message": "not found"}),
    );
    let obj: DynamicObject = serde_json::from_value(deleted_with_finalizer()).unwrap();
    w.parents.apply(deleted_with_finalizer());
    w.seen.lock().unwrap().clear();
    let result = reconcile(Arc::new(obj), w.ctx.clone()).await;
    assert!(result.is_ok(), "{result:?}");
    let finalizers = w.seen.lock().unwrap().iter().any(|s| {
        s.method == "PATCH" && s.path.ends_with("/widgets/w") && s.body["metadata"]["finalizers"] == json!([])
    });
    assert!(
        finalizers,
        "the finalizer is released: a 404 is not something to wait for"
    );
}

#[tokio::test]
async fn a_parent_deleted_with_the_orphan_cascade_keeps_every_child() {
    let mut w = World::new();
    w.create_child().await;
    let mut deleted = deleted_with_finalizer();
    deleted["metadata"]["finalizers"] = json!(["orphan", labels::FINALIZER]);
    w.parents.apply(deleted.clone());
    w.seen.lock().unwrap().clear();
    let obj: DynamicObject = serde_json::from_value(deleted).unwrap();
    let _ = reconcile(Arc::new(obj), w.ctx.clone()).await;
    let seen = w.seen.lock().unwrap().clone();
    assert!(
        !seen.iter().any(|s| s.method == "DELETE"),
        "--cascade=orphan deletes no child: {seen:?}"
    );
    let strip = seen
        .iter()
        .find(|s| s.method == "PATCH" && s.path.ends_with("/configmaps/w-cm"))
        .expect("the child is orphaned");
    assert_eq!(strip.body["metadata"]["labels"][labels::PARENT_UID], Value::Null);
}

#[tokio::test]
async fn a_create_only_creates_and_an_update_writes_only_the_object_judged() {
    let mut w = World::new();
    // An object made and deleted again around the create: the create-only apply is
    // refused, the read finds nothing, and nothing forces it; the next pass creates it.
    w.refusals.lock().unwrap().insert(
        "/api/v1/namespaces/ns/configmaps/w-cm".into(),
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409,
            "message": "Operation cannot be fulfilled on configmaps \"w-cm\": the object has been modified"}),
    );
    let sent = w.reconcile(parent(None)).await;
    let writes: Vec<&Seen> = sent
        .iter()
        .filter(|s| s.method != "GET" && s.path.ends_with("/configmaps/w-cm"))
        .collect();
    assert_eq!(writes.len(), 1, "one create-only apply, never forced: {sent:?}");
    assert!(!writes[0].query.contains("force"), "{}", writes[0].query);
    assert_eq!(
        writes[0].body["metadata"]["resourceVersion"],
        apply::CREATE_ONLY,
        "the apply can only create"
    );
    w.refusals.lock().unwrap().clear();
    let child = w.create_child().await;
    let sent = w.reconcile(resized(4)).await;
    let update = sent
        .iter()
        .find(|s| s.method == "PATCH" && s.path.ends_with("/configmaps/w-cm"))
        .expect("the change is applied");
    assert_eq!(
        update.body["metadata"]["uid"], child["metadata"]["uid"],
        "only the object judged"
    );
    assert_eq!(update.body["metadata"].get("resourceVersion"), None);
}

#[tokio::test]
async fn a_child_finds_its_parent_by_uid_when_the_name_is_too_long_for_a_label() {
    let mut w = World::new();
    let long = "w".repeat(70);
    let mut p = parent(None);
    p["metadata"]["name"] = json!(long);
    w.parents.apply(p);
    let hashed = crate::labels::label_value(&long);
    assert_ne!(hashed, long, "positive control: the label holds another name");
    let child: DynamicObject = serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "ns", "labels": {
            labels::DEFINITION: "widgets.example.org", labels::PARENT_NAME: hashed,
            labels::PARENT_NAMESPACE: "ns", labels::PARENT_UID: "parent-uid"}}}))
    .unwrap();
    let found = triggers::child_parent(&w.ctx, &child.metadata).expect("a parent");
    assert_eq!(found.name, long, "the child's event wakes the parent that exists");
}

#[tokio::test]
async fn one_failed_child_does_not_hold_back_the_later_ones_and_nothing_is_pruned() {
    let many = DEFINITION.replace(
        "    - name: cm\n      template: |\n        apiVersion: v1\n        kind: ConfigMap\n        metadata:\n          name: {{ parent.metadata.name }}-cm\n",
        "    - name: cm\n      collection: true\n      template: |\n        {% for i in range(12) %}\n        ---\n        apiVersion: v1\n        kind: ConfigMap\n        metadata:\n          name: {{ parent.metadata.name }}-cm-{{ i }}\n        {% endfor %}\n",
    );
    let mut w = World::with(&many.replace("        data:\n          size: {{ parent.spec.size | quote }}\n", ""));
    w.refusals.lock().unwrap().insert(
        "/api/v1/namespaces/ns/configmaps/w-cm-0".into(),
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "InternalError", "code": 500, "message": "etcd is slow"}),
    );
    w.parents.apply(parent(None));
    let obj: DynamicObject = serde_json::from_value(parent(None)).unwrap();
    let result = reconcile(Arc::new(obj), w.ctx.clone()).await;
    assert!(result.is_err(), "the failure is retried");
    let applied = w
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.method == "PATCH" && s.path.contains("/configmaps/w-cm-"))
        .count();
    assert_eq!(applied, 12, "every child was applied, in every batch");
}

#[tokio::test]
async fn a_failed_prune_is_said_on_the_status_and_in_an_event() {
    let mut w = World::new();
    let mut old = w.create_child().await;
    old["metadata"]["name"] = json!("w-old");
    old["metadata"]["uid"] = json!("old-uid");
    w.children.apply(old);
    w.refusals.lock().unwrap().insert(
        "/api/v1/namespaces/ns/configmaps/w-old".into(),
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "InternalError", "code": 500, "message": "etcd is slow"}),
    );
    w.parents.apply(parent(None));
    w.seen.lock().unwrap().clear();
    let obj: DynamicObject = serde_json::from_value(parent(None)).unwrap();
    assert!(reconcile(Arc::new(obj), w.ctx.clone()).await.is_err(), "retried");
    let status = w
        .seen
        .lock()
        .unwrap()
        .iter()
        .rev()
        .find(|s| s.path.ends_with("/widgets/w/status"))
        .map(|s| s.body["status"].clone())
        .expect("the status is written");
    assert!(status.to_string().contains("PruneFailed"), "{status}");
    assert_eq!(events(&w, "Error"), 1, "the failed delete is published");
}

#[tokio::test]
async fn one_parents_refusal_stays_on_the_definition_while_another_parent_succeeds() {
    let mut w = World::new();
    w.refusals.lock().unwrap().insert(
        "/api/v1/namespaces/ns/configmaps/w-cm".into(),
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
            "message": "configmaps \"w-cm\" is forbidden", "details": {"kind": "configmaps"}}),
    );
    w.parents.apply(parent(None));
    let refused: DynamicObject = serde_json::from_value(parent(None)).unwrap();
    assert!(reconcile(Arc::new(refused), w.ctx.clone()).await.is_err());
    assert!(
        w.ctx.problem().is_some_and(|p| p.contains("forbidden")),
        "{:?}",
        w.ctx.problem()
    );
    let mut other = parent(None);
    other["metadata"]["name"] = json!("v");
    other["metadata"]["uid"] = json!("other-uid");
    w.parents.apply(other.clone());
    let other: DynamicObject = serde_json::from_value(other).unwrap();
    reconcile(Arc::new(other), w.ctx.clone())
        .await
        .expect("the other parent is served");
    assert!(
        w.ctx.problem().is_some_and(|p| p.contains("w-cm")),
        "another parent's success does not clear the refusal: {:?}",
        w.ctx.problem()
    );
}

/// The writes of one pass are told in one event: a new parent's children cost one event
/// write, and an update says so.
#[tokio::test]
async fn one_event_tells_every_write_of_a_pass() {
    let two = format!(
        "{DEFINITION}    - name: other\n      template: |\n        apiVersion: v1\n        kind: ConfigMap\n        metadata:\n          name: {{{{ parent.metadata.name }}}}-other\n"
    );
    let notes = |w: &World| -> Vec<(String, String)> {
        w.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.path.contains("/events"))
            .map(|s| {
                (
                    s.body["reason"].as_str().unwrap_or_default().to_string(),
                    s.body["note"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    };
    let mut w = World::with(&two);
    let sent = w.reconcile(parent(None)).await;
    let created = notes(&w);
    assert_eq!(created.len(), 1, "{created:?}");
    assert_eq!(created[0].0, "Created");
    assert!(
        created[0].1.contains("ns/w-cm created") && created[0].1.contains("ns/w-other created"),
        "{created:?}"
    );
    for s in sent
        .iter()
        .filter(|s| s.method == "PATCH" && s.path.contains("/configmaps/"))
    {
        let mut child = s.body.clone();
        child["metadata"]["uid"] = json!("child-uid");
        w.children.apply(child);
    }
    w.reconcile(resized(4)).await;
    let updated = notes(&w);
    assert_eq!(updated.len(), 1, "{updated:?}");
    assert_eq!(updated[0].0, "Updated");
    assert!(updated[0].1.contains("ns/w-cm updated"), "{updated:?}");
}

/// A pass woken before the watch event of its own last write (by the parent's status
/// write, say) finds the child as it was before that write: it writes nothing again.
#[tokio::test]
async fn a_pass_ahead_of_the_store_does_not_write_its_own_write_again() {
    let mut w = World::new();
    let mut child = w.create_child().await;
    // The mock answers every write with this uid: the stored child is the same object.
    child["metadata"]["uid"] = json!("answered-uid");
    w.children.apply(child);
    let first = w.reconcile(resized(4)).await;
    assert_eq!(
        configmap_writes(&first),
        ["PATCH w-cm"],
        "positive control: the edit is written"
    );
    let again = w.reconcile(resized(4)).await;
    assert!(
        configmap_writes(&again).is_empty(),
        "the store still shows the child before the write: {again:?}"
    );
    let mut caught_up = first[0].body.clone();
    caught_up["metadata"]["uid"] = json!("answered-uid");
    w.children.apply(caught_up);
    let settled = w.reconcile(resized(4)).await;
    assert!(configmap_writes(&settled).is_empty(), "{settled:?}");
    let changed = w.reconcile(resized(5)).await;
    assert_eq!(
        configmap_writes(&changed),
        ["PATCH w-cm"],
        "a new change is written at once"
    );
}

/// A pass that wrote a child and the status, with nothing left to wait for, expects the
/// watch events of those writes, so they wake no second pass.
#[tokio::test]
async fn a_clean_pass_expects_the_echoes_of_its_own_writes() {
    let mut w = World::new();
    let sent = w.reconcile(parent(None)).await;
    assert_eq!(sent.len(), 2, "positive control: the child and the status: {sent:?}");
    let obj: DynamicObject = serde_json::from_value(parent(None)).unwrap();
    let me = w.ctx.parent_key(&obj);
    let meta = |uid: &str, version: &str| kube::api::ObjectMeta {
        uid: Some(uid.into()),
        resource_version: Some(version.into()),
        ..Default::default()
    };
    // The mock answers a child write with its body, and the status write with the parent
    // at resourceVersion 1; every answer carries the uid `answered-uid`.
    assert!(w.ctx.is_echo(&me, &meta("answered-uid", apply::CREATE_ONLY)));
    assert!(w.ctx.is_echo(&me, &meta("answered-uid", "1")));
    assert!(
        !w.ctx.is_echo(&me, &meta("answered-uid", "2")),
        "a later change of the parent is news"
    );
}
