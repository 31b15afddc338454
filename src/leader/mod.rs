//! Leader election on a `coordination.k8s.io` Lease (kube-lease-manager): only the leader
//! reconciles; standbys keep their sources synced and wait. The leader also follows its
//! own Lease's renewals and stops writing at the renew deadline ([`fence`]), before a
//! standby may take the Lease.

pub mod fence;

use std::time::{Duration, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use fence::Fence;

use crate::metrics::{self, Metrics};

/// Leader election settings; the defaults are client-go's.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// This process's identity in the Lease.
    pub identity: String,
    /// How long a Lease is valid without renewal (15 s).
    pub lease_duration: Duration,
    /// How long the leader keeps writing after its last renewal (10 s); shorter than the
    /// Lease duration, so it has stopped before a standby may take over.
    pub renew_deadline: Duration,
    /// How often the leader renews the Lease (2 s).
    pub retry_period: Duration,
}

/// Why the election cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum ElectionError {
    /// The settings leave no margin between the renew deadline and the Lease.
    #[error(
        "the renew deadline ({renew} s) must be shorter than the Lease duration ({lease} s) and longer than the retry period ({retry} s)"
    )]
    Settings {
        /// The renew deadline.
        renew: u64,
        /// The Lease duration.
        lease: u64,
        /// The retry period.
        retry: u64,
    },
    /// The Lease could not be read or created.
    #[error("joining the leader election on Lease {lease}: {source}")]
    Join {
        /// `namespace/name` of the Lease.
        lease: String,
        /// What went wrong.
        #[source]
        source: LeaseManagerError,
    },
    /// A member's Lease could not be created or labelled with its ring.
    #[error("joining the ring on Lease {lease}: {source}")]
    Ring {
        /// `namespace/name` of the Lease.
        lease: String,
        /// What went wrong.
        #[source]
        source: kube::Error,
    },
    /// The election task stopped: this process can never lead.
    #[error("the leader election task stopped; exiting so that a new process can stand by")]
    Ended,
}

/// A running election.
pub struct Election {
    leader: watch::Receiver<bool>,
    /// The manager's word, forwarded, for whoever outlives the election's own handles.
    forwarded: watch::Receiver<bool>,
    task: JoinHandle<Result<kube_lease_manager::LeaseManager, LeaseManagerError>>,
    renewals: JoinHandle<()>,
    gauge: crate::tasks::Owned<()>,
    fence: Fence,
}

impl Election {
    /// Joins the election. `client` must not be fenced: renewing the Lease is the one write
    /// a leader makes past its deadline.
    ///
    /// # Errors
    ///
    /// The timings do not fit together (renew deadline, lease duration, retry period), or
    /// the Lease cannot be joined.
    pub async fn start(client: Client, settings: &Settings, metrics: &Metrics) -> Result<Election, ElectionError> {
        let (lease, renew, retry) = (
            settings.lease_duration.as_secs().max(2),
            settings.renew_deadline.as_secs(),
            settings.retry_period.as_secs(),
        );
        if renew >= lease || renew <= retry {
            return Err(ElectionError::Settings { renew, lease, retry });
        }
        // kube-lease-manager renews once less than `grace` is left: renewing a retry
        // period after each renewal.
        let grace = lease.saturating_sub(retry).clamp(1, lease - 1);
        let manager = LeaseManagerBuilder::new(client.clone(), &settings.name)
            .with_namespace(&settings.namespace)
            .with_identity(&settings.identity)
            .with_duration(lease)
            .with_grace(grace)
            // A field manager of its own per replica: taking a free Lease is a server-side
            // apply of `holderIdentity` that must conflict with another replica's, or two
            // replicas that start together both take it, the last write winning.
            .with_field_manager(format!("{}-{}", crate::labels::FIELD_MANAGER, settings.identity))
            .build()
            .await
            .map_err(|source| ElectionError::Join {
                lease: format!("{}/{}", settings.namespace, settings.name),
                source,
            })?;
        let (leader, task) = manager.watch().await;
        let fence = Fence::elected(settings.renew_deadline, metrics);
        let renewals = tokio::spawn(follow_renewals(client, settings.clone(), fence.clone()));
        let gauge = metrics
            .leader_election_master_status
            .get_or_create(&metrics::queue(&settings.name))
            .clone();
        let mut observe = leader.clone();
        // Others follow a copy of the manager's channel: the manager lets the Lease go
        // only once every receiver of its own is dropped, which `release` does here.
        let (forward, forwarded) = watch::channel(*leader.borrow());
        // Owned, so that `release` drops the last receiver and the Lease manager lets go.
        let gauge_task = crate::tasks::Owned::spawn(async move {
            loop {
                let leads = *observe.borrow_and_update();
                gauge.set(i64::from(leads));
                forward.send_replace(leads);
                if observe.changed().await.is_err() {
                    gauge.set(0);
                    return;
                }
            }
        });
        Ok(Election {
            leader,
            forwarded,
            task,
            renewals,
            gauge: gauge_task,
            fence,
        })
    }

    /// The fence that the client's writes pass through.
    pub fn fence(&self) -> Fence {
        self.fence.clone()
    }

    /// The leader's work as this election hands it out.
    pub fn leadership(&self) -> Leadership {
        Leadership(Some((self.forwarded.clone(), self.fence.clone())))
    }

    /// A future that resolves once this process leads with its fence open, as
    /// [`Election::acquired`], owning what it waits on so a task can hold it.
    pub fn led(&self) -> impl std::future::Future<Output = Result<(), ElectionError>> + Send + 'static {
        let (mut leader, fence) = (self.forwarded.clone(), self.fence.clone());
        async move { renewed_by_us(&mut leader, &fence).await }
    }

    /// Waits until this process leads; fails when the election task has stopped, since
    /// a standby that can never lead must not look healthy.
    ///
    /// # Errors
    ///
    /// The election task stopped before this process led.
    pub async fn acquired(&mut self) -> Result<(), ElectionError> {
        renewed_by_us(&mut self.leader, &self.fence).await
    }

    /// Waits until this process stops leading: the Lease is lost, the election task
    /// stopped, or the renew deadline passed without a renewal. The fence is sealed then:
    /// the process exits, and no late renewal reopens it meanwhile.
    pub async fn lost(&mut self) {
        loop {
            if !*self.leader.borrow_and_update() {
                break;
            }
            let Some(closes) = self.fence.closes_at() else { break };
            tokio::select! {
                changed = self.leader.changed() => if changed.is_err() { break },
                _ = tokio::time::sleep_until(closes.into()) => {
                    if !self.fence.allows() {
                        tracing::warn!("no Lease renewal within the renew deadline; stopping");
                        break;
                    }
                }
            }
        }
        self.fence.seal();
    }

    /// Leaves the election, releasing the Lease if held. The fence closes first: once
    /// the Lease is released a standby may take it at once, and no write of this process
    /// may follow.
    pub async fn release(self) {
        self.fence.seal();
        self.renewals.abort();
        drop(self.gauge);
        drop(self.leader);
        match self.task.await {
            Ok(Ok(_)) => tracing::info!("released the leader Lease"),
            Ok(Err(e)) => tracing::warn!(error = %e, "could not release the leader Lease"),
            Err(e) => tracing::warn!(error = %e, "the leader election task failed"),
        }
    }
}

/// Whether this process does the work one replica does for all: CRD installs, storage
/// migrations, definition status and decorators. Unsharded, the process that runs the
/// registry does all of it (it leads, or runs alone); in a sharded ring, only the leader.
#[derive(Clone)]
pub struct Leadership(Option<(watch::Receiver<bool>, Fence)>);

impl Leadership {
    /// This process does it all.
    pub fn always() -> Leadership {
        Leadership(None)
    }

    /// Whether this process does the leader's work now.
    pub fn now(&self) -> bool {
        match &self.0 {
            None => true,
            Some((leader, fence)) => *leader.borrow() && fence.allows(),
        }
    }

    /// Waits until this process does the leader's work; forever if it never will.
    pub async fn wait(&self) {
        if let Some((leader, fence)) = &self.0 {
            let mut leader = leader.clone();
            if renewed_by_us(&mut leader, fence).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

/// Waits until `leader` turns true; an error once its sender (the election task) is gone.
async fn leading(leader: &mut watch::Receiver<bool>) -> Result<(), ElectionError> {
    while !*leader.borrow_and_update() {
        if leader.changed().await.is_err() {
            return Err(ElectionError::Ended);
        }
    }
    Ok(())
}

/// Waits until this process leads and the fence is open. Leadership alone is not enough:
/// after a restart under the same identity (a container restarted in its Pod), the
/// Lease's holder record is this identity's from before, and the fence opens only for
/// `renewTime + renew deadline` of a renewal the Lease watch reports, never from the
/// moment leadership is reported, so it cannot stay open past the Lease's expiry.
async fn renewed_by_us(leader: &mut watch::Receiver<bool>, fence: &Fence) -> Result<(), ElectionError> {
    loop {
        leading(leader).await?;
        if fence.allows() {
            return Ok(());
        }
        tokio::select! {
            changed = leader.changed() => if changed.is_err() { return Err(ElectionError::Ended) },
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
    }
}

/// Opens the fence for each renewal of the Lease by this process, as the watch reports it.
async fn follow_renewals(client: Client, settings: Settings, fence: Fence) {
    let api: Api<Lease> = Api::namespaced(client, &settings.namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={}", settings.name));
    let mut events = watcher(api, config).default_backoff().boxed();
    while let Some(event) = events.next().await {
        let lease = match event {
            Ok(Event::Apply(l) | Event::InitApply(l)) => l,
            Ok(_) => continue,
            Err(e) => {
                tracing::debug!(error = %e, "watching the leader Lease");
                continue;
            }
        };
        if let Some(spec) = lease.spec {
            follow(&spec, &settings.identity, &fence);
        }
    }
}

/// Opens the fence for a renewal by `identity`, and closes it the moment the Lease names
/// another holder: whatever this process last renewed, it may not write past that.
fn follow(spec: &k8s_openapi::api::coordination::v1::LeaseSpec, identity: &str, fence: &Fence) {
    match (spec.holder_identity.as_deref(), &spec.renew_time) {
        (Some(holder), Some(renewed)) if holder == identity => fence.renewed(SystemTime::from(renewed.0)),
        (Some(holder), _) if holder != identity => fence.close(),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_standby_whose_election_task_died_stops_waiting_with_an_error() {
        let (tx, mut rx) = watch::channel(false);
        let waiting = tokio::spawn(async move { leading(&mut rx).await });
        drop(tx);
        let outcome = tokio::time::timeout(Duration::from_secs(5), waiting).await;
        assert!(matches!(outcome, Ok(Ok(Err(ElectionError::Ended)))), "{outcome:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn leadership_from_a_stale_holder_record_waits_for_a_renewal_of_its_own() {
        let metrics = Metrics::default();
        let fence = Fence::elected(Duration::from_secs(10), &metrics);
        let (tx, mut rx) = watch::channel(true);
        let waiting = {
            let fence = fence.clone();
            tokio::spawn(async move { renewed_by_us(&mut rx, &fence).await })
        };
        // The record says this identity holds the Lease, renewed 30 s ago by the process
        // before the restart: past the renew deadline, it opens nothing.
        fence.renewed(SystemTime::now() - Duration::from_secs(30));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiting.is_finished(), "no write may leave on the old record");
        assert!(!fence.allows());
        fence.renewed(SystemTime::now());
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("a renewal of its own lets it lead")
            .unwrap()
            .unwrap();
        drop(tx);
    }

    #[test]
    fn another_holder_in_the_lease_closes_the_fence_at_once() {
        use k8s_openapi::api::coordination::v1::LeaseSpec;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
        let fence = Fence::elected(Duration::from_secs(10), &Metrics::default());
        let spec = |holder: &str| LeaseSpec {
            holder_identity: Some(holder.into()),
            renew_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
            ..LeaseSpec::default()
        };
        follow(&spec("me"), "me", &fence);
        assert!(fence.allows(), "a renewal of its own opens the fence");
        follow(&spec("other"), "me", &fence);
        assert!(
            !fence.allows(),
            "another holder closes it before its own renewal runs out"
        );
    }

    #[tokio::test]
    async fn a_standby_that_is_elected_stops_waiting() {
        let (tx, mut rx) = watch::channel(false);
        let waiting = tokio::spawn(async move { leading(&mut rx).await });
        tx.send(true).unwrap();
        assert!(waiting.await.unwrap().is_ok());
    }
}
