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
mod tests {
    use super::*;
    use kube::api::{ApiResource, DynamicObject};
    use kube::runtime::reflector::ObjectRef;

    fn parent(name: &str) -> ParentKey {
        let ar = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
        ObjectRef::<DynamicObject>::new_with(name, ar).within("ns")
    }

    fn meta(uid: &str, generation: i64) -> ObjectMeta {
        ObjectMeta {
            uid: Some(uid.into()),
            generation: Some(generation),
            ..ObjectMeta::default()
        }
    }

    fn queue(room: usize) -> Queue {
        Queue {
            room,
            ..Queue::default()
        }
    }

    #[test]
    fn a_parent_is_new_when_first_seen_when_its_spec_changes_and_when_its_deletion_begins() {
        let mut q = queue(2);
        assert!(q.is_new(&meta("a", 1), None));
        assert!(
            !q.is_new(&meta("a", 1), None),
            "the same generation again is a re-check"
        );
        assert!(q.is_new(&meta("a", 2), Some(1)));
        let mut deleting = meta("a", 2);
        deleting.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()));
        assert!(q.is_new(&deleting, Some(2)));
        q.forget(&parent("a"), Some("a"));
        assert!(q.is_new(&meta("a", 2), None), "a forgotten parent is seen afresh");
    }

    /// After a restart every parent is seen for the first time: one whose status says its
    /// spec was served is a re-check; one not yet served, or served at another
    /// generation, or being deleted, goes first.
    #[test]
    fn a_parent_first_seen_already_served_is_a_recheck() {
        let mut q = queue(2);
        assert!(!q.is_new(&meta("served", 3), Some(3)));
        assert!(q.is_new(&meta("edited-meanwhile", 4), Some(3)));
        assert!(q.is_new(&meta("never-served", 1), None));
        let mut deleting = meta("deleting", 3);
        deleting.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()));
        assert!(q.is_new(&deleting, Some(3)));
        assert!(q.is_new(&meta("served", 4), Some(3)), "then its next spec is new");
    }

    /// A pass of `name` running, as the controller starts it from the queue.
    fn running(q: &mut Queue, name: &str) {
        q.fresh(parent(name));
        assert_eq!(q.release(), Some(parent(name)), "{name} goes to the queue");
        q.started(&parent(name));
    }

    #[test]
    fn a_recheck_waits_while_running_and_queued_passes_fill_the_room() {
        let mut q = queue(2);
        running(&mut q, "new-1");
        q.fresh(parent("new-2"));
        q.hold(parent("old"));
        assert_eq!(q.release(), Some(parent("new-2")));
        assert_eq!(q.release(), None, "one running and one queued fill a room of two");
        q.started(&parent("new-2"));
        assert_eq!(q.release(), None, "two running fill it");
        q.ended();
        assert_eq!(q.release(), Some(parent("old")));
        assert_eq!(q.release(), None, "held once, released once");
    }

    #[test]
    fn new_work_waits_while_running_and_queued_passes_fill_the_room() {
        let mut q = queue(2);
        running(&mut q, "a");
        running(&mut q, "b");
        q.fresh(parent("c"));
        assert_eq!(q.release(), None, "two running fill a room of two");
        q.ended();
        assert_eq!(q.release(), Some(parent("c")));
    }

    #[test]
    fn a_new_parent_goes_ahead_of_every_held_recheck() {
        let mut q = queue(2);
        running(&mut q, "running");
        for i in 0..100 {
            q.hold(parent(&format!("old-{i}")));
        }
        q.fresh(parent("new"));
        assert_eq!(q.release(), Some(parent("new")));
        assert_eq!(q.release(), None, "the new parent's pass takes the room left");
        q.started(&parent("new"));
        q.ended();
        assert_eq!(q.release(), Some(parent("old-0")), "then re-checks go, oldest first");
    }

    #[test]
    fn new_parents_take_turns_by_namespace() {
        let mut q = queue(1);
        let within = |ns: &str, name: &str| parent(name).within(ns);
        for i in 0..100 {
            q.fresh(within("burst", &format!("b{i}")));
        }
        q.fresh(within("quiet", "q"));
        assert_eq!(q.release(), Some(within("burst", "b0")));
        assert_eq!(
            q.release(),
            Some(within("quiet", "q")),
            "one of the burst, then the other namespace"
        );
    }

    #[test]
    fn a_recheck_of_a_queued_a_waiting_or_a_held_parent_is_not_held_twice() {
        let mut q = queue(1);
        q.fresh(parent("a"));
        q.hold(parent("a"));
        q.fresh(parent("queued"));
        assert_eq!(q.release(), Some(parent("a")));
        q.hold(parent("a"));
        q.hold(parent("b"));
        q.hold(parent("b"));
        q.started(&parent("a"));
        q.ended();
        assert_eq!(q.release(), Some(parent("queued")));
        q.started(&parent("queued"));
        q.ended();
        assert_eq!(
            q.release(),
            Some(parent("b")),
            "a was waiting and then queued; b is held once"
        );
        assert_eq!(q.release(), None);
        q.started(&parent("b"));
        q.hold(parent("b"));
        q.ended();
        assert_eq!(
            q.release(),
            Some(parent("b")),
            "a running parent is re-checked after its pass"
        );
    }

    #[test]
    fn new_work_for_a_parent_already_queued_goes_again() {
        let mut q = queue(1);
        q.fresh(parent("a"));
        assert_eq!(q.release(), Some(parent("a")));
        q.fresh(parent("a"));
        assert_eq!(
            q.release(),
            Some(parent("a")),
            "not lost if the queued pass never starts"
        );
        q.started(&parent("a"));
        assert!(q.queued.is_empty(), "counted once");
    }

    #[test]
    fn new_work_replaces_a_held_recheck_of_the_same_parent() {
        let mut q = queue(1);
        q.hold(parent("a"));
        q.fresh(parent("a"));
        assert_eq!(q.release(), Some(parent("a")));
        q.started(&parent("a"));
        q.ended();
        assert_eq!(q.release(), None, "one pass serves both");
    }

    #[test]
    fn with_no_pass_running_a_recheck_goes_whatever_the_queue_holds() {
        let mut q = queue(1);
        q.fresh(parent("never-started"));
        assert_eq!(q.release(), Some(parent("never-started")));
        q.hold(parent("old"));
        assert_eq!(q.release(), Some(parent("old")));
        q.started(&parent("old"));
        q.hold(parent("older"));
        assert_eq!(q.release(), None, "one running fills a room of one");
    }

    #[test]
    fn a_forgotten_parent_leaves_the_queue_and_the_lanes() {
        let mut q = queue(2);
        running(&mut q, "running");
        q.fresh(parent("gone"));
        assert_eq!(q.release(), Some(parent("gone")));
        q.fresh(parent("waiting"));
        q.hold(parent("held"));
        assert_eq!(q.release(), None, "one running and one queued fill a room of two");
        q.forget(&parent("gone"), None);
        q.forget(&parent("waiting"), None);
        q.forget(&parent("held"), None);
        assert!(q.queued.is_empty() && q.fresh.is_empty() && q.held.is_empty());
        q.hold(parent("next"));
        assert_eq!(q.release(), Some(parent("next")), "the forgotten parents hold no place");
    }

    #[tokio::test]
    async fn the_released_stream_yields_a_recheck_when_a_turn_ends() {
        use futures::StreamExt;
        let lanes = Lanes::new(1);
        let turn = lanes.start(&parent("running"));
        lanes.recheck(parent("old"));
        let mut released = Box::pin(lanes.clone().released());
        let early = tokio::time::timeout(std::time::Duration::from_millis(50), released.next()).await;
        assert!(early.is_err(), "no room while a pass runs");
        drop(turn);
        let next = tokio::time::timeout(std::time::Duration::from_secs(5), released.next()).await;
        assert_eq!(next.expect("released once the turn ends"), Some(parent("old")));
    }
}
