//! The Leases one process holds: none, the leader Lease, or in a sharded ring its
//! membership Lease beside the leader Lease. They decide which fence its writes pass,
//! when it may start serving, and when it must stop.

use std::pin::Pin;

use kube::Client;

use super::{Options, RuntimeError};
use crate::leader::{Election, Fence, Leadership};
use crate::metrics::Metrics;
use crate::sharding;

/// This process's Leases.
pub(super) struct Leases {
    /// The membership Lease of a sharded ring: it lets this member write its parents.
    membership: Option<Election>,
    /// The leader Lease: unsharded, it lets this process write; sharded, it makes this
    /// member the one that assigns the parents.
    election: Option<Election>,
}

/// How the wait for the Leases ended.
pub(super) enum Wait {
    /// The Lease that lets this process write is held.
    Acquired,
    /// Told to stop first.
    ShutDown,
}

impl Leases {
    /// Joins the ring (when sharded) and the election (when there is one), as `options`
    /// ask. Nothing is held yet.
    pub(super) async fn join(unfenced: Client, options: &Options, metrics: &Metrics) -> Result<Leases, RuntimeError> {
        if options.sharding && options.leader.is_none() {
            return Err(RuntimeError::ShardingWithoutLeader);
        }
        let membership = match (&options.leader, options.sharding) {
            (Some(settings), true) => {
                Some(sharding::membership::join(unfenced.clone(), settings, &settings.name, metrics).await?)
            }
            _ => None,
        };
        let election = match &options.leader {
            Some(settings) => Some(Election::start(unfenced, settings, metrics).await?),
            None => None,
        };
        Ok(Leases { membership, election })
    }

    /// The fence this process's writes pass: a member writes under its own Lease.
    pub(super) fn fence(&self, metrics: &Metrics) -> Fence {
        match (&self.membership, &self.election) {
            (Some(m), _) => m.fence(),
            (None, Some(e)) => e.fence(),
            (None, None) => Fence::open(metrics),
        }
    }

    /// Sharded, the fence of the leader's own writes (assignments, definition status),
    /// which pass both Leases; `None` when the process's own fence serves.
    pub(super) fn leader_fence(&self) -> Option<Fence> {
        match (&self.membership, &self.election) {
            (Some(m), Some(e)) => Some(m.fence().and(&e.fence())),
            _ => None,
        }
    }

    /// Whether this process leads now, and when it will.
    pub(super) fn leadership(&self) -> Leadership {
        match (&self.membership, &self.election) {
            (Some(_), Some(e)) => e.leadership(),
            _ => Leadership::always(),
        }
    }

    /// The election a sharded member's sharder waits to win.
    pub(super) fn ring_election(&self) -> Option<&Election> {
        self.membership.as_ref().and(self.election.as_ref())
    }

    /// Waits for the Lease that lets this process write: its membership when sharded,
    /// else the leader Lease; at once when there is neither.
    pub(super) async fn acquired(
        &mut self,
        shutdown: &mut Pin<&mut impl std::future::Future<Output = ()>>,
    ) -> Result<Wait, RuntimeError> {
        let (lease, waiting, holding) = match (self.membership.as_mut(), self.election.as_mut()) {
            (Some(m), _) => (m, "joining the ring", "joined the ring"),
            (None, Some(e)) => (e, "waiting to become the leader", "became the leader"),
            (None, None) => return Ok(Wait::Acquired),
        };
        tracing::info!("{waiting}");
        tokio::select! {
            acquired = lease.acquired() => {
                acquired?;
                tracing::info!("{holding}");
                Ok(Wait::Acquired)
            }
            _ = shutdown => Ok(Wait::ShutDown),
        }
    }

    /// Resolves when this process may no longer write. Unsharded, the leader Lease is
    /// what lets it write; sharded, the membership Lease is, and the leader Lease, once
    /// held, only lets it assign parents.
    pub(super) async fn lost(&mut self) -> RuntimeError {
        match (self.membership.as_mut(), self.election.as_mut()) {
            (Some(m), Some(e)) => tokio::select! {
                () = m.lost() => RuntimeError::LostMembership,
                () = async {
                    if e.acquired().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                    e.lost().await;
                } => RuntimeError::LostLease,
            },
            (_, Some(e)) => {
                e.lost().await;
                RuntimeError::LostLease
            }
            _ => std::future::pending().await,
        }
    }

    /// Logs how many writes passed `fence` and how many it refused.
    pub(super) fn log_fence(&self, fence: &Fence) {
        let (sent, refused) = fence.counts();
        if self.membership.is_some() {
            tracing::info!(sent, refused, "writes through the member's fence");
        } else if self.election.is_some() {
            tracing::info!(sent, refused, "writes through the leader's fence");
        }
    }

    /// Leaves the ring and the election, releasing whatever Lease is held: the
    /// membership first, so the parents move at once, then the leader Lease.
    pub(super) async fn leave(self) {
        if let Some(m) = self.membership {
            m.release().await;
        }
        if let Some(e) = self.election {
            e.release().await;
        }
    }
}
