//! Parents split between the replicas of one Stencil (`stencil run --sharding`), on
//! Kubernetes' own primitives: each member holds a membership Lease named after itself
//! ([`membership`]); the leader runs the [`sharder`], which labels each parent with its
//! member (`stencil.dev/shard`); each member watches and reconciles only the parents and
//! children carrying its name. The decisions are the pure core's ([`crate::shard`]).

pub mod health;
pub mod membership;
mod placer;
pub mod sharder;
mod sync;

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use tokio::sync::watch;

use crate::gvk::Gvk;
use crate::source::{Origin, SourceEvent};

/// This process's place in a sharded ring.
#[derive(Debug, Clone)]
pub struct Member {
    /// The member's name (its membership Lease's, and its `stencil.dev/shard` value).
    pub name: String,
    /// Where the membership Leases are.
    pub namespace: String,
    /// The ring's name (`stencil.dev/ring` on each membership Lease).
    pub ring: String,
}

/// The parent kinds the sharder assigns: those of every composite definition served. A
/// decorator's parents are not sharded (they belong to others; the leader serves it).
pub struct Kinds {
    by_origin: Mutex<HashMap<Origin, Gvk>>,
    current: watch::Sender<BTreeSet<Gvk>>,
}

impl Default for Kinds {
    fn default() -> Self {
        Kinds {
            by_origin: Mutex::new(HashMap::new()),
            current: watch::Sender::new(BTreeSet::new()),
        }
    }
}

impl Kinds {
    /// Follows one source event.
    pub fn observe(&self, event: &SourceEvent) {
        let mut by_origin = self.by_origin.lock().expect("kinds lock");
        match event {
            SourceEvent::Upsert(origin, def) if !def.spec.is_decorator() => {
                by_origin.insert(origin.clone(), def.parent.clone());
            }
            SourceEvent::Upsert(origin, _) | SourceEvent::Remove(origin) => {
                by_origin.remove(origin);
            }
            SourceEvent::Invalid(..) | SourceEvent::FileInvalid(..) => return,
        }
        let now: BTreeSet<Gvk> = by_origin.values().cloned().collect();
        self.current.send_if_modified(|kinds| {
            let changed = *kinds != now;
            *kinds = now;
            changed
        });
    }

    /// The kinds now, told again whenever they change.
    pub fn subscribe(&self) -> watch::Receiver<BTreeSet<Gvk>> {
        self.current.subscribe()
    }
}
