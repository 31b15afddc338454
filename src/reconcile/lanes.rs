//! Which pass runs first, and when it reaches the controller's work queue. Every parent
//! event waits in one of two lanes and goes to the queue only while fewer passes run and
//! wait there than the controller runs at once:
//! - new work (a parent seen for the first time, one whose spec changed, one being
//!   deleted) goes first;
//! - a pass that only re-checks a parent (a child's or a lookup's event, a relist, a
//!   nudge, a resync) goes only when no new work waits. A new parent waits behind the
//!   passes already running, never behind a resync or a relist of every parent.
//!
//! The price is the moment between a pass's end and the next one's start (about a
//! millisecond): while re-checks alone keep the queue full (passes of a few
//! milliseconds, nothing to write), they ran about a third fewer a second than when
//! they all waited in the controller's queue (the bench's `recheck` part). A pass that
//! writes takes a hundred times longer: a burst of 10,000 new parents (B1) converged
//! within the spread of runs with new parents sent straight to the queue.
//!
//! Within each lane, parents take turns by namespace ([`turns`]): a burst of 10,000 new
//! parents in one namespace delays another namespace's new parent by a pass or so, not by
//! the burst. Within a namespace, first come, first served.
//!
//! The priority is strict, as in controller-runtime's priority queue: while new work
//! keeps the queue full, re-checks wait; they run as soon as it drains.
//!
//! A restart sees every parent for the first time; a parent whose status says its spec
//! was served (`observedGeneration`) is a re-check then. The first wave of a restart
//! waits in the lane (under 1 KiB a parent) instead of in the controller's queue (about
//! 2.5 KiB a parent, measured with heaptrack), and a parent created during it goes first.

mod turns;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use kube::api::ObjectMeta;
use tokio::sync::Notify;

use super::context::ParentKey;
use turns::Turns;

/// What a parent's spec was when last seen: its generation and whether it was being
/// deleted (a deletion does not always move the generation).
type Seen = (Option<i64>, bool);

/// The two lanes and what the controller's queue holds, without a clock or a channel.
#[derive(Default)]
struct Queue {
    /// Passes the controller runs at once.
    room: usize,
    /// Passes running.
    running: usize,
    /// Parents sent to the controller whose pass has not started.
    queued: HashSet<ParentKey>,
    /// New work waiting.
    fresh: Turns,
    /// Re-checks held.
    held: Turns,
    /// The spec of each parent last seen, by UID.
    seen: HashMap<String, Seen>,
}

impl Queue {
    /// Whether a parent event brings something new: a spec changed or a deletion begun
    /// since the lane last saw the parent, or, the first time it sees one, a spec its
    /// status does not say was served (`served`, its `observedGeneration`). A restart
    /// finds every parent for the first time; those already served are re-checks, so
    /// a new parent does not wait behind them and the controller's queue does not hold
    /// them all at once. Remembers what it saw.
    fn is_new(&mut self, meta: &ObjectMeta, served: Option<i64>) -> bool {
        let Some(uid) = &meta.uid else { return true };
        let now = (meta.generation, meta.deletion_timestamp.is_some());
        match self.seen.insert(uid.clone(), now) {
            Some(before) => before != now,
            None => now.1 || served.is_none() || served != now.0,
        }
    }

    /// New work for `parent`: it goes ahead of every re-check, and a re-check held for it
    /// is dropped (its pass reads the parent and its children whole). It waits even when
    /// a pass of the parent is counted as queued: a change of spec or a deletion must not
    /// rest on the lane's count alone, and kube's queue merges a parent it holds already.
    fn fresh(&mut self, parent: ParentKey) {
        self.held.remove(&parent);
        self.fresh.push(parent);
    }

    /// A parent is to be re-checked once the queue has room; nothing to do when a pass
    /// is queued or waiting already.
    fn hold(&mut self, parent: ParentKey) {
        if !self.queued.contains(&parent) && !self.fresh.contains(&parent) {
            self.held.push(parent);
        }
    }

    /// The next parent the queue has room for, new work first: room while fewer passes
    /// run and wait than the concurrency. With no pass running there is room whatever
    /// the queue holds: a parent counted as queued whose pass the controller will never
    /// start must not stop the lanes.
    fn release(&mut self) -> Option<ParentKey> {
        if self.running > 0 && self.running + self.queued.len() >= self.room {
            return None;
        }
        let parent = self.fresh.pop().or_else(|| self.held.pop())?;
        self.queued.insert(parent.clone());
        Some(parent)
    }

    /// A pass of `parent` starts, from the queue or from a retry the controller timed.
    fn started(&mut self, parent: &ParentKey) {
        self.queued.remove(parent);
        self.running += 1;
    }

    /// A pass ended.
    fn ended(&mut self) {
        self.running = self.running.saturating_sub(1);
    }

    /// A parent is gone: nothing of it is queued, waiting, held or remembered.
    fn forget(&mut self, parent: &ParentKey, uid: Option<&str>) {
        self.queued.remove(parent);
        self.fresh.remove(parent);
        self.held.remove(parent);
        if let Some(uid) = uid {
            self.seen.remove(uid);
        }
    }
}

/// The lanes of one definition's controller, shared by its trigger streams and passes.
pub(super) struct Lanes {
    queue: Mutex<Queue>,
    /// Woken when the queue may have room or a re-check arrived.
    changed: Notify,
}

impl Lanes {
    /// Lanes in front of a controller that runs `concurrency` passes at once.
    pub(super) fn new(concurrency: u16) -> Arc<Lanes> {
        let queue = Queue {
            room: usize::from(concurrency.max(1)),
            ..Queue::default()
        };
        Arc::new(Lanes {
            queue: Mutex::new(queue),
            changed: Notify::new(),
        })
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().expect("lanes")
    }

    /// Sorts a parent's own event, with the generation its status says was served, into
    /// the lane of new work or of re-checks.
    pub(super) fn parent_event(&self, parent: ParentKey, meta: &ObjectMeta, served: Option<i64>) {
        let mut queue = self.queue();
        if queue.is_new(meta, served) {
            queue.fresh(parent);
        } else {
            queue.hold(parent);
        }
        drop(queue);
        self.changed.notify_one();
    }

    /// Holds a re-check of `parent` until the queue has room.
    pub(super) fn recheck(&self, parent: ParentKey) {
        self.queue().hold(parent);
        self.changed.notify_one();
    }

    /// A pass of `parent` starts; it ends when the turn is dropped.
    pub(super) fn start(self: &Arc<Self>, parent: &ParentKey) -> Turn {
        self.queue().started(parent);
        Turn { lanes: self.clone() }
    }

    /// Forgets a deleted parent.
    pub(super) fn forget(&self, parent: &ParentKey, uid: Option<&str>) {
        self.queue().forget(parent, uid);
        self.changed.notify_one();
    }

    /// Whether no re-check is held (tests).
    #[cfg(test)]
    pub(super) fn held_is_empty(&self) -> bool {
        self.queue().held.is_empty()
    }

    /// The next parent the queue has room for, or None once something changed.
    async fn next_or_wait(&self) -> Option<ParentKey> {
        let changed = self.changed.notified();
        tokio::pin!(changed);
        // Registered before the look, so a change between the look and the wait wakes it.
        changed.as_mut().enable();
        let released = self.queue().release();
        if released.is_none() {
            changed.await;
        }
        released
    }

    /// The parents of both lanes, each when the queue has room for it.
    pub(super) fn released(self: Arc<Self>) -> impl futures::Stream<Item = ParentKey> + Send + 'static {
        futures::stream::unfold(self, |lanes| async move {
            loop {
                if let Some(parent) = lanes.next_or_wait().await {
                    return Some((parent, lanes));
                }
            }
        })
    }
}

/// A running pass; dropping it frees its place in the queue.
pub(super) struct Turn {
    lanes: Arc<Lanes>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.lanes.queue().ended();
        self.lanes.changed.notify_one();
    }
}

#[cfg(test)]
mod tests;
