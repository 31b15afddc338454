//! Teardowns that meet something: a child whose finalizer never clears, the parents'
//! namespace deleted under them, and their definition coming back mid-teardown.

use super::*;

#[tokio::test]
async fn a_child_whose_finalizer_never_clears_is_named_and_the_parent_does_not_spin() {
    let client = client().await;
    let group = unique_group();
    let ns = TestNamespace::new(&client, "hold").await;
    let far = TestNamespace::new(&client, "hold-far").await;
    let extra = format!("  allowedNamespaces: [{}]\n", far.name);
    let served = serve(&client, &group, definition(&group, &near_and_far(&far.name), &extra)).await;
    let api = widgets(&client, &group, &ns.name);
    common::create_when_served(&api, &widget(&group, "h", json!({"size": 1}))).await;
    let far_cms: Api<ConfigMap> = Api::namespaced(client.clone(), &far.name);
    wait_for("the far child", TIMEOUT, || async {
        far_cms.get_opt("h-far").await.ok()?
    })
    .await;
    let hold = json!({"metadata": {"finalizers": ["test.stencil.dev/hold"]}});
    far_cms
        .patch("h-far", &PatchParams::default(), &Patch::Merge(&hold))
        .await
        .unwrap();
    api.delete("h", &DeleteParams::default()).await.unwrap();
    let message = wait_for("the parent to name the blocking child", TIMEOUT, || async {
        let p = api.get("h").await.ok()?;
        let c = condition(&p.data, "Ready")?;
        let m = c["message"].as_str()?.to_string();
        (c["reason"] == "Deleting" && m.contains("h-far") && m.contains("test.stencil.dev/hold")).then_some(m)
    })
    .await;
    assert!(message.contains(&far.name), "{message}");

    // Waiting is not spinning: over 10 s, the blocked parent costs a handful of requests.
    let before = served.stencil.requests(&["PATCH", "DELETE"]).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let after = served.stencil.requests(&["PATCH", "DELETE"]).await;
    assert!(after - before <= 3.0, "{} writes in 10 s while waiting", after - before);

    let release = json!({"metadata": {"finalizers": null}});
    far_cms
        .patch("h-far", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    wait_for("the parent to go once the child is released", TIMEOUT, || async {
        matches!(api.get_opt("h").await, Ok(None)).then_some(())
    })
    .await;
    assert_invariants(&client, &api, &[ns.name.as_str(), far.name.as_str()]).await;
}

#[tokio::test]
async fn deleting_the_namespace_of_parents_leaves_nothing_behind() {
    let client = client().await;
    let group = unique_group();
    let ns = TestNamespace::new(&client, "nsdel").await;
    let far = TestNamespace::new(&client, "nsdel-far").await;
    let extra = format!("  allowedNamespaces: [{}]\n", far.name);
    let _stencil = serve(&client, &group, definition(&group, &near_and_far(&far.name), &extra)).await;
    let api = widgets(&client, &group, &ns.name);
    for i in 0..3 {
        common::create_when_served(&api, &widget(&group, &format!("n{i}"), json!({"size": i}))).await;
    }
    let spaces = [ns.name.as_str(), far.name.as_str()];
    wait_for("three parents Ready", TIMEOUT, || async {
        (count_ready(&api).await == 3).then_some(())
    })
    .await;
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.delete(&ns.name, &DeleteParams::default()).await.unwrap();
    wait_for("the namespace and the far children to go", TIMEOUT, || async {
        let gone = matches!(nss.get_opt(&ns.name).await, Ok(None));
        (gone && count_children(&client, &[far.name.as_str()]).await == 0).then_some(())
    })
    .await;
    assert_invariants(&client, &api, &spaces).await;
}

/// How a definition goes away and comes back while a parent is mid-teardown.
#[derive(Clone, Copy)]
enum Comeback {
    /// Its file is renamed (a move, a ConfigMap key renamed).
    FileRenamed,
    /// Its OperatorDefinition is deleted and created again (a GitOps replace).
    Recreated,
}

/// A parent held mid-teardown (its far child, which goes first, carries a finalizer of
/// ours) while its definition goes away and comes back: the parent keeps Stencil's
/// finalizer throughout, the near child outlives the far one, and once the hold is gone
/// the teardown finishes with nothing left.
async fn a_definition_that_comes_back_mid_teardown(how: Comeback) {
    let client = client().await;
    let group = unique_group();
    let ns = TestNamespace::new(&client, "back").await;
    let far = TestNamespace::new(&client, "back-far").await;
    let extra = format!("  allowedNamespaces: [{}]\n", far.name);
    let children = near_and_far(&far.name).replace("    - name: far\n", "    - name: far\n      dependsOn: [cm]\n");
    let text = definition(&group, &children, &extra);
    let dir = tempfile::tempdir().unwrap();
    let defs_dir = defs(&dir);
    let name = format!("widgets.{group}");
    let resources: Api<stencil::definition::OperatorDefinition> = Api::all(client.clone());
    let mut args = run_args(&defs_dir);
    match how {
        Comeback::FileRenamed => std::fs::write(defs_dir.join("widgets.yaml"), &text).unwrap(),
        Comeback::Recreated => {
            common::install_crd(&client, &stencil::crd::operator_definition_crd()).await;
            let resource: stencil::definition::OperatorDefinition = stencil::yaml::document(&text).unwrap();
            resources
                .patch(&name, &PatchParams::apply("test"), &Patch::Apply(&resource))
                .await
                .unwrap();
            args.retain(|a| a != "--no-cluster-definitions");
        }
    }
    let _stencil = spawn_stencil(&args, &common::kubeconfig_path(), dir.path().join("stencil.log"));
    wait_established(&client, &name).await;
    let api = widgets(&client, &group, &ns.name);
    common::create_when_served(&api, &widget(&group, "w0", json!({"size": 1}))).await;
    let far_cms: Api<ConfigMap> = Api::namespaced(client.clone(), &far.name);
    wait_for("the far child", TIMEOUT, || async {
        far_cms.get_opt("w0-far").await.ok()?
    })
    .await;
    let hold = json!({"metadata": {"finalizers": ["test.stencil.dev/hold"]}});
    far_cms
        .patch("w0-far", &PatchParams::default(), &Patch::Merge(&hold))
        .await
        .unwrap();
    api.delete("w0", &DeleteParams::default()).await.unwrap();
    wait_for("the far child to be deleted first", TIMEOUT, || async {
        far_cms
            .get("w0-far")
            .await
            .ok()?
            .metadata
            .deletion_timestamp
            .map(|_| ())
    })
    .await;

    match how {
        Comeback::FileRenamed => std::fs::rename(defs_dir.join("widgets.yaml"), defs_dir.join("renamed.yaml")).unwrap(),
        Comeback::Recreated => {
            resources.delete(&name, &DeleteParams::default()).await.unwrap();
            wait_for("the OperatorDefinition to go", TIMEOUT, || async {
                matches!(resources.get_opt(&name).await, Ok(None)).then_some(())
            })
            .await;
            let resource: stencil::definition::OperatorDefinition = stencil::yaml::document(&text).unwrap();
            resources
                .patch(&name, &PatchParams::apply("test"), &Patch::Apply(&resource))
                .await
                .unwrap();
        }
    }
    // Held for longer than the release grace: the parent keeps Stencil's finalizer and
    // the wave order holds the whole time.
    let held_until = tokio::time::Instant::now() + stencil::runtime::RELEASE_GRACE + Duration::from_secs(5);
    while tokio::time::Instant::now() < held_until {
        let parent = api.get("w0").await.expect("the parent is still there");
        assert!(
            parent.finalizers().iter().any(|f| f == "stencil.dev/finalizer"),
            "the parent lost Stencil's finalizer mid-teardown"
        );
        assert_wave_order(&client, &ns.name, &far.name, 1).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let release = json!({"metadata": {"finalizers": null}});
    far_cms
        .patch("w0-far", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    wait_for("the parent to go once the hold is released", TIMEOUT, || async {
        matches!(api.get_opt("w0").await, Ok(None)).then_some(())
    })
    .await;
    assert_invariants(&client, &api, &[ns.name.as_str(), far.name.as_str()]).await;
    assert_eq!(
        count_children(&client, &[&ns.name, &far.name]).await,
        0,
        "nothing leaked"
    );
    if let Comeback::Recreated = how {
        resources.delete(&name, &DeleteParams::default()).await.unwrap();
    }
}

#[tokio::test]
async fn a_definition_file_renamed_mid_teardown_releases_nothing_and_leaks_nothing() {
    a_definition_that_comes_back_mid_teardown(Comeback::FileRenamed).await;
}

#[tokio::test]
async fn a_definition_deleted_and_recreated_mid_teardown_releases_nothing_and_leaks_nothing() {
    a_definition_that_comes_back_mid_teardown(Comeback::Recreated).await;
}
