//! Leader election between two `stencil run` processes: only the leader reconciles, both
//! are ready, and when the leader is killed with SIGKILL the standby takes over.

mod common;

use std::time::{Duration, Instant};

use common::{Process, TestNamespace, spawn_stencil, wait_for};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject};
use serde_json::json;

async fn create_widget(api: &Api<DynamicObject>, group: &str, name: &str) {
    let obj: DynamicObject = serde_json::from_value(json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
        "metadata": {"name": name}, "spec": {"size": 1}}))
    .unwrap();
    common::create_when_served(api, &obj).await;
}

async fn applied(p: &Process, definition: &str) -> f64 {
    let sample =
        format!("stencil_children_applied_total{{definition=\"{definition}\",kind=\"ConfigMap\",result=\"created\"}}");
    p.metric(&sample).await.unwrap_or(0.0)
}

/// Two `stencil run` processes sharing one Lease over a Widget definition, once one of
/// them leads.
struct Pair {
    client: kube::Client,
    ns: TestNamespace,
    group: String,
    procs: Vec<Process>,
    gauge: String,
    leader: usize,
    dir: tempfile::TempDir,
}

impl Pair {
    async fn start(prefix: &str, extra: &[&str]) -> Pair {
        let common::Replicated {
            client,
            ns,
            group,
            lease,
            args,
            dir,
        } = common::Replicated::new(prefix, "--leader-elect", extra).await;
        let kubeconfig = common::kubeconfig_path();
        let procs = vec![
            spawn_stencil(&args, &kubeconfig, dir.path().join("a.log")),
            spawn_stencil(&args, &kubeconfig, dir.path().join("b.log")),
        ];
        let gauge = format!("leader_election_master_status{{name=\"{lease}\"}}");
        let settled = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                match (procs[0].metric(&gauge).await, procs[1].metric(&gauge).await) {
                    (Some(x), Some(y)) if x + y == 1.0 => return if x == 1.0 { 0 } else { 1 },
                    _ => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
        })
        .await;
        let leader = match settled {
            Ok(leader) => leader,
            Err(_) => panic!(
                "no leader and standby within 60 s\n--- a.log:\n{}\n--- b.log:\n{}",
                procs[0].tail(15),
                procs[1].tail(15)
            ),
        };
        Pair {
            client,
            ns,
            group,
            procs,
            gauge,
            leader,
            dir,
        }
    }

    fn widgets(&self) -> Api<DynamicObject> {
        common::widgets(&self.client, &self.group, &self.ns.name)
    }

    fn configmaps(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), &self.ns.name)
    }
}

#[tokio::test]
async fn only_the_leader_reconciles_and_the_standby_takes_over_after_a_kill() {
    let mut pair = Pair::start("leader", &[]).await;
    let (leader, gauge, group) = (pair.leader, pair.gauge.clone(), pair.group.clone());
    let (widgets, cms) = (pair.widgets(), pair.configmaps());
    let procs = &mut pair.procs;
    let standby = 1 - leader;
    // The leader is ready once its definitions have started, a moment after it wins the
    // Lease; the standby is ready while it waits.
    wait_for("leader and standby both ready", Duration::from_secs(60), || async {
        for p in procs.iter() {
            if p.get("/readyz").await?.0 != 200 {
                return None;
            }
        }
        Some(())
    })
    .await;

    let def = format!("widgets.{group}");
    create_widget(&widgets, &group, "one").await;
    wait_for("the leader to create the child", Duration::from_secs(60), || async {
        cms.get_opt("one-cm").await.ok()?
    })
    .await;
    // The object can be seen a moment before the leader has counted its own write.
    wait_for(
        "the leader to count the child it wrote",
        Duration::from_secs(30),
        || async { (applied(&procs[leader], &def).await >= 1.0).then_some(()) },
    )
    .await;
    assert_eq!(applied(&procs[standby], &def).await, 0.0, "the standby writes nothing");

    let killed = Instant::now();
    procs[leader].child.kill().unwrap();
    procs[leader].child.wait().unwrap();
    let survivor = &procs[standby];
    wait_for("the standby to take over", Duration::from_secs(90), || async {
        (survivor.metric(&gauge).await == Some(1.0)).then_some(())
    })
    .await;
    let failover = killed.elapsed();
    create_widget(&widgets, &group, "two").await;
    let created = tokio::time::timeout(Duration::from_secs(60), async {
        while !matches!(cms.get_opt("two-cm").await, Ok(Some(_))) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(
        created.is_ok(),
        "the new leader did not create the child; its log:\n{}",
        survivor.logs()
    );
    eprintln!(
        "leader failover after SIGKILL: {:.1} s (lease duration 15 s, retry period 2 s)",
        failover.as_secs_f64()
    );
    assert!(failover < Duration::from_secs(60), "failover took {failover:?}");
}

/// Writes the fence let through, from the process's metrics.
async fn fenced(p: &Process, result: &str) -> Option<f64> {
    p.metric(&format!("stencil_fenced_writes_total{{result=\"{result}\"}}"))
        .await
}

/// The old leader is frozen (SIGSTOP) past its Lease, the standby takes over and writes,
/// then the old leader is thawed with its queues full of work: it must not write again,
/// because its renew deadline (shorter than the Lease) passed before the standby could
/// take the Lease.
#[tokio::test]
async fn a_frozen_leader_stops_writing_before_the_standby_can_take_the_lease() {
    // A Lease shortened by hand: 6 s, renewed every second, written for at most 4 s after
    // the last renewal.
    let shortened = [
        "--lease-duration=6s",
        "--renew-deadline=4s",
        "--retry-period=1s",
        "--log-format=json",
    ];
    let pair = Pair::start("fence", &shortened).await;
    let (leader, gauge, group) = (pair.leader, pair.gauge.clone(), pair.group.clone());
    let (widgets, cms) = (pair.widgets(), pair.configmaps());
    let Pair {
        procs,
        ns: _ns,
        dir: _dir,
        ..
    } = pair;
    let (old, new) = (&procs[leader], &procs[1 - leader]);
    create_widget(&widgets, &group, "one").await;
    wait_for("the leader to create the child", Duration::from_secs(60), || async {
        cms.get_opt("one-cm").await.ok()?
    })
    .await;
    // Positive control: the leader's writes pass the fence and are counted; wait until
    // the count stands still (the status write follows the child).
    let sent_before = wait_for("the leader to go idle", Duration::from_secs(30), || async {
        let a = fenced(old, "sent").await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let b = fenced(old, "sent").await?;
        (a == b && a > 0.0).then_some(a)
    })
    .await;

    old.signal("-STOP");
    let frozen = Instant::now();
    wait_for("the standby to take the Lease", Duration::from_secs(60), || async {
        (new.metric(&gauge).await == Some(1.0)).then_some(())
    })
    .await;
    let takeover = frozen.elapsed();
    // Work for both: the new leader does it, the old one finds it queued when thawed.
    create_widget(&widgets, &group, "two").await;
    wait_for("the new leader's first writes", Duration::from_secs(60), || async {
        cms.get_opt("two-cm").await.ok()?
    })
    .await;
    old.signal("-CONT");

    let mut old = procs.into_iter().nth(leader).unwrap();
    let exited = old.exit_within(Duration::from_secs(60), "the old leader").await;
    let sent_after = old.sent_count("writes through the leader's fence");
    eprintln!(
        "standby took the Lease {:.1} s after the leader froze; old leader: {sent_before} writes before, {sent_after} at exit",
        takeover.as_secs_f64()
    );
    assert!(
        !exited.success(),
        "the old leader exits with an error once it knows it lost the Lease"
    );
    assert_eq!(
        sent_after,
        sent_before,
        "the old leader sent a write after the standby took over; its log ends:\n{}",
        old.tail(40)
    );
}
