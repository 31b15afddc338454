//! The writes of one pass over a living parent: what a new parent gets, what a converged
//! one does not, and the bookkeeping a pass keeps and drops.

use super::*;

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

/// The writes of one pass are told in one event: a new parent's children cost one event
/// write, and an update says so.
#[tokio::test]
async fn one_event_tells_every_write_of_a_pass() {
    let other = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ parent.metadata.name }}-other";
    let two = definition() + &stencil_core::fixtures::child("other", other);
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

/// An outage's retries are capped at 5 s, and they do not lengthen the backoff of the
/// first refusal after the API server is back (a kind its new process does not serve
/// yet): that one is retried after 0.5 s, as a first failure is.
#[tokio::test]
async fn the_backoff_after_an_outage_starts_afresh_for_a_refusal() {
    let w = World::new();
    let parent: Arc<DynamicObject> = Arc::new(serde_json::from_value(parent(None)).unwrap());
    let error = |source| ReconcileError::Kube {
        action: crate::reconcile::Operation::WriteStatus,
        object: "Widget ns/w".into(),
        source,
    };
    let unreachable = || error(kube::Error::Service("connection refused".into()));
    let not_found: kube::core::Status =
        serde_json::from_value(json!({"status": "Failure", "code": 404, "reason": "NotFound", "message": "m"}))
            .unwrap();
    let refused = || error(kube::Error::Api(Box::new(not_found.clone())));
    for _ in 0..9 {
        error_policy(parent.clone(), &unreachable(), w.ctx.clone());
    }
    assert_eq!(
        error_policy(parent.clone(), &unreachable(), w.ctx.clone()),
        Action::requeue(Duration::from_secs(5)),
        "an outage is retried every 5 s at most"
    );
    assert_eq!(
        error_policy(parent.clone(), &refused(), w.ctx.clone()),
        Action::requeue(Duration::from_millis(500))
    );
    assert_eq!(
        error_policy(parent.clone(), &refused(), w.ctx.clone()),
        Action::requeue(Duration::from_secs(1)),
        "positive control: refusals in a row back off"
    );
}
