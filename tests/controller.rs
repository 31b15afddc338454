//! `stencil run` against the rig: children follow their parent, drift is reverted,
//! deleted children come back, deleted parents leave nothing behind, a render error
//! deletes nothing, definitions hot-reload from files and from OperatorDefinition
//! resources, kinds that appear later are picked up, and the steady state writes nothing.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::{
    CM, Stencil, TestNamespace, child, client, condition, definition, start_stencil, unique_group, wait_established,
    wait_for,
};
use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(60);

/// A test's world: a namespace, a definitions directory and a running Stencil.
struct World {
    client: Client,
    ns: TestNamespace,
    dir: tempfile::TempDir,
    group: String,
    stencil: Stencil,
}

impl World {
    async fn new(children: &str, extra: &str) -> World {
        let group = unique_group();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("widgets.yaml"), definition(&group, children, extra)).unwrap();
        World::start(group, dir).await
    }

    async fn start(group: String, dir: tempfile::TempDir) -> World {
        let client = client().await;
        let ns = TestNamespace::new(&client, "ctl").await;
        let stencil = start_stencil(&[dir.path().to_path_buf()], false).await;
        wait_established(&client, &format!("widgets.{group}")).await;
        World {
            client,
            ns,
            dir,
            group,
            stencil,
        }
    }

    fn file(&self) -> PathBuf {
        self.dir.path().join("widgets.yaml")
    }

    fn widgets(&self) -> Api<DynamicObject> {
        widgets(&self.client, &self.group, &self.ns.name)
    }

    fn configmaps(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), &self.ns.name)
    }

    async fn create_widget(&self, name: &str, spec: Value) {
        let obj: DynamicObject =
            serde_json::from_value(json!({"apiVersion": format!("{}/v1", self.group), "kind": "Widget",
            "metadata": {"name": name}, "spec": spec}))
            .unwrap();
        common::create_when_served(&self.widgets(), &obj).await;
    }

    /// Waits until ConfigMap `name` exists and `check` holds for its data.
    async fn wait_cm(&self, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> ConfigMap {
        let api = self.configmaps();
        wait_for(&format!("ConfigMap {name}: {what}"), TIMEOUT, || async {
            let cm = api.get_opt(name).await.ok()??;
            let data = serde_json::to_value(cm.data.clone().unwrap_or_default()).unwrap();
            check(&data).then_some(cm)
        })
        .await
    }

    /// Creates parent `name` (its children need Stencil's finalizer) and waits until it
    /// is Ready and carries the finalizer.
    async fn finalized_parent(&self, name: &str) {
        self.create_widget(name, json!({"size": 1})).await;
        self.wait_condition(name, "Ready", "True").await;
        let parent = self.widgets().get(name).await.unwrap();
        assert!(parent.finalizers().iter().any(|f| f == "stencil.dev/finalizer"));
    }

    async fn wait_condition(&self, widget: &str, type_: &str, status: &str) -> Value {
        self.wait_condition_at(widget, type_, status, 1).await
    }

    /// Waits for a condition written for at least `generation`.
    async fn wait_condition_at(&self, widget: &str, type_: &str, status: &str, generation: i64) -> Value {
        let api = self.widgets();
        wait_for(
            &format!("{widget} {type_}={status} at generation {generation}"),
            TIMEOUT,
            || async {
                let w = api.get(widget).await.ok()?;
                condition(&w.data, type_)
                    .filter(|c| c["status"] == status && c["observedGeneration"].as_i64() >= Some(generation))
            },
        )
        .await
    }
}

/// Extra spec that makes parents carry the finalizer.
const ORPHAN: &str = "  finalize:\n    deletionPolicy: Orphan\n";

fn widgets(client: &Client, group: &str, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", "Widget"), "widgets");
    Api::namespaced_with(client.clone(), ns, &ar)
}

fn size_is(v: &'static str) -> impl Fn(&Value) -> bool {
    move |d| d["size"] == v
}

#[tokio::test]
async fn children_follow_their_parent_and_the_parent_reports_ready() {
    let w = World::new(&child("cm", CM), "").await;
    w.create_widget("a", json!({"size": 1})).await;
    let cm = w.wait_cm("a-cm", "size 1", size_is("1")).await;
    let owner = &cm.owner_references()[0];
    assert_eq!((owner.kind.as_str(), owner.controller), ("Widget", Some(true)));
    let ready = w.wait_condition("a", "Ready", "True").await;
    assert_eq!(ready["observedGeneration"], 1);
    let parent = w.widgets().get("a").await.unwrap();
    assert!(
        parent.finalizers().is_empty(),
        "owned children need no finalizer: the garbage collector removes them"
    );

    w.widgets()
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await
        .unwrap();
    w.wait_cm("a-cm", "size 2 after the parent changed", size_is("2")).await;
    let ready = w.wait_condition_at("a", "Ready", "True", 2).await;
    assert_eq!(ready["observedGeneration"], 2);
}

#[tokio::test]
async fn drift_is_reverted_with_a_warning_and_foreign_fields_are_kept() {
    let w = World::new(&child("cm", CM), "").await;
    w.create_widget("d", json!({"size": 1})).await;
    w.wait_cm("d-cm", "size 1", size_is("1")).await;
    let edit = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d-cm"}, "data": {"size": "9", "extra": "mine"}});
    w.configmaps()
        .patch("d-cm", &PatchParams::apply("intruder").force(), &Patch::Apply(&edit))
        .await
        .unwrap();
    let cm = w.wait_cm("d-cm", "size reverted to 1", size_is("1")).await;
    assert_eq!(
        cm.data.unwrap()["extra"],
        "mine",
        "a field Stencil does not own is kept"
    );
    let events: Api<Event> = Api::namespaced(w.client.clone(), &w.ns.name);
    wait_for("a Conflict event naming the other manager", TIMEOUT, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("Conflict") && e.message.as_deref().unwrap_or_default().contains("intruder")
            })
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_child_deleted_by_hand_is_recreated() {
    let w = World::new(&child("cm", CM), "").await;
    w.create_widget("r", json!({"size": 1})).await;
    let first = w.wait_cm("r-cm", "created", size_is("1")).await;
    w.configmaps().delete("r-cm", &DeleteParams::default()).await.unwrap();
    let api = w.configmaps();
    wait_for("r-cm to come back with a new uid", TIMEOUT, || async {
        let cm = api.get_opt("r-cm").await.ok()??;
        (cm.uid() != first.uid()).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_deleted_parent_leaves_no_children_in_any_namespace() {
    let client = client().await;
    let other = TestNamespace::new(&client, "other").await;
    let cross = CM
        .replace("metadata:\n", &format!("metadata:\n  namespace: {}\n", other.name))
        .replace("-cm", "-far");
    let children = format!("{}{}", child("cm", CM), child("far", &cross));
    let w = World::new(&children, &format!("  allowedNamespaces: [{}]\n", other.name)).await;
    w.create_widget("g", json!({"size": 1})).await;
    w.wait_cm("g-cm", "created", size_is("1")).await;
    let far: Api<ConfigMap> = Api::namespaced(client.clone(), &other.name);
    wait_for("the cross-namespace child", TIMEOUT, || async {
        far.get_opt("g-far").await.ok()?
    })
    .await;
    w.widgets().delete("g", &DeleteParams::default()).await.unwrap();
    let (widgets, near) = (w.widgets(), w.configmaps());
    wait_for("the parent and both children to be gone", TIMEOUT, || async {
        let gone = matches!(widgets.get_opt("g").await, Ok(None))
            && matches!(near.get_opt("g-cm").await, Ok(None))
            && matches!(far.get_opt("g-far").await, Ok(None));
        gone.then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_render_error_deletes_nothing_and_says_why() {
    let w = World::new(&child("cm", CM), "").await;
    w.create_widget("e", json!({"size": 1})).await;
    w.wait_cm("e-cm", "created", size_is("1")).await;
    w.widgets()
        .patch(
            "e",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": null}})),
        )
        .await
        .unwrap();
    let stalled = w.wait_condition("e", "Stalled", "True").await;
    assert!(
        stalled["message"].as_str().unwrap().contains("spec.size is required"),
        "{stalled}"
    );
    assert_eq!(w.configmaps().get("e-cm").await.unwrap().data.unwrap()["size"], "1");
}

#[tokio::test]
async fn a_removed_definition_releases_its_parents() {
    // Orphaning needs the finalizer, so this parent carries one.
    let w = World::new(&child("cm", CM), ORPHAN).await;
    w.finalized_parent("f").await;
    let api = w.widgets();
    std::fs::remove_file(w.file()).unwrap();
    wait_for("the finalizer to be released", TIMEOUT, || async {
        let p = api.get("f").await.ok()?;
        (!p.finalizers().iter().any(|f| f == "stencil.dev/finalizer")).then_some(())
    })
    .await;
    assert!(api.get("f").await.is_ok(), "the CRD and the parent stay");
}

#[tokio::test]
async fn a_renamed_definition_takes_its_parents_children_over() {
    let w = World::new(&child("cm", CM), "").await;
    w.create_widget("r", json!({"size": 1})).await;
    w.wait_condition("r", "Ready", "True").await;
    let first = w.wait_cm("r-cm", "created", size_is("1")).await;
    let renamed = definition(&w.group, &child("cm", CM), "").replace(
        &format!("name: widgets.{}", w.group),
        &format!("name: renamed.{}", w.group),
    );
    std::fs::write(w.file(), renamed).unwrap();
    let label = format!("renamed.{}", w.group);
    let cm = wait_for("the child to carry the new definition's label", TIMEOUT, || async {
        let cm = w.configmaps().get_opt("r-cm").await.ok()??;
        (cm.labels().get("stencil.dev/definition") == Some(&label)).then_some(cm)
    })
    .await;
    assert_eq!(cm.uid(), first.uid(), "the same object, relabelled");
    let api = w.widgets();
    wait_for("the parent Ready under the new name", TIMEOUT, || async {
        let p = api.get("r").await.ok()?;
        let ready = condition(&p.data, "Ready")?;
        (ready["status"] == "True").then_some(())
    })
    .await;
    // The new definition owns the child: an edit of the parent reaches it.
    api.patch(
        "r",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": 2}})),
    )
    .await
    .unwrap();
    w.wait_cm("r-cm", "updated by the renamed definition", size_is("2"))
        .await;
}

#[tokio::test]
async fn a_moved_definition_file_keeps_its_parents_finalizers() {
    let w = World::new(&child("cm", CM), ORPHAN).await;
    w.finalized_parent("m").await;
    let api = w.widgets();
    w.stencil.take_writes();
    std::fs::rename(w.file(), w.dir.path().join("moved.yaml")).unwrap();
    // Past the release grace, and the moved definition serves: an edit reaches the child.
    tokio::time::sleep(stencil::runtime::RELEASE_GRACE + Duration::from_secs(2)).await;
    api.patch(
        "m",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": 2}})),
    )
    .await
    .unwrap();
    w.wait_cm("m-cm", "updated after the move", size_is("2")).await;
    let parent_writes: Vec<String> = w
        .stencil
        .take_writes()
        .into_iter()
        .filter(|r| r.starts_with("PATCH") && r.ends_with("/widgets/m"))
        .collect();
    assert!(
        parent_writes.is_empty(),
        "the finalizer was neither released nor added again: {parent_writes:?}"
    );
    assert!(
        api.get("m")
            .await
            .unwrap()
            .finalizers()
            .iter()
            .any(|f| f == "stencil.dev/finalizer")
    );
}

#[tokio::test]
async fn two_definitions_share_a_child_kind() {
    let (a, b) = (unique_group(), unique_group());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.yaml"), definition(&a, &child("cm", CM), "")).unwrap();
    std::fs::write(
        dir.path().join("b.yaml"),
        definition(&b, &child("cm", &CM.replace("-cm", "-other")), ""),
    )
    .unwrap();
    let w = World::start(a.clone(), dir).await;
    wait_established(&w.client, &format!("widgets.{b}")).await;
    w.create_widget("x", json!({"size": 1})).await;
    let other: DynamicObject = serde_json::from_value(json!({"apiVersion": format!("{b}/v1"), "kind": "Widget",
        "metadata": {"name": "y"}, "spec": {"size": 2}}))
    .unwrap();
    let b_api = widgets(&w.client, &b, &w.ns.name);
    common::create_when_served(&b_api, &other).await;
    let x = w.wait_cm("x-cm", "from definition a", size_is("1")).await;
    let y = w.wait_cm("y-other", "from definition b", size_is("2")).await;
    assert_eq!(x.labels()["stencil.dev/definition"], format!("widgets.{a}"));
    assert_eq!(y.labels()["stencil.dev/definition"], format!("widgets.{b}"));
}

#[tokio::test]
async fn definitions_hot_reload_and_an_invalid_edit_keeps_the_last_good_version() {
    let w = World::new(&child("cm", CM), "").await;
    w.create_widget("h", json!({"size": 3})).await;
    w.wait_cm("h-cm", "created", size_is("3")).await;

    // Change: a template edit rolls out to the existing parent; the old field goes away.
    let changed = CM.replace(
        "size: {{",
        "twice: {{ (parent.spec.size * 2) | string | quote }}\n  ignored: {{",
    );
    std::fs::write(w.file(), definition(&w.group, &child("cm", &changed), "")).unwrap();
    w.wait_cm("h-cm", "the new template", |d| {
        d["twice"] == "6" && d.get("size").is_none()
    })
    .await;

    // Add a child, then remove it again: its object is pruned.
    let extra = CM.replace("-cm", "-extra");
    std::fs::write(
        w.file(),
        definition(
            &w.group,
            &format!("{}{}", child("cm", &changed), child("extra", &extra)),
            "",
        ),
    )
    .unwrap();
    w.wait_cm("h-extra", "the added child", size_is("3")).await;
    std::fs::write(w.file(), definition(&w.group, &child("cm", &changed), "")).unwrap();
    let api = w.configmaps();
    wait_for("the removed child to be pruned", TIMEOUT, || async {
        matches!(api.get_opt("h-extra").await, Ok(None)).then_some(())
    })
    .await;

    // An invalid edit: the last good version keeps serving new parents.
    std::fs::write(
        w.file(),
        definition(&w.group, &child("cm", "apiVersion: v1\nkind: ConfigMap\n{{ broken"), ""),
    )
    .unwrap();
    w.create_widget("i", json!({"size": 4})).await;
    w.wait_cm("i-cm", "served by the last good version", |d| d["twice"] == "8")
        .await;
}

#[tokio::test]
async fn a_configmap_volume_update_is_seen() {
    // The kubelet's pattern: files are links into `..data`, itself a link to a timestamped
    // directory, and an update swaps `..data` atomically with a rename.
    let group = unique_group();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let publish = |version: &str, text: &str| {
        let data = root.join(format!("..{version}"));
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("widgets.yaml"), text).unwrap();
        std::os::unix::fs::symlink(format!("..{version}"), root.join("..data_tmp")).unwrap();
        std::fs::rename(root.join("..data_tmp"), root.join("..data")).unwrap();
    };
    publish("2026_12_02_v1", &definition(&group, &child("cm", CM), ""));
    std::os::unix::fs::symlink("..data/widgets.yaml", root.join("widgets.yaml")).unwrap();
    let w = World::start(group.clone(), dir).await;
    w.create_widget("v", json!({"size": 5})).await;
    w.wait_cm("v-cm", "version 1", size_is("5")).await;
    let v2 = CM.replace("\ndata:\n", "\ndata:\n  version: \"2\"\n");
    publish("2026_12_02_v2", &definition(&group, &child("cm", &v2), ""));
    std::fs::remove_dir_all(w.dir.path().join("..2026_12_02_v1")).unwrap();
    w.wait_cm("v-cm", "version 2 after the ..data swap", |d| d["version"] == "2")
        .await;
}

#[tokio::test]
async fn a_child_kind_that_appears_later_is_picked_up() {
    let client = client().await;
    let gadgets = unique_group();
    let gadget = format!(
        "apiVersion: {gadgets}/v1\nkind: Gadget\nmetadata:\n  name: {{{{ parent.metadata.name }}}}-gadget\nspec:\n  size: {{{{ parent.spec.size }}}}"
    );
    let w = World::new(&format!("{}{}", child("cm", CM), child("gadget", &gadget)), "").await;
    w.create_widget("l", json!({"size": 7})).await;
    // Nothing runs while a child kind is missing; installing its CRD starts the definition.
    let crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
        serde_json::from_value(json!({"metadata": {"name": format!("gadgets.{gadgets}")},
            "spec": {"group": gadgets, "scope": "Namespaced", "names": {"plural": "gadgets", "kind": "Gadget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}))
        .unwrap();
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&gadgets, "v1", "Gadget"), "gadgets");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &w.ns.name, &ar);
    let found = wait_for("the Gadget child", Duration::from_secs(90), || async {
        api.get_opt("l-gadget").await.ok()?
    })
    .await;
    assert_eq!(found.data["spec"]["size"], 7);
    w.wait_cm("l-cm", "created too", size_is("7")).await;
}

#[tokio::test]
async fn the_steady_state_makes_no_write_requests() {
    // The quota's quantities come back canonical (`1000m` as `1`, `1024Mi` as `1Gi`).
    let quota = "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: {{ parent.metadata.name }}-quota\nspec:\n  hard: {cpu: 1000m, memory: 1024Mi}";
    let children = format!("{}{}", child("cm", CM), child("quota", quota));
    let w = World::new(&children, "  resyncSeconds: 10\n").await;
    w.create_widget("s", json!({"size": 1})).await;
    w.wait_condition("s", "Ready", "True").await;
    // Let in-flight work (events, the status write) land, then start counting.
    let api = w.widgets();
    wait_for("a quiet second", TIMEOUT, || async {
        let before = w.stencil.take_writes().len();
        tokio::time::sleep(Duration::from_secs(1)).await;
        (before == 0 && w.stencil.take_writes().is_empty()).then_some(())
    })
    .await;
    // A parent change that needs no child change, then a full resync period.
    api.patch(
        "s",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"touched": "yes"}}})),
    )
    .await
    .unwrap();
    let reconciles = w.stencil.reconciles();
    tokio::time::sleep(Duration::from_secs(12)).await;
    // Positive control: the window held reconciles (the annotation and a resync), so
    // the absence of writes means they found nothing to do.
    assert!(
        w.stencil.reconciles() > reconciles,
        "no reconcile ran in the window, so it proves nothing"
    );
    assert_eq!(
        w.stencil.take_writes(),
        Vec::<String>::new(),
        "no writes once converged"
    );
}

#[tokio::test]
async fn operator_definition_resources_are_served_and_report_status() {
    let client = client().await;
    common::install_crd(&client, &stencil::crd::operator_definition_crd()).await;
    let group = unique_group();
    let ns = TestNamespace::new(&client, "cr").await;
    let text = definition(&group, &child("cm", CM), ORPHAN);
    let resource: stencil::definition::OperatorDefinition = stencil::yaml::document(&text).unwrap();
    let defs: Api<stencil::definition::OperatorDefinition> = Api::all(client.clone());
    let name = format!("widgets.{group}");
    defs.patch(&name, &PatchParams::apply("test"), &Patch::Apply(&resource))
        .await
        .unwrap();
    let stencil = start_stencil(&[], true).await;
    wait_established(&client, &name).await;
    let w_api = widgets(&client, &group, &ns.name);
    let obj: DynamicObject = serde_json::from_value(json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
        "metadata": {"name": "c"}, "spec": {"size": 1}}))
    .unwrap();
    common::create_when_served(&w_api, &obj).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    wait_for("the child of a cluster definition", TIMEOUT, || async {
        cms.get_opt("c-cm").await.ok()?
    })
    .await;
    let status = wait_for("the definition's status", TIMEOUT, || async {
        let s = defs.get_status(&name).await.ok()?.status?;
        (s.parent_count == Some(1)).then_some(s)
    })
    .await;
    assert!(
        status.watched_kinds.iter().any(|k| k == "v1/ConfigMap"),
        "{:?}",
        status.watched_kinds
    );
    assert!(
        status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    );

    // An invalid edit is reported and the last good version keeps running.
    let mut bad = resource.clone();
    bad.spec.children[0].template = "apiVersion: v1\nkind: ConfigMap\n{{ broken".into();
    defs.patch(&name, &PatchParams::apply("test"), &Patch::Apply(&bad))
        .await
        .unwrap();
    let status = wait_for("the compile error on the status", TIMEOUT, || async {
        let s = defs.get_status(&name).await.ok()?.status?;
        s.conditions
            .iter()
            .any(|c| c.type_ == "Compiled" && c.status == "False")
            .then_some(s)
    })
    .await;
    assert!(status.last_error.unwrap().contains("children[cm].template"));
    assert!(
        status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    );

    // Deleting the definition releases the parent, which carries the finalizer.
    wait_for("the finalizer", TIMEOUT, || async {
        let p = w_api.get("c").await.ok()?;
        p.finalizers()
            .iter()
            .any(|f| f == "stencil.dev/finalizer")
            .then_some(())
    })
    .await;
    defs.delete(&name, &DeleteParams::default()).await.unwrap();
    wait_for("the parent's finalizer to be released", TIMEOUT, || async {
        let p = w_api.get("c").await.ok()?;
        (!p.finalizers().iter().any(|f| f == "stencil.dev/finalizer")).then_some(())
    })
    .await;
    drop(stencil);
}

#[tokio::test]
async fn update_policies_on_create_and_recreate() {
    let secret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ parent.metadata.name }}-secret\nstringData:\n  password: {{ random_password(16) }}\n  size: {{ parent.spec.size | quote }}";
    let job = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {{ parent.metadata.name }}-job\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: run\n          image: busybox\n          args: [\"size={{ parent.spec.size }}\"]";
    let children = format!(
        "{}      updatePolicy: OnCreate\n{}      updatePolicy: Recreate\n",
        child("secret", secret),
        child("job", job)
    );
    let w = World::new(&children, "").await;
    w.create_widget("p", json!({"size": 1})).await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(w.client.clone(), &w.ns.name);
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(w.client.clone(), &w.ns.name);
    let first_secret = wait_for("the secret", TIMEOUT, || async {
        secrets.get_opt("p-secret").await.ok()?
    })
    .await;
    let first_job = wait_for("the job", TIMEOUT, || async { jobs.get_opt("p-job").await.ok()? }).await;
    w.widgets()
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await
        .unwrap();
    // A Job's pod template is immutable: under Recreate the Job is deleted and created anew.
    let second_job = wait_for("the job to be recreated with size 2", TIMEOUT, || async {
        let j = jobs.get_opt("p-job").await.ok()??;
        let args = j.spec.as_ref()?.template.spec.as_ref()?.containers[0].args.clone()?;
        (j.uid() != first_job.uid() && args == vec!["size=2".to_string()]).then_some(j)
    })
    .await;
    assert_ne!(second_job.uid(), first_job.uid());
    let secret = secrets.get("p-secret").await.unwrap();
    assert_eq!(secret.uid(), first_secret.uid(), "OnCreate never replaces");
    assert_eq!(secret.data, first_secret.data, "OnCreate never updates");
}

/// A claim whose access mode follows the parent: the one field a user edits that the API
/// server refuses to change, on the kind whose deletion loses data.
const CLAIM: &str = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: {{ parent.metadata.name }}-data\nspec:\n  accessModes: [{{ parent.spec.mode }}]\n  resources:\n    requests:\n      storage: 1Gi";

#[tokio::test]
async fn an_immutable_change_to_a_claim_deletes_nothing_and_the_parent_says_so() {
    // Ready once it exists: the rig has no provisioner to bind it.
    let entry = format!("{}      readyWhen: '$.spec.accessModes'\n", child("data", CLAIM));
    let w = World::new(&entry, "").await;
    w.create_widget("p", json!({"mode": "ReadWriteOnce"})).await;
    let claims: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> = Api::namespaced(w.client.clone(), &w.ns.name);
    let first = wait_for("the claim", TIMEOUT, || async { claims.get_opt("p-data").await.ok()? }).await;
    w.wait_condition("p", "Ready", "True").await;
    w.stencil.take_writes();
    w.widgets()
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"mode": "ReadWriteMany"}})),
        )
        .await
        .unwrap();
    let ready = w.wait_condition_at("p", "Ready", "False", 2).await;
    assert_eq!(ready["reason"], "Immutable", "{ready}");
    let message = ready["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("PersistentVolumeClaim") && message.contains("p-data") && message.contains("immutable"),
        "the parent names the object and the field: {message}"
    );
    let claim = claims.get("p-data").await.unwrap();
    assert_eq!(claim.uid(), first.uid(), "the claim is the same object");
    assert!(claim.metadata.deletion_timestamp.is_none(), "and is not being deleted");
    let deletes: Vec<String> = w
        .stencil
        .take_writes()
        .into_iter()
        .filter(|r| r.starts_with("DELETE"))
        .collect();
    assert!(deletes.is_empty(), "no DELETE was sent: {deletes:?}");
    let events: Api<Event> = Api::namespaced(w.client.clone(), &w.ns.name);
    let said = wait_for("one Immutable event", TIMEOUT, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        let n: i32 = list
            .items
            .iter()
            .filter(|e| e.reason.as_deref() == Some("Immutable"))
            .map(|e| e.count.unwrap_or(1).max(1))
            .sum();
        (n > 0).then_some(n)
    })
    .await;
    assert_eq!(said, 1, "the refusal is said once");
}

#[tokio::test]
async fn the_orphan_policy_keeps_children_and_strips_ownership() {
    let w = World::new(&child("cm", CM), ORPHAN).await;
    w.create_widget("o", json!({"size": 1})).await;
    w.wait_cm("o-cm", "created", size_is("1")).await;
    w.widgets().delete("o", &DeleteParams::default()).await.unwrap();
    let api = w.widgets();
    wait_for("the parent to be gone", TIMEOUT, || async {
        matches!(api.get_opt("o").await, Ok(None)).then_some(())
    })
    .await;
    let cm = w.configmaps().get("o-cm").await.expect("the orphaned child stays");
    assert!(cm.owner_references().is_empty(), "{:?}", cm.owner_references());
    assert!(!cm.labels().contains_key("stencil.dev/parent-uid"));
}

#[tokio::test]
async fn a_second_definition_of_a_parent_kind_is_marked_in_conflict() {
    let client = client().await;
    common::install_crd(&client, &stencil::crd::operator_definition_crd()).await;
    let group = unique_group();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("first.yaml"), definition(&group, &child("cm", CM), "")).unwrap();
    let text = definition(&group, &child("cm", CM), "")
        .replace(&format!("name: widgets.{group}"), &format!("name: second.{group}"));
    let second: stencil::definition::OperatorDefinition = stencil::yaml::document(&text).unwrap();
    let defs: Api<stencil::definition::OperatorDefinition> = Api::all(client.clone());
    let name = format!("second.{group}");
    defs.patch(&name, &PatchParams::apply("test"), &Patch::Apply(&second))
        .await
        .unwrap();
    let _stencil = start_stencil(&[dir.path().to_path_buf()], true).await;
    let conflict = wait_for("the Conflict condition", TIMEOUT, || async {
        let s = defs.get_status(&name).await.ok()?.status?;
        s.conditions
            .into_iter()
            .find(|c| c.type_ == "Conflict" && c.status == "True")
    })
    .await;
    assert!(conflict.message.contains("first.yaml"), "{}", conflict.message);
    defs.delete(&name, &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn a_restart_with_everything_in_place_makes_no_writes() {
    let mut w = World::new(&child("cm", CM), "").await;
    w.create_widget("z", json!({"size": 1})).await;
    w.wait_cm("z-cm", "created", size_is("1")).await;
    w.wait_condition("z", "Ready", "True").await;
    // A new process lists children whose list items carry no apiVersion or kind; it must
    // still recognise them and leave everything as it is.
    w.stencil = start_stencil(&[w.dir.path().to_path_buf()], false).await;
    let api = w.widgets();
    let ready_since = w.wait_condition("z", "Ready", "True").await["lastTransitionTime"].clone();
    // The new process's own first reconcile, not the old one's status, is what counts.
    wait_for("the new process's first reconcile", TIMEOUT, || async {
        (w.stencil.reconciles() >= 1).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        w.stencil.take_writes(),
        Vec::<String>::new(),
        "a restart writes nothing"
    );
    let ready = condition(&api.get("z").await.unwrap().data, "Ready").unwrap();
    assert_eq!(
        (ready["status"].clone(), ready["lastTransitionTime"].clone()),
        (json!("True"), ready_since)
    );
}

#[tokio::test]
async fn a_lookup_change_re_renders_the_parents_that_read_it() {
    let lookups = "  lookups:\n    - name: settings\n      apiVersion: v1\n      kind: ConfigMap\n      nameTemplate: '{{ parent.spec.settings }}'\n";
    let reader = CM.replace("size: {{", "tier: {{ lookups.settings.data.tier | quote }}\n  size: {{");
    let w = World::new(&child("cm", &reader), lookups).await;
    w.create_widget("k", json!({"size": 1, "settings": "shared-settings"}))
        .await;
    // Without its lookup the child waits; nothing is an error.
    w.wait_condition("k", "Ready", "False").await;
    let settings = |tier: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared-settings"}, "data": {"tier": tier}});
    let params = PatchParams::apply("test");
    w.configmaps()
        .patch("shared-settings", &params, &Patch::Apply(settings("gold")))
        .await
        .unwrap();
    w.wait_cm("k-cm", "tier gold", |d| d["tier"] == "gold").await;
    w.configmaps()
        .patch("shared-settings", &params, &Patch::Apply(settings("silver")))
        .await
        .unwrap();
    w.wait_cm("k-cm", "tier silver after the lookup changed", |d| {
        d["tier"] == "silver"
    })
    .await;
}

#[tokio::test]
async fn changing_the_definition_updates_its_crd() {
    let w = World::new(&child("cm", CM), "").await;
    let column = "    versions:\n      - name: v1\n        additionalPrinterColumns:\n          - {name: Size, type: integer, jsonPath: .spec.size}\n";
    let text = definition(&w.group, &child("cm", CM), "").replace("    versions:\n      - name: v1\n", column);
    std::fs::write(w.file(), text).unwrap();
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(w.client.clone());
    let name = format!("widgets.{}", w.group);
    wait_for("the new printer column on the CRD", TIMEOUT, || async {
        let crd = crds.get(&name).await.ok()?;
        let columns = crd.spec.versions[0].additional_printer_columns.clone()?;
        columns.iter().any(|c| c.name == "Size").then_some(())
    })
    .await;
}
