//! Canary rollouts of a definition edit against the rig, over 50 parents with steps of
//! 20 and 100 percent: the first step moves the deterministic 20 percent (the same set
//! across a restart of Stencil during the pause), then every parent; an edit whose new
//! child never becomes ready fails at the first step and rolls the moved parents back,
//! with zero writes to the others; an edit during a rollout supersedes it; a crash right
//! after an edit's revision is kept still moves only the first step; undo steps back.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{
    Stencil, TestNamespace, child, client, definition, never_ready, start_stencil_options, unique_group, wait_for,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;
use stencil::definition::{OperatorDefinition, RolloutPhase};

const TIMEOUT: Duration = Duration::from_secs(90);
const PARENTS: usize = 50;

/// The child, carrying the definition's version.
fn versioned(version: &str) -> String {
    child(
        "cm",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{{{ parent.metadata.name }}}}-cm\ndata:\n  version: \"{version}\""
        ),
    )
}

struct World {
    home: TestNamespace,
    ns: TestNamespace,
    group: String,
    dir: tempfile::TempDir,
    rollout: String,
    widgets: Api<DynamicObject>,
    configmaps: Api<ConfigMap>,
}

impl World {
    /// 50 Ready parents of a definition with `rollout` (its YAML, indented for the spec)
    /// at version 1, and the Stencil serving them.
    async fn new(rollout: &str) -> (World, Stencil) {
        let client = client().await;
        let group = unique_group();
        let ns = TestNamespace::new(&client, "roll").await;
        let gvk = GroupVersionKind::gvk(&group, "v1", "Widget");
        let ar = ApiResource::from_gvk_with_plural(&gvk, "widgets");
        let world = World {
            home: TestNamespace::new(&client, "home").await,
            widgets: Api::namespaced_with(client.clone(), &ns.name, &ar),
            configmaps: Api::namespaced(client.clone(), &ns.name),
            ns,
            group,
            dir: tempfile::tempdir().unwrap(),
            rollout: rollout.to_string(),
        };
        world.write(&versioned("1"));
        let stencil = world.start().await;
        common::wait_established(&client, &format!("widgets.{}", world.group)).await;
        for i in 0..PARENTS {
            let obj: DynamicObject = serde_json::from_value(json!({"apiVersion": format!("{}/v1", world.group),
                "kind": "Widget", "metadata": {"name": format!("w{i:02}")}, "spec": {}}))
            .unwrap();
            common::create_when_served(&world.widgets, &obj).await;
        }
        world
            .wait_versions("every parent at version 1", |v| v.values().all(|v| v == "1"))
            .await;
        // A parent's status is written just after its child: the edit comes once every
        // status is in, so no write of version 1 is counted against the rollout.
        wait_for("every parent Ready at version 1", TIMEOUT, || async {
            let list = world.widgets.list(&ListParams::default()).await.ok()?;
            let ready = list.items.iter().filter(|p| {
                p.data
                    .pointer("/status/conditions")
                    .and_then(|c| c.as_array())
                    .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
            });
            (ready.count() == PARENTS).then_some(())
        })
        .await;
        (world, stencil)
    }

    fn widgets_namespace(&self) -> String {
        self.ns.name.clone()
    }

    fn write(&self, children: &str) {
        let text = definition(&self.group, children, &self.rollout);
        std::fs::write(self.dir.path().join("widgets.yaml"), text).unwrap();
    }

    async fn start(&self) -> Stencil {
        start_stencil_options(stencil::runtime::Options {
            definitions: vec![self.dir.path().to_path_buf()],
            cluster_definitions: false,
            concurrency: 8,
            home: Some(self.home.name.clone()),
            ..Default::default()
        })
        .await
    }

    /// Each parent's child version, by parent name (absent children left out).
    async fn versions(&self) -> std::collections::BTreeMap<String, String> {
        let list = self.configmaps.list(&ListParams::default()).await.unwrap();
        list.items
            .into_iter()
            .filter_map(|cm| {
                let parent = cm.name_any().strip_suffix("-cm")?.to_string();
                Some((parent, cm.data?.get("version")?.clone()))
            })
            .collect()
    }

    async fn wait_versions(
        &self,
        what: &str,
        check: impl Fn(&std::collections::BTreeMap<String, String>) -> bool,
    ) -> std::collections::BTreeMap<String, String> {
        wait_for(what, TIMEOUT, || async {
            let v = self.versions().await;
            (v.len() == PARENTS && check(&v)).then_some(v)
        })
        .await
    }

    /// The parents the first step of a rollout to the newest revision moves, by name:
    /// the deterministic 20 percent.
    async fn first_step(&self, percent: u8) -> BTreeSet<String> {
        let revision = self.newest_revision().await;
        let parents = self.widgets.list(&ListParams::default()).await.unwrap();
        parents
            .items
            .iter()
            .filter(|p| stencil::rollout::chosen(&revision, &p.uid().unwrap(), percent))
            .map(|p| p.name_any())
            .collect()
    }

    /// The name of the definition's newest revision, once Stencil has kept it.
    async fn newest_revision(&self) -> String {
        let text = std::fs::read_to_string(self.dir.path().join("widgets.yaml")).unwrap();
        let def: OperatorDefinition = stencil::yaml::document(&text).unwrap();
        let name = format!("widgets.{}", self.group);
        stencil::rollout::revision_name(&name, &stencil::rollout::revision_hash(&def.spec))
    }

    /// The rollout as the newest revision keeps it.
    async fn rollout_state(&self) -> Option<stencil::definition::RolloutStatus> {
        let revisions: Api<k8s_openapi::api::apps::v1::ControllerRevision> =
            Api::namespaced(client().await, &self.home.name);
        let newest = revisions.get_opt(&self.newest_revision().await).await.ok()??;
        serde_json::from_str(newest.annotations().get("stencil.dev/rollout")?).ok()
    }

    async fn wait_phase(&self, phase: RolloutPhase) -> stencil::definition::RolloutStatus {
        wait_for(&format!("the rollout {phase:?}"), TIMEOUT, || async {
            self.rollout_state().await.filter(|s| s.phase == phase)
        })
        .await
    }
}

/// Writes recorded for the children of parents not in `moved`.
fn writes_outside(stencil: &Stencil, moved: &BTreeSet<String>) -> Vec<String> {
    stencil
        .take_writes()
        .into_iter()
        .filter(|w| w.contains("/configmaps/") || w.contains("/widgets/"))
        .filter(|w| {
            let path = w.split('?').next().unwrap_or_default();
            let object = path.rsplit('/').find(|s| *s != "status").unwrap_or_default();
            let parent = object
                .strip_suffix("-cm")
                .or(object.strip_suffix("-gate"))
                .unwrap_or(object);
            !moved.contains(parent)
        })
        .collect()
}

const STEPS: &str = "  rollout:\n    strategy: Canary\n    steps:\n      - percent: 20\n        pauseSeconds: 30\n      - percent: 100\n";

#[tokio::test]
async fn an_edit_moves_the_same_first_fifth_across_a_restart_then_every_parent() {
    let (w, stencil) = World::new(STEPS).await;
    // `stencil diff` names the parents the first step of the edit would move.
    let elsewhere = tempfile::tempdir().unwrap();
    let edited = elsewhere.path().join("widgets.yaml");
    std::fs::write(&edited, definition(&w.group, &versioned("2"), &w.rollout)).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stencil"))
        .args([
            "diff",
            "--namespace",
            &w.widgets_namespace(),
            "--output",
            "json",
            "--definition",
        ])
        .arg(&edited)
        .env("KUBECONFIG", common::kubeconfig_path())
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    stencil.take_writes();
    w.write(&versioned("2"));
    let first = w.first_step(20).await;
    assert!((3..=18).contains(&first.len()), "20 % of 50 chose {}", first.len());
    let named: BTreeSet<String> = report["firstStep"]["parents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().rsplit('/').next().unwrap().to_string())
        .collect();
    assert_eq!(named, first, "stencil diff names the first step's parents");
    let moved = w
        .wait_versions("the first step at version 2", |v| {
            v.iter().filter(|(_, v)| *v == "2").count() == first.len()
        })
        .await;
    let on_two: BTreeSet<String> = moved
        .iter()
        .filter(|(_, v)| *v == "2")
        .map(|(p, _)| p.clone())
        .collect();
    assert_eq!(on_two, first, "the first step moves the deterministic share");
    let state = w.wait_phase(RolloutPhase::Progressing).await;
    assert_eq!((state.step, state.percent), (0, 20));
    assert_eq!(
        writes_outside(&stencil, &first),
        Vec::<String>::new(),
        "writes for parents not moved"
    );

    // A restart during the pause keeps the same parents on each revision.
    drop(stencil);
    let stencil = w.start().await;
    wait_for("the restarted Stencil to look at every parent", TIMEOUT, || async {
        (stencil.reconciles() >= PARENTS as u64).then_some(())
    })
    .await;
    let state = w.rollout_state().await.unwrap();
    assert_eq!(
        (state.phase, state.step),
        (RolloutPhase::Progressing, 0),
        "still in the pause"
    );
    assert_eq!(
        w.versions().await,
        moved,
        "the same parents on each revision after the restart"
    );
    w.wait_versions("every parent at version 2", |v| v.values().all(|v| v == "2"))
        .await;
    let done = w.wait_phase(RolloutPhase::Complete).await;
    assert_eq!(done.current_revision, w.newest_revision().await);
    drop(stencil);
}

#[tokio::test]
async fn an_edit_whose_child_never_becomes_ready_rolls_the_first_step_back() {
    let steps = STEPS.replace("pauseSeconds: 30", "pauseSeconds: 0") + "    progressDeadlineSeconds: 8\n";
    let (w, stencil) = World::new(&steps).await;
    stencil.take_writes();
    w.write(&(versioned("2") + &never_ready()));
    let first = w.first_step(20).await;
    w.wait_versions("the first step at version 2", |v| {
        v.iter().filter(|(_, v)| *v == "2").count() == first.len()
    })
    .await;
    let failed = w.wait_phase(RolloutPhase::RolledBack).await;
    let message = failed.message.unwrap_or_default();
    assert!(message.contains("not Ready 8s after the step moved it"), "{message}");
    assert!(
        first.iter().any(|p| message.contains(p.as_str())),
        "names a moved parent: {message}"
    );
    w.wait_versions("the moved parents back at version 1", |v| v.values().all(|v| v == "1"))
        .await;
    wait_for("the never-ready children pruned", TIMEOUT, || async {
        let all = w.configmaps.list(&ListParams::default()).await.ok()?;
        (!all.items.iter().any(|c| c.name_any().ends_with("-gate"))).then_some(())
    })
    .await;
    assert_eq!(
        writes_outside(&stencil, &first),
        Vec::<String>::new(),
        "writes for parents not moved"
    );
}

#[tokio::test]
async fn an_edit_during_a_rollout_supersedes_it() {
    let steps = STEPS.replace("pauseSeconds: 30", "pauseSeconds: 600");
    let (w, _stencil) = World::new(&steps).await;
    w.write(&versioned("2"));
    let on_two = w.first_step(20).await;
    w.wait_versions("the first step at version 2", |v| {
        v.iter().filter(|(_, v)| *v == "2").count() == on_two.len()
    })
    .await;
    w.write(&versioned("3"));
    let on_three = w.first_step(20).await;
    let moved: BTreeSet<String> = on_two.union(&on_three).cloned().collect();
    let versions = w
        .wait_versions("the new first step at version 3", |v| {
            v.iter().filter(|(_, v)| *v == "3").count() == moved.len()
        })
        .await;
    for (parent, version) in &versions {
        let expected = if moved.contains(parent) { "3" } else { "1" };
        assert_eq!(
            version, expected,
            "{parent}: the abandoned revision's parents move with the first step"
        );
    }
    let state = w.wait_phase(RolloutPhase::Progressing).await;
    assert_eq!(state.carried.len(), 1, "{state:?}");
}

/// Runs `stencil rollout <args>` against the rig, off the test's runtime (which also runs
/// the Stencil under test); its exit code and output.
async fn rollout(args: &[&str]) -> (i32, String) {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_stencil"))
            .arg("rollout")
            .args(&args)
            .env("KUBECONFIG", common::kubeconfig_path())
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code().unwrap_or(-1), text)
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn promote_skips_the_pause_and_each_undo_steps_one_revision_back() {
    let steps = STEPS.replace("pauseSeconds: 30", "pauseSeconds: 600");
    let (w, stencil) = World::new(&steps).await;
    let name = format!("widgets.{}", w.group);
    let home = w.home.name.clone();
    let at = |action: &'static str| {
        let (name, home) = (name.clone(), home.clone());
        async move { rollout(&[action, &name, "--stencil-namespace", &home]).await }
    };
    w.write(&versioned("2"));
    let first = w.first_step(20).await;
    w.wait_versions("the first step at version 2", |v| {
        v.iter().filter(|(_, v)| *v == "2").count() == first.len()
    })
    .await;
    w.wait_phase(RolloutPhase::Progressing).await;
    let (code, text) = rollout(&["status", &name, "--stencil-namespace", &home, "--timeout", "1s"]).await;
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(&format!("{} of {PARENTS} parents", first.len())),
        "{text}"
    );
    assert!(text.contains("timed out waiting for the condition"), "{text}");

    let (code, text) = at("promote").await;
    assert_eq!(
        (code, text.trim()),
        (0, format!("definition \"{name}\" promoted").as_str())
    );
    w.wait_versions("every parent at version 2 after promote", |v| {
        v.values().all(|v| v == "2")
    })
    .await;
    let (code, text) = rollout(&["status", &name, "--stencil-namespace", &home, "--timeout", "60s"]).await;
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("successfully rolled out"), "{text}");
    let (code, text) = at("promote").await;
    assert_eq!(code, 1, "nothing to promote: {text}");

    // A third revision, promoted to the end, then undone twice: each undo steps one
    // revision back and stays there.
    w.write(&versioned("3"));
    w.wait_phase(RolloutPhase::Progressing).await;
    let (code, text) = at("promote").await;
    assert_eq!(code, 0, "{text}");
    w.wait_versions("every parent at version 3", |v| v.values().all(|v| v == "3"))
        .await;
    w.wait_phase(RolloutPhase::Complete).await;
    let newest = w.newest_revision().await;
    for back_to in ["2", "1"] {
        let (code, text) = at("undo").await;
        assert_eq!(code, 0, "{text}");
        w.wait_versions(&format!("every parent back at version {back_to} after undo"), |v| {
            v.values().all(|v| v == back_to)
        })
        .await;
        let state = w.rollout_state().await.unwrap();
        assert_eq!(
            state.updated_revision, newest,
            "the state names the revision that keeps it"
        );
        let (code, text) = rollout(&["status", &name, "--stencil-namespace", &home, "--timeout", "60s"]).await;
        assert_eq!(code, 0, "{text}");
        assert!(text.contains("rolled back"), "{text}");
    }
    // Stencil reads the saved state again (every 5 s while nothing moves) and keeps it.
    let state_reads = || {
        let reads = stencil.reads.lock().unwrap();
        reads.iter().filter(|r| r.contains(&newest)).count()
    };
    let seen = state_reads();
    wait_for("two more reads of the saved state", TIMEOUT, || async {
        (state_reads() >= seen + 2).then_some(())
    })
    .await;
    assert!(w.versions().await.values().all(|v| v == "1"), "still at version 1");
    let (code, text) = at("undo").await;
    assert_eq!(code, 1, "nothing before version 1: {text}");
    assert!(text.contains("no earlier revision"), "{text}");
}

/// A Stencil killed right after it wrote an edit's revision, before any other write: the
/// next one serves the revision's canary, not every parent at once.
#[tokio::test]
#[cfg_attr(not(feature = "fault-injection"), ignore = "needs the fault-injection build")]
async fn a_crash_right_after_the_revision_is_kept_still_moves_only_the_first_step() {
    let steps = STEPS.replace("pauseSeconds: 30", "pauseSeconds: 600");
    let (w, stencil) = World::new(&steps).await;
    drop(stencil);
    w.write(&versioned("2"));
    let logs = tempfile::tempdir().unwrap();
    let crashing = common::spawn_stencil_env(
        &[
            format!("--definitions={}", w.dir.path().display()),
            "--no-cluster-definitions".into(),
        ],
        &common::kubeconfig_path(),
        logs.path().join("crashing.log"),
        &[
            ("STENCIL_FAULT_ABORT_AFTER_WRITES", "1".into()),
            ("POD_NAMESPACE", w.home.name.clone()),
        ],
    );
    let revision = w.newest_revision().await;
    let revisions: Api<k8s_openapi::api::apps::v1::ControllerRevision> = Api::namespaced(client().await, &w.home.name);
    wait_for(
        "the crashing Stencil to abort before its second write",
        TIMEOUT,
        || async { crashing.logs().contains("aborting before write 2").then_some(()) },
    )
    .await;
    assert!(
        revisions.get_opt(&revision).await.unwrap().is_some(),
        "its one write kept the revision: {}",
        crashing.logs()
    );
    drop(crashing);

    let _stencil = w.start().await;
    let state = wait_for("the rollout's state", TIMEOUT, || w.rollout_state()).await;
    assert_eq!(
        (state.phase, state.step, state.percent),
        (RolloutPhase::Progressing, 0, 20),
        "the revision's own state, written with it"
    );
    let first = w.first_step(20).await;
    let moved = w
        .wait_versions("the first step at version 2", |v| {
            v.iter().filter(|(_, v)| *v == "2").count() == first.len()
        })
        .await;
    let on_two: BTreeSet<String> = moved.into_iter().filter(|(_, v)| v == "2").map(|(p, _)| p).collect();
    assert_eq!(on_two, first, "only the first step's parents move");
}
