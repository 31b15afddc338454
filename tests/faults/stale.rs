//! A restart that first reads an older state: Stencil starts again while the API server
//! (or its watch cache) lags, so the first list of a kind shows its objects as they were
//! at an older resourceVersion (`STENCIL_FAULT_STALE_LIST`), and the current objects
//! arrive after, as a relist.

use super::*;

/// What the stale list of a case covers.
#[derive(Clone, Copy, Debug)]
enum Stale {
    /// Every kind: a consistent older view.
    Everything,
    /// The parents alone: their view is older than their children's.
    Parents,
}

/// The data `size` of ConfigMap `name`, or `None` when it is absent.
async fn size_of(cms: &Api<ConfigMap>, name: &str) -> Option<String> {
    let cm = cms.get_opt(name).await.ok()??;
    cm.data?.get("size").cloned()
}

async fn restart_on_an_older_view(stale: Stale) {
    let client = client().await;
    let group = unique_group();
    let ns = TestNamespace::new(&client, "stale").await;
    let far = TestNamespace::new(&client, "stale-far").await;
    let dir = tempfile::tempdir().unwrap();
    let extra = format!("  allowedNamespaces: [{}]\n", far.name);
    std::fs::write(
        defs(&dir).join("widgets.yaml"),
        definition(&group, &near_and_far(&far.name), &extra),
    )
    .unwrap();
    let kubeconfig = common::kubeconfig_path();
    let api = widgets(&client, &group, &ns.name);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let spaces = [ns.name.as_str(), far.name.as_str()];

    let first = spawn_stencil(&run_args(&defs(&dir)), &kubeconfig, dir.path().join("first.log"));
    wait_established(&client, &format!("widgets.{group}")).await;
    for i in 0..4 {
        common::create_when_served(&api, &widget(&group, &format!("w{i}"), json!({"size": "1"}))).await;
    }
    wait_for("four parents ready", TIMEOUT, || async {
        (count_ready(&api).await == 4).then_some(())
    })
    .await;
    // The older state the restart reads first.
    let older = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    // After it, while Stencil runs: an edit it carries out and a parent it serves.
    let edit = |size: &str| json!({"spec": {"size": size}});
    api.patch("w1", &PatchParams::default(), &Patch::Merge(&edit("2")))
        .await
        .unwrap();
    common::create_when_served(&api, &widget(&group, "w4", json!({"size": "1"}))).await;
    wait_for("the edit carried out and w4 ready", TIMEOUT, || async {
        let edited = size_of(&cms, "w1-cm").await.as_deref() == Some("2");
        (edited && count_ready(&api).await == 5).then_some(())
    })
    .await;
    drop(first);
    // While no Stencil runs: another edit, a deletion, a new parent, a child deleted by hand.
    api.patch("w0", &PatchParams::default(), &Patch::Merge(&edit("3")))
        .await
        .unwrap();
    api.delete("w2", &DeleteParams::default()).await.unwrap();
    api.create(&Default::default(), &widget(&group, "w5", json!({"size": "1"})))
        .await
        .unwrap();
    cms.delete("w3-cm", &DeleteParams::default()).await.unwrap();

    let kinds = match stale {
        Stale::Everything => format!("*={older}"),
        Stale::Parents => format!("Widget={older}"),
    };
    let w1_before = cms.get("w1-cm").await.unwrap();
    let log = dir.path().join("second.log");
    let second = spawn_stencil_env(
        &run_args(&defs(&dir)),
        &kubeconfig,
        log,
        &[("STENCIL_FAULT_STALE_LIST", kinds)],
    );
    wait_for(
        &format!("convergence after a stale first list ({stale:?})"),
        TIMEOUT,
        || async {
            let w2_gone = api.get_opt("w2").await.is_ok_and(|w| w.is_none());
            let converged = w2_gone
                && size_of(&cms, "w0-cm").await.as_deref() == Some("3")
                && size_of(&cms, "w3-cm").await.is_some()
                && count_ready(&api).await == 5;
            converged.then_some(())
        },
    )
    .await;
    let w1 = cms.get("w1-cm").await.unwrap();
    assert_eq!(
        w1.resource_version(),
        w1_before.resource_version(),
        "w1's child was in line before the restart, and is written by nobody after it \
         (not even to what the older view renders and back): {:?}",
        w1.data
    );
    let lists = second.logged("fault: the first list is stale");
    let expected = match stale {
        Stale::Everything => 2,
        Stale::Parents => 1,
    };
    assert!(
        lists >= expected,
        "the stale list was not served ({lists} of {expected}):\n{}",
        second.tail(40)
    );
    assert_invariants(&client, &api, &spaces).await;
}

#[tokio::test]
async fn a_restart_that_first_lists_an_older_state_converges_to_the_current_one() {
    restart_on_an_older_view(Stale::Everything).await;
}

#[tokio::test]
async fn a_restart_whose_parents_are_listed_older_than_their_children_never_reverts_a_child() {
    restart_on_an_older_view(Stale::Parents).await;
}
