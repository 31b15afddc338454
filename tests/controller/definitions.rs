//! Definitions that change while Stencil runs: removed, renamed, moved, edited (well or
//! badly), served from OperatorDefinition resources, in conflict over a parent kind, and
//! waiting for a child kind that appears later.

use super::*;

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
