//! The fault suite's cases that can run beside other tests: a Stencil crash after its
//! k-th write (plain children, an adoption with a wave teardown, and a decorator while it
//! decorates, prunes on unmatch and cleans up after deleted parents), a child whose
//! finalizer never clears, the deletion of a namespace holding
//! parents, bad parents, bad definitions and isolation. Each case checks the invariants of
//! `common::assert_invariants`: no orphaned child, no duplicate, no parent stuck on a
//! finalizer, and (where Stencil is idle afterwards) no write storm. `make test` runs the
//! fast cases; `make test-faults` (STENCIL_FAULTS=full) runs more crash points.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{
    CM, Process, TestNamespace, assert_invariants, child, client, condition, count_ready, definition, full_faults,
    spawn_stencil, spawn_stencil_env, unique_group, wait_established, wait_for,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(90);

fn widgets(client: &Client, group: &str, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", "Widget"), "widgets");
    Api::namespaced_with(client.clone(), ns, &ar)
}

fn widget(group: &str, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
        "metadata": {"name": name}, "spec": spec}))
    .unwrap()
}

/// The ConfigMap template, placed in namespace `far` and named `<parent>-far`.
fn far_cm(far: &str) -> String {
    CM.replace("metadata:\n", &format!("metadata:\n  namespace: {far}\n"))
        .replace("-cm", "-far")
}

/// Children: a ConfigMap beside the parent and one in `far`, so every parent carries the
/// finalizer and its deletion needs Stencil's writes.
fn near_and_far(far: &str) -> String {
    format!("{}{}", child("cm", CM), child("far", &far_cm(far)))
}

/// The definitions directory inside a test's scratch directory; logs stay outside it, so
/// writing them does not look like a definition change.
fn defs(dir: &tempfile::TempDir) -> PathBuf {
    let defs = dir.path().join("defs");
    std::fs::create_dir_all(&defs).unwrap();
    defs
}

fn run_args(dir: &Path) -> Vec<String> {
    vec![
        format!("--definitions={}", dir.display()),
        "--no-cluster-definitions".into(),
    ]
}

/// Stencil serving one definition file from a scratch directory that lives as long as
/// this does.
struct Served {
    _dir: tempfile::TempDir,
    stencil: Process,
}

/// Writes `text` as the only definition of `group`'s Widget, starts Stencil on it and
/// waits until the Widget CRD is established.
async fn serve(client: &Client, group: &str, text: String) -> Served {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(defs(&dir).join("widgets.yaml"), text).unwrap();
    let stencil = spawn_stencil(
        &run_args(&defs(&dir)),
        &common::kubeconfig_path(),
        dir.path().join("stencil.log"),
    );
    wait_established(client, &format!("widgets.{group}")).await;
    Served { _dir: dir, stencil }
}

/// Waits for a process to end by itself (an injected abort), or until the work it was
/// given is done (`done`), whichever comes first; then kills it.
async fn until_exit_or<F, Fut>(mut p: Process, what: &str, done: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while p.child.try_wait().ok().flatten().is_none() && !done().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn count_children(client: &Client, namespaces: &[&str]) -> usize {
    let mut n = 0;
    for ns in namespaces {
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        let lp = ListParams::default().labels("app.kubernetes.io/managed-by=stencil");
        n += cms.list(&lp).await.map(|l| l.items.len()).unwrap_or(usize::MAX / 4);
    }
    n
}

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

/// Panics when a parent's far child (the dependent) exists while its near child (what
/// it depends on) is gone: teardown must go in reverse dependsOn order.
async fn assert_wave_order(client: &Client, ns: &str, far: &str, parents: usize) {
    let near: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let far: Api<ConfigMap> = Api::namespaced(client.clone(), far);
    for i in 0..parents {
        let (Ok(n), Ok(f)) = (
            near.get_opt(&format!("w{i}-cm")).await,
            far.get_opt(&format!("w{i}-far")).await,
        ) else {
            continue;
        };
        assert!(
            !(n.is_none() && f.is_some()),
            "w{i}-cm is gone while w{i}-far, which depends on it, still exists"
        );
    }
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
    let crash_points: &[u64] = if full_faults() {
        &[1, 2, 3, 4, 6, 9, 13, 20]
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

#[tokio::test]
async fn a_parent_that_breaks_its_schema_or_its_template_affects_no_other() {
    let client = client().await;
    let group = unique_group();
    let ns = TestNamespace::new(&client, "badparent").await;
    let strict = definition(&group, &child("cm", CM), "").replace(
        stencil_core::fixtures::OPEN_SPEC,
        "spec: {type: object, properties: {size: {type: integer, minimum: 0}}}",
    );
    let _stencil = serve(&client, &group, strict).await;
    let api = widgets(&client, &group, &ns.name);
    common::create_when_served(&api, &widget(&group, "good", json!({"size": 1}))).await;

    let rejected = api
        .create(&Default::default(), &widget(&group, "bad", json!({"size": "big"})))
        .await;
    match rejected {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 422, "{s:?}");
            assert!(s.message.contains("spec.size"), "{}", s.message);
        }
        other => panic!("a parent violating its schema was accepted: {other:?}"),
    }
    // The template's `required` fails for a parent without spec.size.
    api.create(&Default::default(), &widget(&group, "empty", json!({})))
        .await
        .unwrap();
    let stalled = wait_for("the empty parent to be Stalled", TIMEOUT, || async {
        let p = api.get("empty").await.ok()?;
        condition(&p.data, "Stalled").filter(|c| c["status"] == "True")
    })
    .await;
    assert!(
        stalled["message"].as_str().unwrap().contains("spec.size is required"),
        "{stalled}"
    );
    wait_for("the good parent Ready regardless", TIMEOUT, || async {
        let p = api.get("good").await.ok()?;
        condition(&p.data, "Ready").filter(|c| c["status"] == "True")
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    assert!(matches!(cms.get_opt("empty-cm").await, Ok(None)));
    assert_invariants(&client, &api, &[ns.name.as_str()]).await;
}

#[tokio::test]
async fn a_child_outside_the_parent_namespace_is_refused_and_nothing_is_written_there() {
    let client = client().await;
    let group = unique_group();
    let ns = TestNamespace::new(&client, "iso").await;
    let other = TestNamespace::new(&client, "iso-other").await;
    let _stencil = serve(
        &client,
        &group,
        definition(&group, &child("far", &far_cm(&other.name)), ""),
    )
    .await;
    let api = widgets(&client, &group, &ns.name);
    common::create_when_served(&api, &widget(&group, "i", json!({"size": 1}))).await;
    let stalled = wait_for("the parent to be Stalled", TIMEOUT, || async {
        let p = api.get("i").await.ok()?;
        condition(&p.data, "Stalled").filter(|c| c["status"] == "True")
    })
    .await;
    assert!(
        stalled["message"].as_str().unwrap().contains("spec.allowedNamespaces"),
        "{stalled}"
    );
    let far: Api<ConfigMap> = Api::namespaced(client.clone(), &other.name);
    assert!(matches!(far.get_opt("i-far").await, Ok(None)));
}

/// One good definition beside every kind of bad one: the good one serves, each bad one is
/// reported with its file and line, and `stencil validate` exits non-zero naming them all.
#[tokio::test]
async fn bad_definitions_are_reported_with_their_location_and_the_good_one_serves() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "baddefs").await;
    let dir = tempfile::tempdir().unwrap();
    let good = unique_group();
    std::fs::write(defs(&dir).join("good.yaml"), definition(&good, &child("cm", CM), "")).unwrap();
    let bad = |name: &str, text: String| std::fs::write(defs(&dir).join(name), text).unwrap();
    let base = |children: &str, extra: &str| definition(&unique_group(), children, extra);
    bad(
        "malformed.yaml",
        base(&child("cm", CM), "").replace("  parent:\n", "  parent: [\n"),
    );
    bad("unknown-field.yaml", base(&child("cm", CM), "  colour: blue\n"));
    bad("syntax.yaml", base(&child("cm", &CM.replace("}}-cm", "-cm")), ""));
    let runaway_group = unique_group();
    let spin = "{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}";
    bad(
        "runaway.yaml",
        definition(&runaway_group, &child("cm", &format!("{CM}\n  loop: \"{spin}\"")), ""),
    );
    bad(
        "jsonpath.yaml",
        base(&format!("{}      readyWhen: '$.status[?@.x =='\n", child("cm", CM)), ""),
    );
    bad(
        "cycle.yaml",
        base(
            &format!(
                "{}      dependsOn: [b]\n{}      dependsOn: [a]\n",
                child("a", CM),
                child("b", &CM.replace("-cm", "-b"))
            ),
            "",
        ),
    );
    let unknown_kind = "apiVersion: nowhere.stencil.dev/v1\nkind: Gizmo\nmetadata:\n  name: {{ parent.metadata.name }}";
    bad("unknown-kind.yaml", base(&child("gizmo", unknown_kind), ""));
    // A second definition of the good parent kind, under another name.
    bad(
        "second.yaml",
        definition(&good, &child("cm", CM), "").replace(
            &format!("name: widgets.{good}"),
            &format!("name: second.widgets.{good}"),
        ),
    );

    let validate = std::process::Command::new(env!("CARGO_BIN_EXE_stencil"))
        .arg("validate")
        .arg(defs(&dir))
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&validate.stderr).to_string() + &String::from_utf8_lossy(&validate.stdout);
    assert!(!validate.status.success(), "validate passed bad definitions:\n{report}");
    for file in [
        "malformed.yaml:",
        "unknown-field.yaml:",
        "syntax.yaml:",
        "jsonpath.yaml:",
        "cycle.yaml:",
    ] {
        assert!(report.contains(file), "validate does not name {file}:\n{report}");
    }

    let stencil = spawn_stencil(
        &run_args(&defs(&dir)),
        &common::kubeconfig_path(),
        dir.path().join("stencil.log"),
    );
    wait_established(&client, &format!("widgets.{good}")).await;
    let api = widgets(&client, &good, &ns.name);
    common::create_when_served(&api, &widget(&good, "ok", json!({"size": 1}))).await;
    wait_for("the good definition to serve", TIMEOUT, || async {
        let p = api.get("ok").await.ok()?;
        condition(&p.data, "Ready").filter(|c| c["status"] == "True")
    })
    .await;
    let logs = wait_for("every bad definition in the log", TIMEOUT, || async {
        let logs = stencil.logs();
        let all = [
            "malformed.yaml:",
            "unknown-field.yaml:",
            "syntax.yaml:",
            "jsonpath.yaml:",
            "cycle.yaml:",
            "Gizmo",
            "second.widgets",
        ]
        .iter()
        .all(|s| logs.contains(s));
        all.then_some(logs)
    })
    .await;
    assert!(logs.contains("cycle"), "{logs}");
    let (code, _) = stencil.get("/healthz").await.expect("the process keeps serving");
    assert_eq!(code, 200);

    // A runaway template compiles; rendering it for a parent runs out of fuel, which the
    // parent reports with the template's position.
    let runaway = widgets(&client, &runaway_group, &ns.name);
    wait_established(&client, &format!("widgets.{runaway_group}")).await;
    common::create_when_served(&runaway, &widget(&runaway_group, "spin", json!({"size": 1}))).await;
    let stalled = wait_for("the runaway parent to be Stalled", TIMEOUT, || async {
        let p = runaway.get("spin").await.ok()?;
        condition(&p.data, "Stalled").filter(|c| c["status"] == "True")
    })
    .await;
    let message = stalled["message"].as_str().unwrap();
    assert!(
        message.contains("fuel") && message.contains("runaway.yaml:"),
        "{message}"
    );
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

#[tokio::test]
async fn a_create_racing_a_hand_made_object_of_the_same_name_never_takes_it() {
    let client = client().await;
    let group = unique_group();
    let ns = TestNamespace::new(&client, "race").await;
    let _served = serve(&client, &group, definition(&group, &child("cm", CM), "")).await;
    let api = widgets(&client, &group, &ns.name);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let n = 20;
    // Each parent and a hand-made object of its child's name are created at once, so
    // some hand-made objects land between Stencil's read and its create.
    let races = (0..n).map(|i| {
        let (api, cms, group) = (api.clone(), cms.clone(), group.clone());
        async move {
            let hand: ConfigMap = serde_json::from_value(json!({"metadata": {"name": format!("w{i}-cm"),
                "labels": {"test.stencil.dev/hand": "yes"}}, "data": {"size": "made by hand"}}))
            .unwrap();
            let params = kube::api::PostParams::default();
            let parent = widget(&group, &format!("w{i}"), json!({"size": 1}));
            let (made, _) = tokio::join!(cms.create(&params, &hand), common::create_when_served(&api, &parent));
            made.ok()
        }
    });
    let made: Vec<ConfigMap> = futures::future::join_all(races).await.into_iter().flatten().collect();
    wait_for("every parent to settle: Ready, or in Conflict", TIMEOUT, || async {
        let list = api.list(&ListParams::default()).await.ok()?;
        let settled = list.items.iter().filter(|p| {
            condition(&p.data, "Ready").is_some_and(|c| c["status"] == "True" || c["reason"] == "Conflict")
        });
        (settled.count() == n).then_some(())
    })
    .await;
    let check = |when: &'static str| {
        let (cms, made) = (cms.clone(), made.clone());
        async move {
            for before in &made {
                let name = before.metadata.name.clone().unwrap();
                let now = cms.get(&name).await.unwrap_or_else(|e| panic!("{name} {when}: {e}"));
                assert_eq!(now.metadata.uid, before.metadata.uid, "{name} {when}: the same object");
                assert_eq!(now.data, before.data, "{name} {when}: not written");
                assert!(
                    !now.labels().keys().any(|k| k.starts_with("stencil.dev/")) && now.owner_references().is_empty(),
                    "{name} {when}: Stencil's marks on a hand-made object: {:?}",
                    now.metadata
                );
            }
        }
    };
    check("after the race").await;
    for i in 0..n {
        api.delete(&format!("w{i}"), &DeleteParams::default()).await.unwrap();
    }
    wait_for("every parent to go", TIMEOUT, || async {
        api.list(&ListParams::default())
            .await
            .ok()?
            .items
            .is_empty()
            .then_some(())
    })
    .await;
    check("after the parents went").await;
    assert!(!made.is_empty(), "positive control: the hand-made objects exist");
}
