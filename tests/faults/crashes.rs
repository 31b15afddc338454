//! A crash after Stencil's k-th write, for every k: plain children, an adoption with a
//! wave teardown, and a decorator while it decorates, prunes on unmatch and cleans up
//! after deleted parents.

use super::*;

/// What a crash case's definition does beyond creating its children.
#[derive(Clone, Copy, PartialEq)]
enum Crashing {
    /// Create and delete plain children.
    Plain,
    /// Adopt a hand-made object per parent (`adopt: IfUnowned`), and tear down in reverse
    /// dependsOn order (the far child depends on the near one, so it must go first).
    AdoptAndWaves,
}

/// A hand-made ConfigMap of parent `w{i}`'s near child name, with no owner.
async fn hand_made(client: &Client, ns: &str, i: usize) {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": format!("w{i}-cm")},
        "data": {"size": "made by hand"}}))
    .unwrap();
    cms.create(&Default::default(), &cm).await.unwrap();
}

/// Crashes Stencil after its k-th write, for several k, while parents are created and
/// while they are deleted; a healthy Stencil must then converge with the invariants held.
async fn crash_after_each_write(case: Crashing) {
    let client = client().await;
    let group = unique_group();
    let far = TestNamespace::new(&client, "crash-far").await;
    let dir = tempfile::tempdir().unwrap();
    let extra = format!("  allowedNamespaces: [{}]\n", far.name);
    let entries = match case {
        Crashing::Plain => near_and_far(&far.name),
        Crashing::AdoptAndWaves => format!(
            "{}{}",
            child("cm", CM).replacen("    - name: cm\n", "    - name: cm\n      adopt: IfUnowned\n", 1),
            child("far", &far_cm(&far.name)).replacen(
                "    - name: far\n",
                "    - name: far\n      dependsOn: [cm]\n",
                1
            )
        ),
    };
    std::fs::write(defs(&dir).join("widgets.yaml"), definition(&group, &entries, &extra)).unwrap();
    let kubeconfig = common::kubeconfig_path();
    let log = dir.path().join("stencil.log");
    // Every point must fall inside both phases: a plain deletion of the four parents
    // takes about twenty writes, fewer when no re-check rewrites a status on the way.
    let crash_points: &[u64] = if full_faults() {
        &[1, 2, 3, 4, 6, 9, 13, 16]
    } else {
        &[2, 7]
    };
    const PARENTS: usize = 4;
    for &k in crash_points {
        let ns = TestNamespace::new(&client, "crash").await;
        let api = widgets(&client, &group, &ns.name);
        let spaces = [ns.name.as_str(), far.name.as_str()];
        let abort = [("STENCIL_FAULT_ABORT_AFTER_WRITES", k.to_string())];
        let waves = || async {
            if case == Crashing::AdoptAndWaves {
                assert_wave_order(&client, &ns.name, &far.name, PARENTS).await;
            }
        };
        if case == Crashing::AdoptAndWaves {
            for i in 0..PARENTS {
                hand_made(&client, &ns.name, i).await;
            }
        }

        // Crash while parents are being created, then recover.
        let crashing = spawn_stencil_env(&run_args(&defs(&dir)), &kubeconfig, log.clone(), &abort);
        wait_established(&client, &format!("widgets.{group}")).await;
        for i in 0..PARENTS {
            common::create_when_served(&api, &widget(&group, &format!("w{i}"), json!({"size": i}))).await;
        }
        until_exit_or(crashing, &format!("the crash after write {k}"), || async {
            count_ready(&api).await == PARENTS
        })
        .await;
        let healthy = spawn_stencil(&run_args(&defs(&dir)), &kubeconfig, log.clone());
        wait_for(&format!("convergence after a crash at write {k}"), TIMEOUT, || async {
            (count_ready(&api).await == PARENTS && count_children(&client, &spaces).await == 2 * PARENTS).then_some(())
        })
        .await;
        assert_invariants(&client, &api, &spaces).await;
        if case == Crashing::AdoptAndWaves {
            let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
            let adopted = cms.get("w0-cm").await.unwrap();
            assert_eq!(
                adopted.data.unwrap_or_default().get("size").map(String::as_str),
                Some("0"),
                "the hand-made object is adopted and brought in line"
            );
        }
        drop(healthy);

        // Crash while the parents are being deleted, then recover.
        let crashing = spawn_stencil_env(&run_args(&defs(&dir)), &kubeconfig, log.clone(), &abort);
        api.delete_collection(&DeleteParams::default(), &ListParams::default())
            .await
            .unwrap();
        until_exit_or(
            crashing,
            &format!("the crash after write {k} while deleting"),
            || async {
                waves().await;
                api.list(&ListParams::default()).await.is_ok_and(|l| l.items.is_empty())
            },
        )
        .await;
        let _healthy = spawn_stencil(&run_args(&defs(&dir)), &kubeconfig, log.clone());
        wait_for(
            &format!("every parent and child gone after a crash at write {k}"),
            TIMEOUT,
            || async {
                waves().await;
                let parents_gone = api.list(&ListParams::default()).await.is_ok_and(|l| l.items.is_empty());
                (parents_gone && count_children(&client, &spaces).await == 0).then_some(())
            },
        )
        .await;
        assert_invariants(&client, &api, &spaces).await;
    }
    let aborts = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        aborts.matches("aborting before write").count(),
        2 * crash_points.len(),
        "an injected crash did not happen, while creating or while deleting:\n{aborts}"
    );
}

#[tokio::test]
async fn a_crash_after_any_write_converges_with_no_orphans_or_duplicates() {
    crash_after_each_write(Crashing::Plain).await;
}

#[tokio::test]
async fn a_crash_during_adoption_or_a_wave_teardown_converges_and_keeps_the_order() {
    crash_after_each_write(Crashing::AdoptAndWaves).await;
}

/// A decorator of the ConfigMaps in one namespace labelled `key=yes`: a near child beside
/// each (owned, so the garbage collector could remove it) and a far one in `far` (tracked
/// by label alone).
fn crash_decorator(group: &str, key: &str, far: &str) -> String {
    format!(
        "apiVersion: stencil.dev/v1alpha1
kind: OperatorDefinition
metadata:
  name: crash-decorator.{group}
spec:
  parent: {{apiVersion: v1, kind: ConfigMap}}
  decorate:
    selector: {{matchLabels: {{{key}: \"yes\"}}}}
  allowedNamespaces: [{far}]
  children:
    - name: near
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: {{{{ parent.metadata.name }}}}-near
    - name: far
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: {{{{ parent.metadata.namespace }}}}-{{{{ parent.metadata.name }}}}-far
          namespace: {far}
"
    )
}

#[tokio::test]
async fn a_crash_while_decorating_or_undecorating_leaks_nothing_and_duplicates_nothing() {
    let client = client().await;
    let group = unique_group();
    let key = format!("{}/decorate", group);
    let far = TestNamespace::new(&client, "deco-far").await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        defs(&dir).join("decorator.yaml"),
        crash_decorator(&group, &key, &far.name),
    )
    .unwrap();
    let kubeconfig = common::kubeconfig_path();
    let log = dir.path().join("stencil.log");
    let crash_points: &[u64] = if full_faults() { &[1, 2, 3, 5, 8] } else { &[2, 5] };
    const PARENTS: usize = 3;
    for &k in crash_points {
        let ns = TestNamespace::new(&client, "deco-crash").await;
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
        let spaces = [ns.name.as_str(), far.name.as_str()];
        let abort = [("STENCIL_FAULT_ABORT_AFTER_WRITES", k.to_string())];
        let label = |on: bool| json!({"metadata": {"labels": {&key: if on { json!("yes") } else { Value::Null }}}});
        let relabel = |on: bool| {
            let cms = cms.clone();
            let patch = label(on);
            async move {
                for i in 0..PARENTS {
                    cms.patch(&format!("p{i}"), &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .unwrap();
                }
            }
        };
        let all_there = || async { count_children(&client, &spaces).await == 2 * PARENTS };
        let none_left = || async { count_children(&client, &spaces).await == 0 };

        // A crash while decorating: the next Stencil finishes, one child each.
        let crashing = spawn_stencil_env(&run_args(&defs(&dir)), &kubeconfig, log.clone(), &abort);
        for i in 0..PARENTS {
            let parent: ConfigMap =
                serde_json::from_value(json!({"metadata": {"name": format!("p{i}"), "labels": {&key: "yes"}}}))
                    .unwrap();
            cms.create(&Default::default(), &parent).await.unwrap();
        }
        until_exit_or(crashing, &format!("the crash after write {k}"), all_there).await;
        let healthy = spawn_stencil(&run_args(&defs(&dir)), &kubeconfig, log.clone());
        wait_for(&format!("decoration after a crash at write {k}"), TIMEOUT, || async {
            all_there().await.then_some(())
        })
        .await;
        drop(healthy);

        // A crash while pruning the parents that stopped matching.
        let crashing = spawn_stencil_env(&run_args(&defs(&dir)), &kubeconfig, log.clone(), &abort);
        relabel(false).await;
        until_exit_or(crashing, &format!("the crash after write {k} while pruning"), none_left).await;
        let healthy = spawn_stencil(&run_args(&defs(&dir)), &kubeconfig, log.clone());
        wait_for(&format!("the prune after a crash at write {k}"), TIMEOUT, || async {
            none_left().await.then_some(())
        })
        .await;

        // Matching again, then the parents are deleted while no Stencil runs: the far
        // children, which nothing owns, are found by the relist check.
        relabel(true).await;
        wait_for("decoration again", TIMEOUT, || async {
            all_there().await.then_some(())
        })
        .await;
        drop(healthy);
        cms.delete_collection(&DeleteParams::default(), &ListParams::default().labels(&key))
            .await
            .unwrap();
        let _healthy = spawn_stencil(&run_args(&defs(&dir)), &kubeconfig, log.clone());
        wait_for(
            &format!("nothing left of deleted parents (round {k})"),
            TIMEOUT,
            || async { none_left().await.then_some(()) },
        )
        .await;
    }
    let aborts = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        aborts.matches("aborting before write").count(),
        2 * crash_points.len(),
        "an injected crash did not happen, while decorating or while pruning:\n{aborts}"
    );
}
