//! What a controller keeps about each parent between passes, in one place under one lock:
//! when its oldest unserved request arrived, how often it failed in a row, what the API
//! server refused it, the conflict it last reported, the end of its finalize step, a
//! decorator's outcome, the child writes its store may not hold yet, and the reverse
//! indexes from objects to the parents that read or wait for them. Forgetting a parent
//! drops all of it at once. The children created but not yet shown by their watch are
//! kept here too ([`Unseen`]), by parent uid; they expire by themselves.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use kube::api::DynamicObject;
use kube::runtime::reflector::ObjectRef;
use serde_json::Value;

use super::readers::{LookupSelection, Readers};
use super::unseen::Unseen;
use crate::object_key::ObjectKey;

/// A parent, as the controller's queue and the ledger name it.
pub(super) type ParentKey = ObjectRef<DynamicObject>;

/// One parent's record; a record with nothing in it is not kept.
#[derive(Debug, Default, PartialEq)]
struct Record {
    pending_since: Option<Instant>,
    /// Failed passes in a row whose error is not an unreachable API server.
    failures: u32,
    /// Failed passes in a row for want of an API server: counted apart, so an outage's
    /// retries do not lengthen the backoff of the first error after it.
    unreachable: u32,
    forbidden: Option<String>,
    conflict: Option<String>,
    finalized: Option<Value>,
    /// A decorator's last word, once it has one.
    outcome: Option<DecoratorOutcome>,
    /// Children written by recent passes, until their store holds the write.
    written: Vec<Written>,
    /// The watch events this controller's own writes of the current or last pass will
    /// cause, as (uid, resourceVersion): nothing new for the parent.
    echoes: Vec<(String, String)>,
    /// A pass of the parent is running.
    in_pass: bool,
    /// An echo was let go during the current pass.
    swallowed: bool,
    /// The current pass ended with nothing left to wait for.
    clean: bool,
}

/// A decorator's word on one decorated object.
#[derive(Debug, PartialEq)]
pub(super) enum DecoratorOutcome {
    /// Every child is ready.
    Ready,
    /// Not every child is: the reason and message a composite parent's `Ready` would
    /// carry.
    NotReady { reason: String, message: String },
}

/// What a pass finds in its parent's record when it begins.
pub(super) struct Begun {
    /// When the oldest request the pass serves arrived.
    pub(super) since: Option<Instant>,
    /// The conflict the parent last reported, so that it is said once.
    pub(super) conflict: Option<String>,
}

/// What a pass that reached its answer leaves in its parent's record.
#[derive(Debug, Default)]
pub(super) struct Left {
    /// The conflict it reported (`None`: it has none).
    pub(super) conflict: Option<String>,
    /// The objects it waits for another to let go: their going wakes it.
    pub(super) waits_for: Vec<ObjectKey>,
    /// It found everything in place: the echoes of its writes tell it nothing.
    pub(super) clean: bool,
}

/// How a pass went, for the parent's failure count and refusals.
pub(super) enum Verdict {
    Succeeded,
    /// It failed; a request the API server refused says what is needed.
    Failed {
        refused: Option<String>,
    },
}

/// How many parents have a pending request, a failure count and named reads (tests).
#[cfg(test)]
#[derive(Debug, Default, PartialEq)]
pub(super) struct Tracked {
    pub(super) pending: usize,
    pub(super) failing: usize,
    pub(super) reading: usize,
}

/// A child write whose answer the child's store may not hold yet.
#[derive(Debug, PartialEq)]
struct Written {
    uid: String,
    hash: String,
    at: Instant,
}

/// How long a write is taken to explain a store that shows the child as before it. A
/// watch event normally follows its write within milliseconds; past this, the store is
/// trusted again (a change by another hand since is then corrected).
pub(super) const STORE_LAG: Duration = Duration::from_secs(10);

/// Every parent's record, and who reads or waits for which object.
#[derive(Default)]
pub(super) struct Ledger {
    records: HashMap<ParentKey, Record>,
    /// The named lookups each parent read.
    readers: Readers,
    /// The selections each parent's selector lookups read.
    selections: Readers<LookupSelection>,
    /// Objects each parent would write but another holds: their going wakes the parent.
    waiting: Readers,
    /// Children created that their watch has not shown yet.
    pub(super) unseen: Unseen,
}

impl Ledger {
    fn record(&mut self, parent: &ParentKey) -> &mut Record {
        self.records.entry(parent.clone()).or_default()
    }

    /// Drops `parent`'s record when nothing is left in it, so the ledger holds only the
    /// parents that have something to remember.
    fn tidy(&mut self, parent: &ParentKey) {
        if self.records.get(parent).is_some_and(|r| *r == Record::default()) {
            self.records.remove(parent);
        }
    }

    /// Notes a request for `parent`, keeping the time of the oldest one not yet served.
    pub(super) fn requested(&mut self, parent: &ParentKey) {
        self.record(parent).pending_since.get_or_insert_with(Instant::now);
    }

    /// A pass failed, for want of an API server (`unreachable`) or otherwise; returns
    /// how many in a row failed that way (at most `cap`).
    pub(super) fn failed(&mut self, parent: &ParentKey, unreachable: bool, cap: u32) -> u32 {
        let r = self.record(parent);
        let count = if unreachable {
            &mut r.unreachable
        } else {
            &mut r.failures
        };
        *count = (*count + 1).min(cap);
        *count
    }

    /// The first refusal by text, and how many parents have one.
    pub(super) fn refusals(&self) -> Option<(&str, usize)> {
        let all: Vec<&str> = self.records.values().filter_map(|r| r.forbidden.as_deref()).collect();
        all.iter().min().map(|first| (*first, all.len()))
    }

    /// The end of `parent`'s finalize step, when it ended.
    pub(super) fn finalized(&self, parent: &ParentKey) -> Option<Value> {
        self.records.get(parent)?.finalized.clone()
    }

    /// Records the end of `parent`'s finalize step.
    pub(super) fn finish(&mut self, parent: &ParentKey, condition: Value) {
        self.record(parent).finalized = Some(condition);
    }

    /// Records a decorator's outcome for `parent`.
    pub(super) fn outcome(&mut self, parent: &ParentKey, outcome: DecoratorOutcome) {
        self.record(parent).outcome = Some(outcome);
    }

    /// A decorator's outcome for `parent`, once it has one.
    pub(super) fn outcome_of(&self, parent: &ParentKey) -> Option<&DecoratorOutcome> {
        self.records.get(parent)?.outcome.as_ref()
    }

    /// What `parent` reads: named lookups and selections.
    pub(super) fn reads(&mut self, parent: &ParentKey, named: Vec<ObjectKey>, selections: Vec<LookupSelection>) {
        self.readers.set(parent, named);
        self.selections.set(parent, selections);
    }

    /// The parents that read `key` as a named lookup.
    pub(super) fn readers_of(&self, key: &ObjectKey) -> Vec<ParentKey> {
        self.readers.readers(key)
    }

    /// The parents waiting for `key` to be let go.
    pub(super) fn waiting_for(&self, key: &ObjectKey) -> Vec<ParentKey> {
        self.waiting.readers(key)
    }

    /// The parents whose selections `matches` accepts.
    pub(super) fn selecting(&self, matches: impl Fn(&LookupSelection) -> bool) -> Vec<ParentKey> {
        let hit: Vec<&LookupSelection> = self.selections.read().filter(|s| matches(s)).collect();
        hit.into_iter().flat_map(|s| self.selections.readers(s)).collect()
    }

    /// Every parent something is kept about.
    pub(super) fn parents(&self) -> Vec<ParentKey> {
        let mut all: Vec<ParentKey> = self
            .records
            .keys()
            .chain(self.readers.parents())
            .chain(self.selections.parents())
            .chain(self.waiting.parents())
            .cloned()
            .collect();
        all.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        all.dedup();
        all
    }

    /// Notes that this pass wrote child `uid` with the applied-hash `hash`.
    pub(super) fn wrote(&mut self, parent: &ParentKey, uid: &str, hash: &str) {
        let written = &mut self.record(parent).written;
        written.retain(|w| w.uid != uid);
        written.push(Written {
            uid: uid.to_string(),
            hash: hash.to_string(),
            at: Instant::now(),
        });
    }

    /// Whether the store's copy of child `uid` (with the applied-hash `stored`) is older
    /// than this controller's own recent write of `desired`: a pass that runs before the
    /// write's watch event arrives (woken by the parent's status write, say) then writes
    /// nothing again. A write the store holds is forgotten.
    pub(super) fn behind(&mut self, parent: &ParentKey, uid: &str, stored: Option<&str>, desired: &str) -> bool {
        let Some(record) = self.records.get_mut(parent) else {
            return false;
        };
        let now = Instant::now();
        record
            .written
            .retain(|w| now.duration_since(w.at) < STORE_LAG && !(w.uid == uid && Some(w.hash.as_str()) == stored));
        let behind = stored != Some(desired) && record.written.iter().any(|w| w.uid == uid && w.hash == desired);
        self.tidy(parent);
        behind
    }

    /// A pass of `parent` begins: the oldest unserved request is served, echoes of
    /// earlier passes are no longer expected, and the pass is handed what it reported
    /// before.
    pub(super) fn begin(&mut self, parent: &ParentKey) -> Begun {
        let record = self.record(parent);
        record.echoes.clear();
        record.in_pass = true;
        record.swallowed = false;
        record.clean = false;
        Begun {
            since: record.pending_since.take(),
            conflict: record.conflict.clone(),
        }
    }

    /// The watch will report this write of the current pass as `uid` at `version`.
    pub(super) fn expect_echo(&mut self, parent: &ParentKey, uid: &str, version: &str) {
        self.record(parent).echoes.push((uid.to_string(), version.to_string()));
    }

    /// Whether an event of `uid` at `version` is the echo of a write of `parent`'s own,
    /// which then wakes nothing. Each echo is let go once.
    pub(super) fn echo(&mut self, parent: &ParentKey, uid: &str, version: &str) -> bool {
        let Some(record) = self.records.get_mut(parent) else {
            return false;
        };
        let Some(i) = record.echoes.iter().position(|(u, v)| u == uid && v == version) else {
            return false;
        };
        record.echoes.swap_remove(i);
        record.swallowed |= record.in_pass;
        // The watch stores an object before it tells of it: the store holds the write.
        record.written.retain(|w| w.uid != uid);
        self.tidy(parent);
        true
    }

    /// A pass of `parent` ends with what it leaves (when it reached its answer) and how
    /// it went. Unless it ended clean, no later echo is let go, and it returns whether
    /// one was already: the pass that came of it must then be replaced.
    pub(super) fn end(&mut self, parent: &ParentKey, left: Option<Left>, verdict: Verdict) -> bool {
        if let Some(left) = left {
            self.waiting.set(parent, left.waits_for);
            let record = self.record(parent);
            record.conflict = left.conflict;
            record.clean = left.clean;
        }
        let record = self.record(parent);
        match verdict {
            Verdict::Succeeded => {
                record.failures = 0;
                record.unreachable = 0;
                record.forbidden = None;
            }
            Verdict::Failed { refused: Some(needed) } => record.forbidden = Some(needed),
            Verdict::Failed { refused: None } => {}
        }
        let replace = !record.clean && record.swallowed;
        if !record.clean {
            record.echoes.clear();
        }
        record.in_pass = false;
        record.swallowed = false;
        record.clean = false;
        self.tidy(parent);
        replace
    }

    /// Drops everything kept about `parent`.
    pub(super) fn forget(&mut self, parent: &ParentKey) {
        self.records.remove(parent);
        self.readers.forget(parent);
        self.selections.forget(parent);
        self.waiting.forget(parent);
    }

    /// How many parents the ledger keeps something for (tests).
    #[cfg(test)]
    pub(super) fn tracked(&self) -> Tracked {
        Tracked {
            pending: self.records.values().filter(|r| r.pending_since.is_some()).count(),
            failing: self.records.values().filter(|r| r.failures + r.unreachable > 0).count(),
            reading: self.readers.parents().count(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::{ApiResource, GroupVersionKind};

    fn parent() -> ParentKey {
        let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("example.org", "v1", "Widget"), "widgets");
        ObjectRef::new_with("w", ar).within("ns")
    }

    #[test]
    fn the_echo_of_a_clean_pass_wakes_nothing_once() {
        let (mut ledger, p) = (Ledger::default(), parent());
        ledger.begin(&p);
        ledger.wrote(&p, "child", "hash");
        ledger.expect_echo(&p, "child", "7");
        let left = Left {
            clean: true,
            ..Left::default()
        };
        assert!(
            !ledger.end(&p, Some(left), Verdict::Succeeded),
            "a clean pass gives nothing back"
        );
        assert!(!ledger.echo(&p, "child", "6"), "another version is news");
        assert!(ledger.echo(&p, "child", "7"), "the write's own event is not");
        assert!(!ledger.echo(&p, "child", "7"), "once");
        assert_eq!(ledger.tracked(), Tracked::default());
        assert!(ledger.records.is_empty(), "nothing is kept once the echo came");
    }

    #[test]
    fn an_echo_let_go_during_a_pass_that_then_waits_is_given_back() {
        let (mut ledger, p) = (Ledger::default(), parent());
        ledger.begin(&p);
        ledger.expect_echo(&p, "child", "7");
        assert!(ledger.echo(&p, "child", "7"), "arrives while the pass runs");
        // The pass ends with a child held back: the echo's wake-up is owed.
        assert!(ledger.end(&p, Some(Left::default()), Verdict::Succeeded));
        ledger.begin(&p);
        ledger.expect_echo(&p, "child", "8");
        assert!(
            !ledger.end(&p, None, Verdict::Failed { refused: None }),
            "nothing was let go"
        );
        assert!(
            !ledger.echo(&p, "child", "8"),
            "an unclean pass expects no echo after it"
        );
    }
}
