//! Sharding between `stencil run --sharding` processes: 300 parents split between three
//! members, a member killed with SIGKILL and its parents moved to the others, an edit of
//! every parent applied once per child, and a fourth member taking its share through
//! drains, each parent handed over by its old member before the new one writes. Faults:
//! a member killed while it is being drained, the sharder's leader killed in the middle
//! of a rebalance, and a member frozen past its Lease and thawed with work queued.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{Process, TestNamespace, spawn_stencil_env, wait_for};
use futures::future::join_all;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::json;
use stencil::definition::RolloutPhase;
use stencil::labels;

const PARENTS: usize = 300;

/// Parents of the fault cases.
const FEW: usize = 60;

/// One ring at a time: the times reported (a move after a kill) are the rig's, not those
/// of a machine shared by four rings.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A Lease shortened by hand, to keep the run short: 6 s, renewed every second, written
/// under for at most 4 s after the last renewal.
const LEASE: [&str; 3] = ["--lease-duration=6s", "--renew-deadline=4s", "--retry-period=1s"];

struct Ring {
    parents: usize,
    client: kube::Client,
    ns: TestNamespace,
    group: String,
    lease: String,
    args: Vec<String>,
    members: BTreeMap<String, Process>,
    dir: tempfile::TempDir,
    /// Held while the ring runs; the last field, so it is let go after the members stop.
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

impl Ring {
    /// Members `names` over `parents` Widgets, created at once; `extra` arguments for
    /// every member.
    async fn start(names: &[&str], parents: usize, extra: &[&str]) -> Ring {
        let turn = ONE_AT_A_TIME.lock().await;
        let extra: Vec<&str> = LEASE.iter().chain(extra).copied().collect();
        let common::Replicated {
            client,
            ns,
            group,
            lease,
            args,
            dir,
        } = common::Replicated::new("shard", "--sharding", &extra).await;
        let mut ring = Ring {
            parents,
            client,
            ns,
            group,
            lease,
            args,
            members: BTreeMap::new(),
            dir,
            _turn: turn,
        };
        for name in names {
            ring.join(name);
        }
        let widgets = ring.widgets();
        let group = ring.group.clone();
        join_all((0..parents).map(|i| {
            let widgets = widgets.clone();
            let obj: DynamicObject =
                serde_json::from_value(json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
                "metadata": {"name": format!("w{i:03}")}, "spec": {"size": 1}}))
                .unwrap();
            async move { common::create_when_served(&widgets, &obj).await }
        }))
        .await;
        ring
    }

    /// Sets `spec.size` of every parent.
    async fn edit_all(&self, size: u64) {
        let widgets = self.widgets();
        join_all((0..self.parents).map(|i| {
            let widgets = widgets.clone();
            async move {
                widgets
                    .patch(
                        &format!("w{i:03}"),
                        &PatchParams::default(),
                        &Patch::Merge(json!({"spec": {"size": size}})),
                    )
                    .await
                    .unwrap()
            }
        }))
        .await;
    }

    /// Kills a member with SIGKILL.
    fn kill(&mut self, name: &str) {
        let mut process = self.members.remove(name).expect("a running member");
        process.child.kill().unwrap();
        process.child.wait().unwrap();
    }

    /// Waits until the ring has settled with every child at `size`, or fails with the
    /// members' logs.
    async fn until_settled(&self, size: &str, what: &str) -> BTreeMap<String, String> {
        let settled = tokio::time::timeout(Duration::from_secs(180), async {
            loop {
                if let Some(p) = self.settled(size).await {
                    return p;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
        .await;
        settled.unwrap_or_else(|_| panic!("{what}: not settled in 180 s; logs:\n{}", self.logs()))
    }

    fn join(&mut self, name: &str) {
        let log = self.dir.path().join(format!("{name}.log"));
        let process = spawn_stencil_env(
            &self.args,
            &common::kubeconfig_path(),
            log,
            &[("POD_NAME", name.to_string()), ("POD_NAMESPACE", self.ns.name.clone())],
        );
        self.members.insert(name.to_string(), process);
    }

    fn widgets(&self) -> Api<DynamicObject> {
        common::widgets(&self.client, &self.group, &self.ns.name)
    }

    fn configmaps(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), &self.ns.name)
    }

    async fn leader(&self) -> Option<String> {
        let gauge = format!("leader_election_master_status{{name=\"{}\"}}", self.lease);
        for (name, p) in &self.members {
            if p.metric(&gauge).await == Some(1.0) {
                return Some(name.clone());
            }
        }
        None
    }

    /// Each parent's member, by parent name; `None` while a parent has no member or a
    /// drain is under way.
    async fn placement(&self) -> Option<BTreeMap<String, String>> {
        let parents = self.widgets().list(&ListParams::default()).await.ok()?;
        let mut out = BTreeMap::new();
        for p in parents.items {
            let labels = p.metadata.labels.unwrap_or_default();
            if labels.contains_key(labels::DRAIN) {
                return None;
            }
            out.insert(p.metadata.name?, labels.get(labels::SHARD)?.clone());
        }
        Some(out)
    }

    /// The placement once every parent is with a running member, and every child is
    /// labelled with its parent's member, with `size` in its data.
    async fn settled(&self, size: &str) -> Option<BTreeMap<String, String>> {
        let placement = self.placement().await?;
        if placement.len() != self.parents || placement.values().any(|m| !self.members.contains_key(m)) {
            return None;
        }
        let cms = self.configmaps().list(&ListParams::default()).await.ok()?;
        let mut children = 0;
        for cm in cms.items {
            let name = cm.metadata.name.clone()?;
            let Some(parent) = name.strip_suffix("-cm") else {
                continue;
            };
            let shard = cm.metadata.labels.as_ref()?.get(labels::SHARD)?;
            let data_size = cm.data.as_ref()?.get("size")?;
            if placement.get(parent) != Some(shard) || data_size != size {
                return None;
            }
            children += 1;
        }
        (children == self.parents).then_some(placement)
    }

    /// `count` summed over `members`.
    async fn total(&self, members: &[String], count: Count) -> f64 {
        join_all(members.iter().map(|m| count.of(self.member(m))))
            .await
            .iter()
            .sum()
    }

    /// `count` summed over `members` once it stands still for two seconds.
    async fn steady(&self, members: &[String], count: Count, what: &str) -> f64 {
        wait_for(what, Duration::from_secs(60), || async {
            let a = self.total(members, count).await;
            tokio::time::sleep(Duration::from_secs(2)).await;
            let b = self.total(members, count).await;
            (a == b).then_some(b)
        })
        .await
    }

    fn member(&self, name: &str) -> &Process {
        &self.members[name]
    }

    fn logs(&self) -> String {
        self.members
            .iter()
            .map(|(n, p)| {
                let logs = p.logs();
                let lines: Vec<&str> = logs.lines().collect();
                format!("--- {n}:\n{}", lines[lines.len().saturating_sub(20)..].join("\n"))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A count read from a member's metrics.
#[derive(Clone, Copy)]
enum Count {
    /// Children it wrote (created, updated or applied).
    ChildWrites,
    /// Every write that passed its fence: children, status, handovers, assignments.
    FencedWrites,
}

impl Count {
    async fn of(self, p: &Process) -> f64 {
        let Some((_, body)) = p.get("/metrics").await else {
            return f64::NAN;
        };
        let wanted = |l: &&str| match self {
            Count::ChildWrites => {
                l.starts_with("stencil_children_applied_total{")
                    && ["created", "updated", "applied"]
                        .iter()
                        .any(|r| l.contains(&format!("result=\"{r}\"")))
            }
            Count::FencedWrites => l.starts_with("stencil_fenced_writes_total{result=\"sent\"}"),
        };
        body.lines()
            .filter(wanted)
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }
}

fn shares(placement: &BTreeMap<String, String>) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for member in placement.values() {
        *out.entry(member.clone()).or_insert(0) += 1;
    }
    out
}

#[tokio::test]
async fn parents_split_between_members_move_on_a_kill_and_rebalance_through_drains() {
    let mut ring = Ring::start(&["member-a", "member-b", "member-c"], PARENTS, &[]).await;

    // Balanced shares, each child with its parent's member.
    let placement = ring.until_settled("1", "the first placement").await;
    let split = shares(&placement);
    eprintln!("shares of {PARENTS} parents over three members: {split:?}");
    assert_eq!(split.len(), 3, "{split:?}");
    for (member, n) in &split {
        assert!(
            (75..=125).contains(n),
            "{member} has {n} parents, outside ±25 % of 100: {split:?}"
        );
    }

    // SIGKILL of a member that does not lead: its parents move once its Lease (6 s) has
    // expired; the time is reported, not asserted (the machine's load decides it).
    let leader = wait_for("a leader", Duration::from_secs(30), || ring.leader()).await;
    let victim = split.keys().find(|m| **m != leader).unwrap().clone();
    let killed = Instant::now();
    ring.kill(&victim);
    wait_for(
        "the killed member's parents to move",
        Duration::from_secs(60),
        || async {
            let p = ring.placement().await?;
            (p.len() == PARENTS && p.values().all(|m| ring.members.contains_key(m))).then_some(())
        },
    )
    .await;
    let moved_in = killed.elapsed();
    eprintln!(
        "the parents of a killed member moved in {:.1} s (Lease 6 s)",
        moved_in.as_secs_f64()
    );
    wait_for(
        "the survivors to serve the moved parents",
        Duration::from_secs(60),
        || ring.settled("1"),
    )
    .await;

    // An edit of every parent: one write per child, then none.
    let survivors: Vec<String> = ring.members.keys().cloned().collect();
    let before = ring.total(&survivors, Count::ChildWrites).await;
    ring.edit_all(2).await;
    wait_for("every child to carry the edit", Duration::from_secs(120), || {
        ring.settled("2")
    })
    .await;
    let after = ring
        .steady(&survivors, Count::FencedWrites, "the members to go idle")
        .await;
    let edits = ring.total(&survivors, Count::ChildWrites).await;
    assert_eq!(
        edits - before,
        PARENTS as f64,
        "each child is written once for the edit"
    );
    tokio::time::sleep(Duration::from_secs(10)).await;
    let idle = ring.total(&survivors, Count::FencedWrites).await;
    assert_eq!(idle, after, "no write in an idle window of 10 s");

    // A fourth member joins: it takes a share, each parent handed over by its old member
    // before the new one writes its child, once.
    let before_join = ring.placement().await.unwrap();
    let writes_before = ring.total(&survivors, Count::ChildWrites).await;
    let handovers_before: usize = survivors.iter().map(|m| ring.member(m).logged("handed over")).sum();
    ring.join("member-d");
    let joined = wait_for(
        "the fourth member to take a share",
        Duration::from_secs(120),
        || async {
            let p = ring.settled("2").await?;
            shares(&p).contains_key("member-d").then_some(p)
        },
    )
    .await;
    let moved: Vec<&String> = joined
        .iter()
        .filter(|(parent, member)| before_join.get(*parent) != Some(*member))
        .map(|(parent, _)| parent)
        .collect();
    assert!(
        moved.iter().all(|p| joined[*p] == "member-d"),
        "parents move only to the member that joined"
    );
    let split = shares(&joined);
    eprintln!("after a fourth member joined: {split:?}");
    let handovers: usize = survivors.iter().map(|m| ring.member(m).logged("handed over")).sum();
    assert_eq!(
        handovers - handovers_before,
        moved.len(),
        "every moved parent was handed over by its old member"
    );
    let writes_after = ring.total(&survivors, Count::ChildWrites).await;
    assert_eq!(
        writes_after, writes_before,
        "the old members write no child of a moved parent"
    );
    let newcomer = wait_for("the newcomer's writes to settle", Duration::from_secs(30), || async {
        let n = Count::ChildWrites.of(ring.member("member-d")).await;
        (n == moved.len() as f64).then_some(n)
    })
    .await;
    assert_eq!(
        newcomer,
        moved.len() as f64,
        "the new member writes each moved child once"
    );
}

/// Which member to kill once the first drain is seen.
#[derive(Clone, Copy, Debug)]
enum Victim {
    /// The member being drained, not the leader.
    Drained,
    /// The leader, which runs the sharder.
    Leader,
}

/// Two members settle `FEW` parents; a third joins, and the moment the sharder's first
/// drain label is seen, `victim` is killed with SIGKILL. The survivors must then hold
/// every parent, each child once and labelled for its parent's member, and an edit of
/// every parent must be written once per child.
async fn a_kill_during_a_rebalance(victim: Victim) {
    use futures::StreamExt;
    use kube::runtime::watcher::{self, Event, watcher};

    let mut ring = Ring::start(&["member-a", "member-b"], FEW, &[]).await;
    ring.until_settled("1", "two members").await;
    let leader = wait_for("a leader", Duration::from_secs(30), || ring.leader()).await;
    let mut events = watcher(ring.widgets(), watcher::Config::default()).boxed();
    // The watch's first list comes before the join, so only drains of the rebalance count.
    while let Some(event) = events.next().await {
        if matches!(event, Ok(Event::InitDone)) {
            break;
        }
    }
    ring.join("member-c");
    let drained = tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(event) = events.next().await {
            if let Ok(Event::Apply(p)) = event {
                let labels = p.metadata.labels.unwrap_or_default();
                if labels.contains_key(labels::DRAIN) {
                    return labels.get(labels::SHARD).cloned();
                }
            }
        }
        None
    })
    .await
    .ok()
    .flatten()
    .unwrap_or_else(|| panic!("no drain seen after a member joined; logs:\n{}", ring.logs()));
    let target = match victim {
        Victim::Leader => leader.clone(),
        Victim::Drained if drained != leader => drained,
        // The drained parent is the leader's: kill the other old member, drained too.
        Victim::Drained => ["member-a", "member-b"]
            .iter()
            .find(|m| **m != leader)
            .unwrap()
            .to_string(),
    };
    ring.kill(&target);
    eprintln!("{victim:?}: killed {target} (leader {leader}) at the first drain");

    let placement = ring.until_settled("1", "after the kill").await;
    assert!(placement.values().all(|m| *m != target), "{target}'s parents moved");
    assert_invariants_of(&ring).await;
    let members: Vec<String> = ring.members.keys().cloned().collect();
    let before = ring.total(&members, Count::ChildWrites).await;
    ring.edit_all(2).await;
    ring.until_settled("2", "after the edit").await;
    let after = ring.steady(&members, Count::ChildWrites, "the writes to settle").await;
    assert_eq!(after - before, FEW as f64, "one write per child for the edit");
    assert_invariants_of(&ring).await;
}

async fn assert_invariants_of(ring: &Ring) {
    common::assert_invariants(&ring.client, &ring.widgets(), &[ring.ns.name.as_str()]).await;
}

#[tokio::test]
async fn a_member_killed_while_it_is_drained_leaves_no_parent_behind_and_none_doubled() {
    a_kill_during_a_rebalance(Victim::Drained).await;
}

#[tokio::test]
async fn the_sharders_leader_killed_during_a_rebalance_hands_the_rebalance_over() {
    a_kill_during_a_rebalance(Victim::Leader).await;
}

/// A member frozen with SIGSTOP past its Lease: its parents move to the other member,
/// which serves an edit of every parent. Thawed with its queues full, the frozen member
/// writes nothing (its fence closed at the renew deadline, before the sharder could move
/// anything, and stays sealed) and exits.
#[tokio::test]
async fn a_frozen_member_writes_nothing_once_its_parents_have_moved() {
    let mut ring = Ring::start(&["member-a", "member-b"], FEW, &["--log-format=json"]).await;
    ring.until_settled("1", "two members").await;
    let leader = wait_for("a leader", Duration::from_secs(30), || ring.leader()).await;
    let frozen = ["member-a", "member-b"]
        .iter()
        .find(|m| **m != leader)
        .unwrap()
        .to_string();
    let sent_before = ring
        .steady(
            std::slice::from_ref(&frozen),
            Count::FencedWrites,
            "the member to go idle",
        )
        .await;
    assert!(sent_before > 0.0, "positive control: the member's writes are counted");

    ring.member(&frozen).signal("-STOP");
    let stopped = Instant::now();
    wait_for(
        "the frozen member's parents to move",
        Duration::from_secs(60),
        || async {
            let placed = ring.settled("1").await?;
            placed.values().all(|m| *m == leader).then_some(())
        },
    )
    .await;
    eprintln!(
        "a frozen member's parents moved in {:.1} s",
        stopped.elapsed().as_secs_f64()
    );
    ring.edit_all(2).await;
    ring.until_settled("2", "the edit, served by the other member").await;
    ring.member(&frozen).signal("-CONT");

    let mut thawed = ring.members.remove(&frozen).unwrap();
    thawed.exit_within(Duration::from_secs(60), "the thawed member").await;
    let sent_after = thawed.sent_count("writes through the member's fence");
    assert_eq!(sent_after, sent_before, "the thawed member wrote nothing");
    ring.until_settled("2", "after the thaw").await;
    assert_invariants_of(&ring).await;
}

/// Steps of 50 and 100 percent, none paused, failing 20 s after a step moved a parent
/// that is not Ready.
const CANARY: &str = "  rollout:\n    strategy: Canary\n    progressDeadlineSeconds: 20\n    steps:\n      - percent: 50\n      - percent: 100\n";

#[tokio::test]
async fn a_rollout_step_is_judged_on_every_members_share_not_the_leaders_alone() {
    let mut ring = Ring::start(&["member-a", "member-b"], 16, &[]).await;
    let placement = ring.until_settled("1", "the first placement").await;
    let leader = wait_for("a leader", Duration::from_secs(60), || ring.leader()).await;
    // The leader's share goes: every parent a step can move is the other member's.
    let widgets = ring.widgets();
    let mine: Vec<&String> = placement
        .iter()
        .filter(|(_, m)| **m == leader)
        .map(|(p, _)| p)
        .collect();
    for parent in &mine {
        widgets.delete(parent, &Default::default()).await.unwrap();
    }
    ring.parents -= mine.len();
    wait_for("the leader's parents gone", Duration::from_secs(60), || async {
        (widgets.list(&ListParams::default()).await.ok()?.items.len() == ring.parents).then_some(())
    })
    .await;

    let children = common::child("cm", common::CM) + &common::never_ready();
    let text = common::definition(&ring.group, &children, CANARY);
    std::fs::write(ring.dir.path().join("widgets.yaml"), &text).unwrap();
    let def: stencil::definition::OperatorDefinition = stencil::yaml::document(&text).unwrap();
    let name = format!("widgets.{}", ring.group);
    let revision = stencil::rollout::revision_name(&name, &stencil::rollout::revision_hash(&def.spec));
    let revisions: Api<k8s_openapi::api::apps::v1::ControllerRevision> =
        Api::namespaced(ring.client.clone(), &ring.ns.name);
    let state = wait_for("the rollout to end", Duration::from_secs(150), || async {
        let kept = revisions.get_opt(&revision).await.ok()??;
        let state: stencil::definition::RolloutStatus =
            serde_json::from_str(kept.metadata.annotations.as_ref()?.get(labels::ROLLOUT)?).ok()?;
        matches!(state.phase, RolloutPhase::Complete | RolloutPhase::RolledBack).then_some(state)
    })
    .await;
    assert_eq!(
        state.phase,
        RolloutPhase::RolledBack,
        "the other member's moved parents never became Ready: {state:?}; logs:\n{}",
        ring.logs()
    );
}

/// Calls of metacontroller hooks a member made.
async fn hook_calls(p: &Process) -> f64 {
    let Some((_, body)) = p.get("/metrics").await else {
        return 0.0;
    };
    body.lines()
        .filter(|l| l.starts_with("stencil_hook_calls_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A sync hook: one ConfigMap per Pool.
fn pool_sync(request: &serde_json::Value) -> serde_json::Value {
    let name = request["parent"]["metadata"]["name"].as_str().unwrap_or_default();
    json!({"children": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("{name}-cm")}}]})
}

#[tokio::test]
async fn metacontroller_controllers_are_served_by_the_rings_leader_alone_and_move_with_it() {
    let (address, calls) = common::serve_hooks(&[("/sync", pool_sync)]).await;
    let resolve = format!("--resolve=hooks-shardcompat.test={address}");
    let mut ring = Ring::start(&["m1", "m2"], 0, &["--compat=metacontroller", &resolve]).await;
    for crd in stencil::metacontroller::crds() {
        common::install_crd(&ring.client, &crd).await;
    }
    let pool_group = common::unique_group();
    common::install_crd(
        &ring.client,
        &common::open_crd(&pool_group, "Pool", "pools", "Namespaced"),
    )
    .await;
    let controllers: Api<stencil::metacontroller::api::CompositeController> = Api::all(ring.client.clone());
    let name = format!("pools-{pool_group}");
    let cc = serde_json::from_value(json!({
        "apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
        "metadata": {"name": name},
        "spec": {"parentResource": {"apiVersion": format!("{pool_group}/v1"), "resource": "pools"},
            "generateSelector": true,
            "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "hooks": {"sync": {"webhook": {"url": "http://hooks-shardcompat.test/sync"}}}}
    }))
    .unwrap();
    controllers.create(&Default::default(), &cc).await.unwrap();
    let resource = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(&pool_group, "v1", "Pool"),
        "pools",
    );
    let pools: Api<DynamicObject> = Api::namespaced_with(ring.client.clone(), &ring.ns.name, &resource);
    let pool = |name: &str| json!({"apiVersion": format!("{pool_group}/v1"), "kind": "Pool", "metadata": {"name": name}, "spec": {}});
    pools
        .patch("p1", &PatchParams::apply("test"), &Patch::Apply(pool("p1")))
        .await
        .unwrap();
    let configmaps = ring.configmaps();
    wait_for("p1's child", Duration::from_secs(60), || async {
        configmaps.get_opt("p1-cm").await.ok().flatten()
    })
    .await;
    let leader = wait_for("a leader", Duration::from_secs(60), || ring.leader()).await;
    let other = if leader == "m1" { "m2" } else { "m1" };
    assert!(hook_calls(ring.member(&leader)).await >= 1.0);
    assert_eq!(hook_calls(ring.member(other)).await, 0.0, "only the leader calls hooks");
    // The leader goes: the other member leads, and serves the controller objects.
    ring.kill(&leader);
    pools
        .patch("p2", &PatchParams::apply("test"), &Patch::Apply(pool("p2")))
        .await
        .unwrap();
    wait_for(
        "p2's child, made by the new leader",
        Duration::from_secs(60),
        || async { configmaps.get_opt("p2-cm").await.ok().flatten() },
    )
    .await;
    assert!(hook_calls(ring.member(other)).await >= 1.0);
    assert!(calls[0].load(std::sync::atomic::Ordering::SeqCst) >= 2);
    controllers.delete(&name, &Default::default()).await.unwrap();
}
