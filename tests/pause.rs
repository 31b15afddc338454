//! `stencil.dev/paused` against the rig: a paused parent, or every parent of a paused
//! definition, gets no write but its `Paused` condition while its definition changes and
//! its child drifts; its deletion waits and says so; removing the annotation converges it.

mod common;

use std::time::Duration;

use common::{CM, Stencil, TestNamespace, child, client, condition, definition, start_stencil, unique_group, wait_for};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(60);

/// The child template after the definition's edit: one more key.
const EDITED: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ parent.metadata.name }}-cm\ndata:\n  size: {{ parent.spec.size | quote }}\n  edited: \"yes\"";

/// Parents hold Stencil's finalizer, so a deletion has something to wait for.
const ORPHAN: &str = "  finalize:\n    deletionPolicy: Orphan\n";

struct World {
    _ns: TestNamespace,
    group: String,
    dir: tempfile::TempDir,
    stencil: Stencil,
    widgets: Api<DynamicObject>,
    configmaps: Api<ConfigMap>,
}

impl World {
    async fn new() -> World {
        let client = client().await;
        let group = unique_group();
        let dir = tempfile::tempdir().unwrap();
        let ns = TestNamespace::new(&client, "pause").await;
        let world = World {
            widgets: {
                let gvk = GroupVersionKind::gvk(&group, "v1", "Widget");
                Api::namespaced_with(
                    client.clone(),
                    &ns.name,
                    &ApiResource::from_gvk_with_plural(&gvk, "widgets"),
                )
            },
            configmaps: Api::namespaced(client.clone(), &ns.name),
            stencil: start_stencil(&[dir.path().to_path_buf()], false).await,
            _ns: ns,
            group,
            dir,
        };
        world.write_definition(CM, false);
        common::wait_established(&client, &format!("widgets.{}", world.group)).await;
        world
    }

    fn write_definition(&self, template: &str, paused: bool) {
        let mut text = definition(&self.group, &child("cm", template), ORPHAN);
        if paused {
            let name = format!("  name: widgets.{}\n", self.group);
            text = text.replacen(
                &name,
                &format!("{name}  annotations: {{stencil.dev/paused: \"true\"}}\n"),
                1,
            );
        }
        std::fs::write(self.dir.path().join("widgets.yaml"), text).unwrap();
    }

    async fn create(&self, name: &str) {
        let obj: DynamicObject = serde_json::from_value(json!({"apiVersion": format!("{}/v1", self.group),
            "kind": "Widget", "metadata": {"name": name}, "spec": {"size": 1}}))
        .unwrap();
        common::create_when_served(&self.widgets, &obj).await;
        self.wait_condition(name, "Ready", |c| c["status"] == "True").await;
    }

    async fn patch(&self, name: &str, body: Value) {
        self.widgets
            .patch(name, &PatchParams::default(), &Patch::Merge(&body))
            .await
            .unwrap();
    }

    async fn wait_condition(&self, name: &str, type_: &str, check: impl Fn(&Value) -> bool) -> Value {
        wait_for(&format!("{name}: condition {type_}"), TIMEOUT, || async {
            let w = self.widgets.get(name).await.ok()?;
            condition(&w.data, type_).filter(|c| check(c))
        })
        .await
    }

    async fn cm(&self, name: &str) -> Value {
        let cm = self.configmaps.get(&format!("{name}-cm")).await.unwrap();
        serde_json::to_value(cm.data.unwrap_or_default()).unwrap()
    }

    async fn wait_cm(&self, name: &str, what: &str, check: impl Fn(&Value) -> bool) {
        wait_for(&format!("{name}-cm: {what}"), TIMEOUT, || async {
            let cm = self.configmaps.get_opt(&format!("{name}-cm")).await.ok()??;
            check(&serde_json::to_value(cm.data.unwrap_or_default()).unwrap()).then_some(())
        })
        .await;
    }

    /// Drifts `name`'s child and waits until Stencil has reconciled after it.
    async fn drift(&self, name: &str) {
        let reconciled = self.stencil.reconciles();
        let drift = json!({"data": {"size": "99"}});
        self.configmaps
            .patch(&format!("{name}-cm"), &PatchParams::default(), &Patch::Merge(&drift))
            .await
            .unwrap();
        wait_for("a reconcile after the drift", TIMEOUT, || async {
            (self.stencil.reconciles() > reconciled).then_some(())
        })
        .await;
    }

    /// The writes recorded for parent `name` or its child since the last call.
    fn writes_for(&self, name: &str) -> Vec<String> {
        let (parent, cm) = (format!("/widgets/{name}"), format!("/configmaps/{name}-cm"));
        self.stencil
            .take_writes()
            .into_iter()
            .filter(|w| w.contains(&parent) || w.contains(&cm))
            .collect()
    }
}

fn paused(on: &'static str) -> impl Fn(&Value) -> bool {
    move |c| c["status"] == "True" && c["message"].as_str().is_some_and(|m| m.contains(on))
}

#[tokio::test]
async fn a_paused_parent_gets_no_write_until_the_annotation_goes() {
    let w = World::new().await;
    w.create("p").await;
    w.create("q").await;
    w.patch(
        "p",
        json!({"metadata": {"annotations": {"stencil.dev/paused": "true"}}}),
    )
    .await;
    let held = w.wait_condition("p", "Paused", paused("on this parent")).await;
    assert_eq!(held["reason"], "Paused");
    w.stencil.take_writes();

    // The definition changes: the other parent takes it, the paused one does not.
    w.write_definition(EDITED, false);
    w.wait_cm("q", "the edited template", |d| d["edited"] == "yes").await;
    w.drift("p").await;
    assert_eq!(w.writes_for("p"), Vec::<String>::new(), "writes for the paused parent");
    assert_eq!(w.cm("p").await, json!({"size": "99"}), "the drift stays while paused");
    let p = w.widgets.get("p").await.unwrap();
    assert_eq!(
        condition(&p.data, "Ready").unwrap()["status"],
        "True",
        "the status is kept as it was, with Paused beside it"
    );

    // Unpaused, it converges and the condition goes.
    w.patch("p", json!({"metadata": {"annotations": {"stencil.dev/paused": null}}}))
        .await;
    w.wait_cm("p", "converged once unpaused", |d| {
        d["size"] == "1" && d["edited"] == "yes"
    })
    .await;
    wait_for("Paused to go", TIMEOUT, || async {
        let p = w.widgets.get("p").await.ok()?;
        condition(&p.data, "Paused").is_none().then_some(())
    })
    .await;

    // A paused parent's deletion waits, says so, and goes on once unpaused.
    w.patch(
        "q",
        json!({"metadata": {"annotations": {"stencil.dev/paused": "true"}}}),
    )
    .await;
    w.wait_condition("q", "Paused", paused("on this parent")).await;
    w.widgets.delete("q", &DeleteParams::default()).await.unwrap();
    w.wait_condition("q", "Paused", paused("the deletion waits")).await;
    assert!(w.widgets.get_opt("q").await.unwrap().is_some(), "the deletion waits");
    w.patch("q", json!({"metadata": {"annotations": {"stencil.dev/paused": null}}}))
        .await;
    wait_for("q to go once unpaused", TIMEOUT, || async {
        w.widgets.get_opt("q").await.ok()?.is_none().then_some(())
    })
    .await;
    assert_eq!(w.cm("q").await["size"], "1", "the orphaned child stays");
}

#[tokio::test]
async fn a_paused_definition_holds_every_parent() {
    let w = World::new().await;
    w.create("a").await;
    w.write_definition(CM, true);
    w.wait_condition("a", "Paused", paused("on OperatorDefinition")).await;
    w.stencil.take_writes();
    w.patch("a", json!({"spec": {"size": 2}})).await;
    w.drift("a").await;
    assert_eq!(
        w.writes_for("a"),
        Vec::<String>::new(),
        "writes for a parent of a paused definition"
    );
    assert_eq!(w.cm("a").await["size"], "99");
    w.write_definition(CM, false);
    w.wait_cm("a", "converged once the definition is unpaused", |d| d["size"] == "2")
        .await;
}

#[tokio::test]
async fn removing_the_definition_leaves_paused_parents_their_finalizers() {
    let w = World::new().await;
    for name in ["kept", "held", "gone"] {
        w.create(name).await;
    }
    for name in ["held", "gone"] {
        w.patch(
            name,
            json!({"metadata": {"annotations": {"stencil.dev/paused": "true"}}}),
        )
        .await;
        w.wait_condition(name, "Paused", paused("on this parent")).await;
    }
    w.widgets.delete("gone", &DeleteParams::default()).await.unwrap();
    w.wait_condition("gone", "Paused", paused("the deletion waits")).await;
    w.stencil.take_writes();

    std::fs::remove_file(w.dir.path().join("widgets.yaml")).unwrap();
    let finalized = |p: &DynamicObject| {
        p.metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == "stencil.dev/finalizer")
    };
    wait_for(
        "the unpaused parent to be released",
        Duration::from_secs(120),
        || async { (!finalized(&w.widgets.get("kept").await.ok()?)).then_some(()) },
    )
    .await;
    // The release holds the parents' watch until it is done: no kind watched, all released.
    wait_for("the release to finish", TIMEOUT, || async {
        (w.stencil.metrics.watched_kinds.get() == 0).then_some(())
    })
    .await;
    assert!(
        finalized(&w.widgets.get("held").await.unwrap()),
        "the paused parent keeps its finalizer"
    );
    let gone = w.widgets.get("gone").await.unwrap();
    assert!(finalized(&gone), "the paused parent being deleted keeps its finalizer");
    let writes = w.stencil.take_writes();
    let paused_writes: Vec<_> = writes
        .iter()
        .filter(|x| x.contains("/widgets/held") || x.contains("/widgets/gone") || x.contains("configmaps/"))
        .collect();
    assert_eq!(
        paused_writes,
        Vec::<&String>::new(),
        "writes for paused parents or children"
    );
}
