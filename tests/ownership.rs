//! Ownership on the rig: Stencil never takes, changes or deletes an object it did not
//! create; it adopts one nobody controls only when the child says so; two parents never
//! fight over one object; an orphaned child outlives its parent without Stencil's marks;
//! teardown goes in reverse dependsOn order, after a finalize step that a timeout bounds.

mod common;

use std::time::Duration;

use common::{
    Stencil, TestNamespace, child, client, condition, definition, start_stencil, unique_group, wait_established,
    wait_for,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(90);

/// A ConfigMap child named by the parent's `spec.target`, so two parents can render one name.
const TARGET: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ parent.spec.target }}\ndata:\n  owner: {{ parent.metadata.name | quote }}";

struct World {
    client: Client,
    ns: TestNamespace,
    group: String,
    stencil: Stencil,
    _dir: tempfile::TempDir,
}

impl World {
    async fn new(entry: &str) -> World {
        World::with(entry, "").await
    }

    /// A world whose definition has `entry` as its children and `extra` spec fields.
    async fn with(entry: &str, extra: &str) -> World {
        let client = client().await;
        let ns = TestNamespace::new(&client, "own").await;
        let group = unique_group();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("d.yaml"), definition(&group, entry, extra)).unwrap();
        let stencil = start_stencil(&[dir.path().to_path_buf()], false).await;
        wait_established(&client, &format!("widgets.{group}")).await;
        World {
            client,
            ns,
            group,
            stencil,
            _dir: dir,
        }
    }

    fn widgets(&self) -> Api<DynamicObject> {
        common::widgets(&self.client, &self.group, &self.ns.name)
    }

    fn configmaps(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), &self.ns.name)
    }

    async fn create_widget(&self, name: &str, target: &str) {
        self.create_widget_with(name, json!({"target": target})).await;
    }

    async fn create_widget_with(&self, name: &str, spec: Value) {
        let obj: DynamicObject =
            serde_json::from_value(json!({"apiVersion": format!("{}/v1", self.group), "kind": "Widget",
            "metadata": {"name": name}, "spec": spec}))
            .unwrap();
        common::create_when_served(&self.widgets(), &obj).await;
    }

    async fn gone(&self, name: &str) {
        wait_for(&format!("{name} to go"), TIMEOUT, || async {
            matches!(self.widgets().get_opt(name).await, Ok(None)).then_some(())
        })
        .await;
    }

    /// Waits for the parent's `Ready` condition to have `reason`; returns its message.
    async fn ready_reason(&self, name: &str, reason: &str) -> String {
        self.ready_saying(name, reason, "").await
    }

    /// Waits for `Ready` with `reason` and a message containing `text`: a status passes
    /// through several messages of one reason (the end of the finalize step, then the
    /// teardown's), so a test waits for the one it checks.
    async fn ready_saying(&self, name: &str, reason: &str, text: &str) -> String {
        let api = self.widgets();
        wait_for(
            &format!("{name} Ready with reason {reason} saying `{text}`"),
            TIMEOUT,
            || async {
                let c = condition(&api.get(name).await.ok()?.data, "Ready")?;
                let message = c["message"].as_str().unwrap_or_default().to_string();
                (c["reason"] == reason && message.contains(text)).then_some(message)
            },
        )
        .await
    }

    async fn hand_made(&self, name: &str, owners: Value) -> ConfigMap {
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name, "ownerReferences": owners},
            "data": {"owner": "a person"}}))
        .unwrap();
        self.configmaps().create(&PostParams::default(), &cm).await.unwrap()
    }
}

fn entry(extra: &str) -> String {
    child("cm", TARGET).replacen("    - name: cm\n", &format!("    - name: cm\n{extra}"), 1)
}

#[tokio::test]
async fn a_hand_made_object_is_left_untouched_and_outlives_the_parent() {
    let w = World::new(&entry("")).await;
    let before = w.hand_made("orders-config", json!([])).await;
    w.create_widget("orders", "orders-config").await;
    let message = w.ready_reason("orders", "Conflict").await;
    assert!(
        message.contains("ConfigMap") && message.contains("orders-config"),
        "{message}"
    );
    assert!(message.contains("not created by Stencil"), "{message}");
    let events = common::run_tool("kubectl", &["get", "events", "-n", &w.ns.name, "-o", "json"]);
    let conflicts = serde_json::from_str::<Value>(&events).unwrap()["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["reason"] == "Conflict")
        .count();
    assert_eq!(conflicts, 1, "one Warning event for the conflict");
    w.widgets().delete("orders", &DeleteParams::default()).await.unwrap();
    wait_for("the parent to go", TIMEOUT, || async {
        matches!(w.widgets().get_opt("orders").await, Ok(None)).then_some(())
    })
    .await;
    let after = w
        .configmaps()
        .get("orders-config")
        .await
        .expect("the hand-made object is still there");
    assert_eq!(
        after.resource_version(),
        before.resource_version(),
        "not a byte changed"
    );
    assert_eq!(after.data, before.data);
}

#[tokio::test]
async fn an_unowned_object_is_adopted_only_when_the_child_says_so() {
    let w = World::new(&entry("      adopt: IfUnowned\n")).await;
    w.hand_made("legacy", json!([])).await;
    w.create_widget("migrated", "legacy").await;
    w.ready_reason("migrated", "AllChildrenReady").await;
    let cm = w.configmaps().get("legacy").await.unwrap();
    assert_eq!(
        cm.data.as_ref().unwrap()["owner"],
        "migrated",
        "its fields are Stencil's now"
    );
    assert!(cm.labels().contains_key("stencil.dev/parent-uid"));
    assert!(
        cm.owner_references()
            .iter()
            .any(|r| r.controller == Some(true) && r.name == "migrated")
    );
}

#[tokio::test]
async fn an_object_another_controller_controls_is_not_adopted_even_if_unowned_is_allowed() {
    let w = World::new(&entry("      adopt: IfUnowned\n")).await;
    let holder = w.hand_made("holder", json!([])).await;
    let owners = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "holder",
        "uid": holder.metadata.uid, "controller": true}]);
    let before = w.hand_made("controlled", owners).await;
    w.create_widget("taker", "controlled").await;
    let message = w.ready_reason("taker", "Conflict").await;
    assert!(message.contains("controlled by ConfigMap holder"), "{message}");
    let after = w.configmaps().get("controlled").await.unwrap();
    assert_eq!(after.resource_version(), before.resource_version());
}

#[tokio::test]
async fn two_parents_rendering_one_name_do_not_fight_and_the_second_takes_over_when_the_first_lets_go() {
    let w = World::new(&entry("")).await;
    w.create_widget("first", "shared").await;
    w.ready_reason("first", "AllChildrenReady").await;
    w.create_widget("second", "shared").await;
    let message = w.ready_reason("second", "Conflict").await;
    assert!(message.contains("first"), "the conflict names the holder: {message}");
    // Idle: the holder's object is written by nobody, the waiting parent's status once.
    let cm = w.configmaps().get("shared").await.unwrap();
    w.stencil.take_writes();
    let reconciles = w.stencil.reconciles();
    let touch = json!({"metadata": {"annotations": {"touched": "1"}}});
    for name in ["first", "second"] {
        w.widgets()
            .patch(name, &PatchParams::default(), &Patch::Merge(&touch))
            .await
            .unwrap();
    }
    wait_for("both parents reconciled again", TIMEOUT, || async {
        (w.stencil.reconciles() >= reconciles + 2).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        w.stencil.take_writes(),
        Vec::<String>::new(),
        "no writes in the idle window"
    );
    assert_eq!(
        w.configmaps().get("shared").await.unwrap().resource_version(),
        cm.resource_version()
    );
    // The holder goes: the waiting parent takes the object over.
    w.widgets().delete("first", &DeleteParams::default()).await.unwrap();
    w.ready_reason("second", "AllChildrenReady").await;
    let cm = w.configmaps().get("shared").await.unwrap();
    assert_eq!(cm.data.unwrap()["owner"], "second");
}

#[tokio::test]
async fn an_orphaned_child_outlives_its_parent_without_stencils_marks() {
    let w = World::new(&entry("      deletionPolicy: Orphan\n")).await;
    w.create_widget("db", "db-credentials").await;
    w.ready_reason("db", "AllChildrenReady").await;
    w.widgets().delete("db", &DeleteParams::default()).await.unwrap();
    w.gone("db").await;
    let cm = w
        .configmaps()
        .get("db-credentials")
        .await
        .expect("the orphaned child stays");
    assert!(cm.owner_references().is_empty(), "{:?}", cm.owner_references());
    assert!(
        !cm.labels().keys().any(|k| k.starts_with("stencil.dev/")),
        "{:?}",
        cm.labels()
    );
    // A later parent of the same name does not inherit it silently.
    w.create_widget("db", "db-credentials").await;
    w.ready_reason("db", "Conflict").await;
}

/// Children `creds` and `app`, which depends on it, then `extra` entries.
fn waves(extra: &str) -> String {
    let creds = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ parent.metadata.name }}-creds\ndata:\n  password: s3cret";
    let app =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ parent.metadata.name }}-app\ndata:\n  uses: creds";
    format!(
        "{}{}{extra}",
        child("creds", creds),
        child("app", app).replacen("    - name: app\n", "    - name: app\n      dependsOn: [creds]\n", 1)
    )
}

/// Deletes parent `db` of [`waves`] with `params` while its `app` child is held by a
/// finalizer of its own: `creds` stays until `app` is gone, then both go, and the parent.
async fn delete_in_waves(w: &World, params: &DeleteParams) {
    w.create_widget("db", "unused").await;
    w.ready_reason("db", "AllChildrenReady").await;
    let hold = json!({"metadata": {"finalizers": ["test.stencil.dev/hold"]}});
    w.configmaps()
        .patch("db-app", &PatchParams::default(), &Patch::Merge(&hold))
        .await
        .unwrap();
    w.widgets().delete("db", params).await.unwrap();
    let message = w.ready_saying("db", "Deleting", "test.stencil.dev/hold").await;
    assert!(message.contains("db-app"), "{message}");
    assert!(message.contains("then creds"), "{message}");
    assert!(
        w.configmaps().get_opt("db-creds").await.unwrap().is_some(),
        "what the held child depends on is still there"
    );
    let release = json!({"metadata": {"finalizers": null}});
    w.configmaps()
        .patch("db-app", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    wait_for("the parent and its children to go", TIMEOUT, || async {
        let parent = w.widgets().get_opt("db").await.ok()?;
        let creds = w.configmaps().get_opt("db-creds").await.ok()?;
        (parent.is_none() && creds.is_none()).then_some(())
    })
    .await;
}

#[tokio::test]
async fn teardown_waits_for_a_dependent_before_deleting_what_it_depends_on() {
    let w = World::new(&waves("")).await;
    delete_in_waves(&w, &DeleteParams::default()).await;
}

/// A finalize step: a backup Job, suspended while the parent's `spec.hold` is true, that
/// must succeed before the teardown starts.
fn finalize_step(timeout_seconds: u32) -> String {
    let job = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {{ parent.metadata.name }}-backup\nspec:\n  suspend: {{ parent.spec.hold | default(false) | tojson }}\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: backup\n          image: busybox";
    let body: String = job.lines().map(|l| format!("          {l}\n")).collect();
    format!(
        "  finalize:\n    timeoutSeconds: {timeout_seconds}\n    until: $.children.backup.status.succeeded\n    children:\n      - name: backup\n        template: |\n{body}"
    )
}

fn jobs(w: &World) -> Api<k8s_openapi::api::batch::v1::Job> {
    Api::namespaced(w.client.clone(), &w.ns.name)
}

#[tokio::test]
async fn the_finalize_job_runs_before_teardown_and_is_deleted_last() {
    let w = World::with(&entry(""), &finalize_step(600)).await;
    w.create_widget_with("db", json!({"target": "db-config", "hold": true}))
        .await;
    w.ready_reason("db", "AllChildrenReady").await;
    assert!(
        jobs(&w).get_opt("db-backup").await.unwrap().is_none(),
        "a finalize child is rendered only on deletion"
    );
    // Hold the ordinary child, to see the finalize child outlive it.
    let hold = json!({"metadata": {"finalizers": ["test.stencil.dev/hold"]}});
    w.configmaps()
        .patch("db-config", &PatchParams::default(), &Patch::Merge(&hold))
        .await
        .unwrap();
    w.widgets().delete("db", &DeleteParams::default()).await.unwrap();
    let message = w.ready_reason("db", "Finalizing").await;
    assert!(message.contains("finalize.until"), "{message}");
    let job = jobs(&w).get("db-backup").await.expect("the backup Job is created");
    assert_eq!(job.spec.unwrap().suspend, Some(true));
    let cm = w.configmaps().get("db-config").await.unwrap();
    assert!(
        cm.metadata.deletion_timestamp.is_none(),
        "no child is deleted before the finalize step ends"
    );
    let run = json!({"spec": {"hold": false}});
    w.widgets()
        .patch("db", &PatchParams::default(), &Patch::Merge(&run))
        .await
        .unwrap();
    w.ready_saying("db", "Deleting", "then the finalize children").await;
    let parent = w.widgets().get("db").await.unwrap();
    let finalized = condition(&parent.data, "Finalized").expect("the step is recorded");
    assert_eq!(finalized["status"], "True", "{finalized}");
    assert_eq!(finalized["reason"], "Finalized", "{finalized}");
    let job = jobs(&w).get("db-backup").await.expect("the finalize child goes last");
    assert!(job.metadata.deletion_timestamp.is_none());
    assert!(job.status.and_then(|s| s.succeeded).unwrap_or(0) >= 1);
    let release = json!({"metadata": {"finalizers": null}});
    w.configmaps()
        .patch("db-config", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    w.gone("db").await;
    wait_for("the backup Job to go", TIMEOUT, || async {
        jobs(&w).get_opt("db-backup").await.ok()?.is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_finalize_step_that_never_ends_is_cut_off_by_its_timeout() {
    let w = World::with(&entry(""), &finalize_step(3)).await;
    w.create_widget_with("db", json!({"target": "db-config", "hold": true}))
        .await;
    w.ready_reason("db", "AllChildrenReady").await;
    w.widgets().delete("db", &DeleteParams::default()).await.unwrap();
    w.gone("db").await;
    assert!(w.configmaps().get_opt("db-config").await.unwrap().is_none());
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(w.client.clone(), &w.ns.name);
    let timeouts: Vec<_> = wait_for("a FinalizeTimeout event", TIMEOUT, || async {
        let list = events.list(&Default::default()).await.ok()?;
        let found: Vec<_> = list
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("FinalizeTimeout"))
            .collect();
        (!found.is_empty()).then_some(found)
    })
    .await;
    assert_eq!(timeouts.len(), 1, "one event, not one per reconcile");
    assert!(
        timeouts[0].series.is_none() && timeouts[0].count.unwrap_or(1) == 1,
        "emitted once: {:?}",
        timeouts[0]
    );
    assert_eq!(timeouts[0].type_.as_deref(), Some("Warning"));
    let note = timeouts[0].message.clone().unwrap_or_default();
    assert!(note.contains("within 3s") && note.contains("finalize.until"), "{note}");
}

#[tokio::test]
async fn a_foreground_deletion_keeps_orphan_children_and_the_wave_order() {
    let kept = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ parent.metadata.name }}-kept\ndata:\n  keep: me";
    let kept = child("kept", kept).replacen(
        "    - name: kept\n",
        "    - name: kept\n      deletionPolicy: Orphan\n",
        1,
    );
    let w = World::new(&waves(&kept)).await;
    // `kubectl delete --cascade=foreground`: the garbage collector deletes every dependent
    // at once. Stencil's children carry no ownerReference here, so the order is Stencil's.
    delete_in_waves(&w, &DeleteParams::foreground()).await;
    let kept = w
        .configmaps()
        .get("db-kept")
        .await
        .expect("the Orphan child outlives a foreground deletion");
    assert!(
        !kept.labels().keys().any(|k| k.starts_with("stencil.dev/")),
        "{:?}",
        kept.labels()
    );
}

#[tokio::test]
async fn an_orphan_cascade_keeps_the_children_the_garbage_collector_orphans() {
    // A child beside the parent (owned) and one in another namespace (so the parent
    // carries Stencil's finalizer and Stencil does the teardown).
    let far = TestNamespace::new(&client().await, "own-far").await;
    let far_cm = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{{{ parent.metadata.name }}}}-far\n  namespace: {}\ndata:\n  far: x",
        far.name
    );
    let entries = format!("{}{}", entry(""), child("far", &far_cm));
    let w = World::with(&entries, &format!("  allowedNamespaces: [{}]\n", far.name)).await;
    w.create_widget("db", "db-config").await;
    w.ready_reason("db", "AllChildrenReady").await;
    // `kubectl delete --cascade=orphan`.
    w.widgets().delete("db", &DeleteParams::orphan()).await.unwrap();
    w.gone("db").await;
    let near = w
        .configmaps()
        .get("db-config")
        .await
        .expect("the child the user asked to keep");
    assert!(near.owner_references().is_empty(), "{:?}", near.owner_references());
    assert!(
        !near.labels().keys().any(|k| k.starts_with("stencil.dev/")),
        "kept without Stencil's marks: {:?}",
        near.labels()
    );
}

#[tokio::test]
async fn a_parent_whose_crd_has_no_status_subresource_is_still_finalized_by_its_timeout() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "nostatus").await;
    let group = unique_group();
    // A CRD installed by someone else, without a status subresource: no status write of
    // Stencil's can succeed, so the `Finalized` record is never kept.
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("gadgets.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    common::install_crd(&client, &serde_json::from_value(crd).unwrap()).await;
    let definition = format!(
        "apiVersion: stencil.dev/v1alpha1\nkind: OperatorDefinition\nmetadata:\n  name: gadgets.{group}\nspec:\n  parent:\n    apiVersion: {group}/v1\n    kind: Gadget\n  children:\n{}{}",
        entry(""),
        finalize_step(3)
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("d.yaml"), definition).unwrap();
    let _stencil = start_stencil(&[dir.path().to_path_buf()], false).await;
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Gadget"), "gadgets");
    let gadgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &ar);
    let gadget: DynamicObject = serde_json::from_value(json!({"apiVersion": format!("{group}/v1"), "kind": "Gadget",
        "metadata": {"name": "g"}, "spec": {"target": "g-config", "hold": true}}))
    .unwrap();
    common::create_when_served(&gadgets, &gadget).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    wait_for("the child", TIMEOUT, || async { cms.get_opt("g-config").await.ok()? }).await;
    wait_for("the finalizer", TIMEOUT, || async {
        let g = gadgets.get("g").await.ok()?;
        g.finalizers()
            .iter()
            .any(|f| f == "stencil.dev/finalizer")
            .then_some(())
    })
    .await;
    gadgets.delete("g", &DeleteParams::default()).await.unwrap();
    wait_for("the parent to go once its finalize step timed out", TIMEOUT, || async {
        matches!(gadgets.get_opt("g").await, Ok(None)).then_some(())
    })
    .await;
    assert!(
        cms.get_opt("g-config").await.unwrap().is_none(),
        "the child went with it"
    );
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    let _ = crds.delete(&format!("gadgets.{group}"), &DeleteParams::default()).await;
}
