//! Leader election on a `coordination.k8s.io` Lease (kube-lease-manager): only the leader
//! reconciles; standbys keep their sources synced and wait.

use std::time::Duration;

use kube::Client;
use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::metrics::{self, METRICS};

/// Leader election settings; the defaults are controller-runtime's.
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
    /// How often the leader renews the Lease (2 s).
    pub retry_period: Duration,
}

/// A running election: `leader` turns true while this process holds the Lease.
pub struct Election {
    /// True while leader.
    pub leader: watch::Receiver<bool>,
    task: JoinHandle<Result<kube_lease_manager::LeaseManager, LeaseManagerError>>,
}

impl Election {
    /// Joins the election.
    pub async fn start(client: Client, settings: &Settings) -> Result<Election, LeaseManagerError> {
        let duration = settings.lease_duration.as_secs().max(2);
        // kube-lease-manager renews once less than `grace` is left: renewing a retry
        // period after each renewal gives the leader the rest of the Lease to succeed.
        let grace = duration
            .saturating_sub(settings.retry_period.as_secs())
            .clamp(1, duration - 1);
        let manager = LeaseManagerBuilder::new(client, &settings.name)
            .with_namespace(&settings.namespace)
            .with_identity(&settings.identity)
            .with_duration(duration)
            .with_grace(grace)
            .with_field_manager(crate::labels::FIELD_MANAGER)
            .build()
            .await?;
        let (leader, task) = manager.watch().await;
        let gauge = METRICS
            .leader_election_master_status
            .get_or_create(&metrics::queue(&settings.name))
            .clone();
        let mut observe = leader.clone();
        tokio::spawn(async move {
            loop {
                gauge.set(i64::from(*observe.borrow_and_update()));
                if observe.changed().await.is_err() {
                    gauge.set(0);
                    return;
                }
            }
        });
        Ok(Election { leader, task })
    }

    /// Waits until this process leads.
    pub async fn acquired(&mut self) {
        while !*self.leader.borrow_and_update() {
            if self.leader.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Waits until this process stops leading.
    pub async fn lost(&mut self) {
        while *self.leader.borrow_and_update() {
            if self.leader.changed().await.is_err() {
                return;
            }
        }
    }

    /// Leaves the election, releasing the Lease if held.
    pub async fn release(self) {
        drop(self.leader);
        match self.task.await {
            Ok(Ok(_)) => tracing::info!("released the leader Lease"),
            Ok(Err(e)) => tracing::warn!(error = %e, "could not release the leader Lease"),
            Err(e) => tracing::warn!(error = %e, "the leader election task failed"),
        }
    }
}
