//! The renew deadline, enforced where writes leave the process. A leader may write only
//! while its last Lease renewal is younger than the renew deadline, which is shorter than
//! the Lease duration: by the time a standby may take the Lease, the old leader has
//! stopped writing, whatever its tasks were doing (client-go's `renewDeadline <
//! leaseDuration`, checked per request instead of per loop).
//!
//! The bound this leaves: a write is checked when it is handed to the client, not when
//! its bytes reach the API server. On the client's open connection that is the same
//! moment; a write that must open a new connection first may land up to the connect time
//! later. The margin between the renew deadline and the Lease duration (5 s with the
//! defaults, 10 s and 15 s) covers that unless connecting itself takes longer.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use http::{Method, Request};
use prometheus_client::metrics::counter::Counter;

use crate::metrics::{Metrics, ResultLabel};

/// Whether this process may write now; shared by the election and the client layer.
#[derive(Clone)]
pub struct Fence {
    inner: Arc<State>,
    /// Fences that must allow a write too (a sharded leader writes under its membership
    /// Lease and the leader Lease at once); their counters are not touched.
    also: Vec<Arc<State>>,
}

struct State {
    /// Without an election, writes are always allowed.
    elected: bool,
    deadline: Duration,
    valid_until: Mutex<Option<Instant>>,
    /// Closed for good: the Lease was lost or released, and no renewal seen later (one
    /// already on its way when the process stopped leading) may reopen it.
    sealed: std::sync::atomic::AtomicBool,
    sent: Counter,
    refused: Counter,
}

impl State {
    fn allows(&self) -> bool {
        !self.elected
            || self
                .valid_until
                .lock()
                .expect("fence lock")
                .is_some_and(|until| Instant::now() < until)
    }
}

/// A write refused because the renew deadline had passed.
#[derive(Debug, thiserror::Error)]
#[error(
    "refused {method} {path}: this process's last Lease renewal is older than the renew deadline ({seconds} s), so it no longer leads"
)]
pub struct Fenced {
    /// The request's method.
    pub method: Method,
    /// The request's path.
    pub path: String,
    /// The renew deadline.
    pub seconds: u64,
}

impl Fence {
    /// A fence that never closes: for a process that runs without leader election.
    pub fn open(metrics: &Metrics) -> Fence {
        Fence::new(false, Duration::ZERO, metrics)
    }

    /// A closed fence that opens for `deadline` after each renewal.
    pub fn elected(deadline: Duration, metrics: &Metrics) -> Fence {
        Fence::new(true, deadline, metrics)
    }

    fn new(elected: bool, deadline: Duration, metrics: &Metrics) -> Fence {
        let counter = |result: &str| {
            metrics
                .fenced_writes_total
                .get_or_create(&ResultLabel { result: result.into() })
                .clone()
        };
        Fence {
            also: Vec::new(),
            inner: Arc::new(State {
                elected,
                deadline,
                valid_until: Mutex::new(None),
                sealed: std::sync::atomic::AtomicBool::new(false),
                sent: counter("sent"),
                refused: counter("refused"),
            }),
        }
    }

    /// This fence, closed also whenever `other` is: writes pass only while both allow.
    /// Sent and refused writes are counted on this fence alone.
    pub fn and(&self, other: &Fence) -> Fence {
        let mut also = self.also.clone();
        also.push(other.inner.clone());
        also.extend(other.also.iter().cloned());
        Fence {
            inner: self.inner.clone(),
            also,
        }
    }

    /// Records a renewal made at `renewed` (the Lease's renewTime, which this process
    /// wrote with its own clock): writes are allowed until `renewed + deadline`. A renewal
    /// older than one already seen changes nothing, so an event delivered late cannot
    /// reopen the fence.
    pub fn renewed(&self, renewed: SystemTime) {
        if self.inner.sealed.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let age = SystemTime::now().duration_since(renewed).unwrap_or(Duration::ZERO);
        let Some(until) = (Instant::now() + self.inner.deadline).checked_sub(age) else {
            return;
        };
        let mut valid = self.inner.valid_until.lock().expect("fence lock");
        if valid.is_none_or(|v| until > v) {
            *valid = Some(until);
        }
    }

    /// Closes the fence at once (the Lease names another holder); a renewal of its own
    /// may open it again.
    pub fn close(&self) {
        *self.inner.valid_until.lock().expect("fence lock") = None;
    }

    /// Closes the fence for good: this process stopped leading (or holding its
    /// membership) and exits; a renewal it made just before, reported late, opens
    /// nothing.
    pub fn seal(&self) {
        self.inner.sealed.store(true, std::sync::atomic::Ordering::SeqCst);
        self.close();
    }

    /// When the fence closes unless a renewal comes first; none when it is closed already
    /// (or never closes).
    pub fn closes_at(&self) -> Option<Instant> {
        *self.inner.valid_until.lock().expect("fence lock")
    }

    /// Whether a write may leave now.
    pub fn allows(&self) -> bool {
        std::iter::once(&self.inner).chain(&self.also).all(|s| s.allows())
    }

    /// Writes sent and refused so far.
    pub fn counts(&self) -> (u64, u64) {
        (self.inner.sent.get(), self.inner.refused.get())
    }

    /// Lets a request through, or refuses it when it writes and the fence is closed.
    ///
    /// # Errors
    ///
    /// A write while the fence is closed ([`Fenced`]); reads always pass.
    pub fn check<B>(&self, req: Request<B>) -> Result<Request<B>, Fenced> {
        if req.method() == Method::GET {
            return Ok(req);
        }
        if self.allows() {
            self.inner.sent.inc();
            return Ok(req);
        }
        self.inner.refused.inc();
        let refused = Fenced {
            method: req.method().clone(),
            path: req.uri().path().to_string(),
            seconds: self.inner.deadline.as_secs(),
        };
        tracing::warn!("{refused}");
        Err(refused)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write() -> Request<()> {
        Request::builder()
            .method(Method::PATCH)
            .uri("/api/v1/x")
            .body(())
            .unwrap()
    }

    #[test]
    fn an_elected_fence_refuses_writes_until_a_renewal() {
        let fence = Fence::elected(Duration::from_secs(10), &Metrics::new());
        assert!(fence.check(write()).is_err());
        fence.renewed(SystemTime::now());
        assert!(fence.check(write()).is_ok());
        assert!(
            Fence::elected(Duration::from_secs(1), &Metrics::new())
                .check(Request::builder().uri("/").body(()).unwrap())
                .is_ok(),
            "reads always pass"
        );
        assert_eq!(fence.counts(), (1, 1));
    }

    #[test]
    fn a_renewal_older_than_the_deadline_leaves_the_fence_closed() {
        let fence = Fence::elected(Duration::from_secs(10), &Metrics::new());
        fence.renewed(SystemTime::now() - Duration::from_secs(11));
        assert!(!fence.allows());
        fence.renewed(SystemTime::now() - Duration::from_secs(2));
        let left = fence.closes_at().unwrap() - Instant::now();
        assert!(
            left <= Duration::from_secs(8) && left > Duration::from_secs(7),
            "{left:?}"
        );
    }

    #[test]
    fn a_late_event_cannot_reopen_a_fence_past_a_newer_renewal() {
        let fence = Fence::elected(Duration::from_secs(10), &Metrics::new());
        fence.renewed(SystemTime::now());
        let until = fence.closes_at().unwrap();
        fence.renewed(SystemTime::now() - Duration::from_secs(5));
        assert_eq!(fence.closes_at(), Some(until));
        fence.close();
        assert!(!fence.allows());
    }

    #[test]
    fn a_joined_fence_allows_only_while_both_do() {
        let metrics = Metrics::new();
        let member = Fence::elected(Duration::from_secs(10), &metrics);
        let leader = Fence::elected(Duration::from_secs(10), &metrics);
        let both = member.and(&leader);
        member.renewed(SystemTime::now());
        assert!(!both.allows(), "the leader Lease is not renewed");
        leader.renewed(SystemTime::now());
        assert!(both.allows());
        leader.close();
        assert!(both.check(write()).is_err());
        assert!(member.allows(), "the member's own writes go on");
    }

    #[test]
    fn a_sealed_fence_stays_closed_whatever_renewal_comes() {
        let fence = Fence::elected(Duration::from_secs(10), &Metrics::new());
        fence.renewed(SystemTime::now());
        fence.seal();
        fence.renewed(SystemTime::now());
        assert!(!fence.allows());
        assert!(fence.check(write()).is_err());
    }

    #[test]
    fn without_election_every_write_passes() {
        assert!(Fence::open(&Metrics::new()).check(write()).is_ok());
    }
}
