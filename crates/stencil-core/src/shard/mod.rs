//! Sharding decisions, with no client: which member owns a parent, what the sharder does
//! to bring a parent's `stencil.dev/shard` label in line with the live members, and what
//! a member does with a parent it finds in its share.
//!
//! Ownership is rendezvous hashing of the parent's UID over the ready members: each
//! member scores `sha256(member, uid)` and the highest score wins. A member joining takes
//! about `1/n` of the parents, from every other member alike, and a member leaving
//! spreads its own parents over the rest; no other parent moves.
//!
//! A parent moves in one of two ways. From a member that is gone (its Lease released,
//! deleted, or taken over by the sharder after it expired), the sharder relabels it at
//! once: nobody else can be reconciling it. From a member that is still ready (a
//! rebalance), the sharder first adds `stencil.dev/drain`; the old member acknowledges by
//! removing both labels inside its reconcile of that parent, so no reconcile of its own
//! is still running; only then does the sharder assign the unlabelled parent anew.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::labels::{DRAIN, SHARD};

/// The member that owns `uid` among `members`: the highest rendezvous score, ties going
/// to the smaller name. `None` when there is no member.
pub fn owner<'m>(uid: &str, members: impl IntoIterator<Item = &'m str>) -> Option<&'m str> {
    members
        .into_iter()
        .map(|m| (score(m, uid), m))
        .max_by(|(a, ma), (b, mb)| a.cmp(b).then_with(|| mb.cmp(ma)))
        .map(|(_, m)| m)
}

fn score(member: &str, uid: &str) -> u64 {
    crate::digest::pair(member, uid)
}

/// What the sharder knows of a member, from its membership Lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// Renewed within the Lease duration, as this process observed it: it takes parents.
    Ready,
    /// No renewal observed for a Lease duration, and the Lease not yet taken over: its
    /// parents wait, since a paused member may still hold them until the takeover fences
    /// it out.
    Expired,
}

/// The ring as the sharder sees it: every member with a Lease, by name. A name that is
/// not here is gone.
#[derive(Debug, Clone, Default)]
pub struct Ring {
    members: BTreeMap<String, MemberState>,
}

impl Ring {
    /// A ring of these members.
    pub fn new(members: impl IntoIterator<Item = (String, MemberState)>) -> Ring {
        Ring {
            members: members.into_iter().collect(),
        }
    }

    /// The ready members, by name.
    pub fn ready(&self) -> impl Iterator<Item = &str> {
        self.members
            .iter()
            .filter(|(_, s)| **s == MemberState::Ready)
            .map(|(m, _)| m.as_str())
    }

    /// A member's state; `None` when it is gone.
    pub fn state(&self, member: &str) -> Option<MemberState> {
        self.members.get(member).copied()
    }
}

/// Where a parent stands, from its labels.
#[derive(Debug, Clone, Copy)]
pub struct Placement<'a> {
    /// The parent's UID.
    pub uid: &'a str,
    /// Its `stencil.dev/shard` label.
    pub shard: Option<&'a str>,
    /// Whether it carries `stencil.dev/drain`.
    pub draining: bool,
}

impl<'a> Placement<'a> {
    /// The placement a parent's labels say.
    pub fn of(uid: &'a str, labels: Option<&'a BTreeMap<String, String>>) -> Placement<'a> {
        Placement {
            uid,
            shard: labels.and_then(|l| l.get(SHARD)).map(String::as_str),
            draining: labels.is_some_and(|l| l.contains_key(DRAIN)),
        }
    }
}

/// A label change the sharder makes on a parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Move {
    /// Set `stencil.dev/shard` to this member and drop any drain label: the parent is
    /// unassigned, or its member is gone.
    Assign(String),
    /// Add `stencil.dev/drain`: its ready member must let it go before another takes it.
    Drain,
}

/// The sharder's next step for one parent, or `None` when it is where it belongs or
/// waiting (for a drain's acknowledgement, for an expired member's Lease to be taken
/// over, or for any member at all).
pub fn plan(parent: Placement<'_>, ring: &Ring) -> Option<Move> {
    let target = owner(parent.uid, ring.ready())?;
    match parent.shard {
        None => Some(Move::Assign(target.to_string())),
        Some(current) => match ring.state(current) {
            Some(MemberState::Ready) if current == target || parent.draining => None,
            Some(MemberState::Ready) => Some(Move::Drain),
            Some(MemberState::Expired) => None,
            None => Some(Move::Assign(target.to_string())),
        },
    }
}

/// What a member does with a parent its watch delivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Duty {
    /// Labelled with this member and not draining: reconcile it.
    Reconcile,
    /// Labelled with this member and draining: write nothing for it, and remove both
    /// labels to hand it over.
    Release,
    /// Not this member's (the watch lags a relabel): leave it alone.
    Skip,
}

/// This member's duty for a parent placed at `parent`.
pub fn duty(parent: Placement<'_>, member: &str) -> Duty {
    match parent.shard {
        Some(shard) if shard == member && parent.draining => Duty::Release,
        Some(shard) if shard == member => Duty::Reconcile,
        _ => Duty::Skip,
    }
}

/// Membership Leases as this process observes them. A member is ready while its last
/// observed renewal is younger than the Lease duration on this process's monotonic
/// clock, counted from when the renewal was seen, never from the `renewTime` it wrote:
/// a member whose clock runs ahead or behind expires no earlier than the duration after
/// its last renewal reached this process, by which time its own fence, closed at the
/// renew deadline on its own clock, has stopped its writes.
#[derive(Debug, Clone)]
pub struct Leases {
    duration: Duration,
    seen: BTreeMap<String, Seen>,
    /// Leases with no holder (released at a clean shutdown, or not yet taken by a
    /// starting member), since when.
    released: BTreeMap<String, Instant>,
}

#[derive(Debug, Clone)]
struct Seen {
    /// What identifies a renewal: the holder and its renewTime as written.
    renewal: (String, String),
    at: Instant,
}

impl Leases {
    /// Leases that expire `duration` after their last observed renewal.
    pub fn new(duration: Duration) -> Leases {
        Leases {
            duration,
            seen: BTreeMap::new(),
            released: BTreeMap::new(),
        }
    }

    /// Records a member's Lease as observed at `now`: held by `holder` (none once
    /// released), renewed at `renewed` as the holder wrote it. A Lease held by another
    /// identity than the member's own (the sharder took it over) or by none counts as
    /// gone.
    pub fn observe(&mut self, member: &str, holder: Option<&str>, renewed: &str, now: Instant) {
        let Some(holder) = holder.filter(|h| *h == member) else {
            self.seen.remove(member);
            self.released.entry(member.to_string()).or_insert(now);
            return;
        };
        self.released.remove(member);
        let renewal = (holder.to_string(), renewed.to_string());
        match self.seen.get_mut(member) {
            Some(seen) if seen.renewal == renewal => {}
            Some(seen) => *seen = Seen { renewal, at: now },
            None => {
                self.seen.insert(member.to_string(), Seen { renewal, at: now });
            }
        }
    }

    /// Forgets a member whose Lease was deleted.
    pub fn remove(&mut self, member: &str) {
        self.seen.remove(member);
        self.released.remove(member);
    }

    /// Members whose Lease has had no holder for a Lease duration at `now`: left for good
    /// (a Pod replaced by a rollout), their Lease only clutter. A starting member takes
    /// its new Lease within a second, so its Lease is never among them.
    pub fn departed(&self, now: Instant) -> Vec<String> {
        self.released
            .iter()
            .filter(|(_, since)| now.saturating_duration_since(**since) >= self.duration)
            .map(|(m, _)| m.clone())
            .collect()
    }

    /// The ring at `now`.
    pub fn ring(&self, now: Instant) -> Ring {
        Ring::new(self.seen.iter().map(|(m, seen)| {
            let state = if now.saturating_duration_since(seen.at) < self.duration {
                MemberState::Ready
            } else {
                MemberState::Expired
            };
            (m.clone(), state)
        }))
    }

    /// When the next ready member expires unless renewed: the sharder looks again then.
    pub fn next_expiry(&self, now: Instant) -> Option<Instant> {
        self.seen
            .values()
            .map(|s| s.at + self.duration)
            .filter(|at| *at > now)
            .min()
    }
}

#[cfg(test)]
mod tests;
