//! When a watch's store last caught up with the API server. A store is behind while its
//! first list or a relist is under way and while its watch fails: whatever happened then
//! reaches it later. A reader that holds what the store has not shown yet (the answer
//! to a create) keeps holding it while the store is behind, and a while after.

use std::sync::Mutex;
use std::time::Instant;

/// When one watch's store last caught up; shared with whoever keeps what it may not show
/// yet.
#[derive(Debug, Default)]
pub struct CatchUp {
    /// None while the store is behind.
    since: Mutex<Option<Instant>>,
}

impl CatchUp {
    /// When the store last caught up: the end of its last (re)list, or its first event
    /// after a failure. None while it is behind.
    pub fn since(&self) -> Option<Instant> {
        *self.since.lock().expect("catch-up lock")
    }

    /// The store may miss what happens from now on: a list or watch failed, or a relist
    /// began.
    pub(super) fn fell_behind(&self) {
        *self.since.lock().expect("catch-up lock") = None;
    }

    /// The store is current from now on, if it was behind.
    pub(super) fn caught_up(&self) {
        self.since
            .lock()
            .expect("catch-up lock")
            .get_or_insert_with(Instant::now);
    }

    /// A store that caught up at `at` (tests).
    #[cfg(test)]
    pub fn caught_up_at(at: Instant) -> CatchUp {
        CatchUp {
            since: Mutex::new(Some(at)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_is_behind_until_it_catches_up_and_keeps_the_moment_it_did() {
        let store = CatchUp::default();
        assert_eq!(store.since(), None, "a new watch is behind until its first list");
        store.caught_up();
        let first = store.since().expect("caught up");
        store.caught_up();
        assert_eq!(
            store.since(),
            Some(first),
            "an event of a current store changes nothing"
        );
        store.fell_behind();
        assert_eq!(store.since(), None);
        store.caught_up();
        assert!(store.since().is_some_and(|t| t >= first));
    }
}
