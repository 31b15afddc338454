//! When a parent is looked at again with nothing changed: a timer per parent, set by a
//! pass that ends asking for its resync, whose expiry is a re-check in the [`Lanes`]
//! (so a wave of resyncs never holds a new parent back). Other waits (a retry's backoff,
//! a readiness or a rollout step timed) stay with the controller's own queue.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::controller::Action;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio_util::time::{DelayQueue, delay_queue};

use super::context::ParentKey;
use super::lanes::Lanes;

/// What the timer is told.
enum Command {
    /// Re-check the parent after this long, instead of when it was due.
    After(ParentKey, Duration),
    /// The parent's next pass is timed elsewhere, or it is gone.
    Cancel(ParentKey),
}

/// The handle passes and deletions use to set and clear resyncs.
#[derive(Clone)]
pub(super) struct Resyncs {
    commands: UnboundedSender<Command>,
}

impl Resyncs {
    /// The handle and the timer task, which runs until every handle is dropped.
    pub(super) fn start(lanes: Arc<Lanes>) -> (Resyncs, impl std::future::Future<Output = ()> + Send) {
        let (commands, received) = unbounded_channel();
        (Resyncs { commands }, run(received, lanes))
    }

    /// Takes a pass's answer: a resync it asks for is timed here and the controller is
    /// told to wait for a change; any other answer clears the parent's timer.
    pub(super) fn after_pass<E>(
        &self,
        parent: ParentKey,
        answer: Result<Action, E>,
        resync: Duration,
    ) -> Result<Action, E> {
        if matches!(&answer, Ok(action) if *action == Action::requeue(resync)) {
            let _ = self.commands.send(Command::After(parent, resync));
            return Ok(Action::await_change());
        }
        self.cancel(parent);
        answer
    }

    /// Clears a parent's timer.
    pub(super) fn cancel(&self, parent: ParentKey) {
        let _ = self.commands.send(Command::Cancel(parent));
    }
}

/// Keeps one timer per parent and hands each expiry to the re-check lane.
async fn run(mut received: UnboundedReceiver<Command>, lanes: Arc<Lanes>) {
    let mut timers: DelayQueue<ParentKey> = DelayQueue::new();
    let mut keys: HashMap<ParentKey, delay_queue::Key> = HashMap::new();
    loop {
        tokio::select! {
            command = received.recv() => match command {
                Some(Command::After(parent, after)) => match keys.get(&parent) {
                    Some(key) => timers.reset(key, after),
                    None => {
                        let key = timers.insert(parent.clone(), after);
                        keys.insert(parent, key);
                    }
                },
                Some(Command::Cancel(parent)) => {
                    if let Some(key) = keys.remove(&parent) {
                        timers.remove(&key);
                    }
                }
                None => return,
            },
            Some(expired) = timers.next(), if !timers.is_empty() => {
                let parent = expired.into_inner();
                keys.remove(&parent);
                lanes.recheck(parent);
            }
        }
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

    #[tokio::test]
    async fn a_resync_asked_for_becomes_a_recheck_when_due_and_any_other_answer_clears_it() {
        let lanes = Lanes::new(4);
        let (resyncs, timer) = Resyncs::start(lanes.clone());
        let timer = tokio::spawn(timer);
        let resync = Duration::from_millis(20);
        let asked: Result<Action, ()> = resyncs.after_pass(parent("a"), Ok(Action::requeue(resync)), resync);
        assert_eq!(asked, Ok(Action::await_change()), "the controller waits for a change");
        let waiting: Result<Action, ()> = Ok(Action::requeue(Duration::from_secs(1)));
        assert_eq!(resyncs.after_pass(parent("b"), waiting.clone(), resync), waiting);
        let cleared: Result<Action, ()> = resyncs.after_pass(parent("c"), Ok(Action::requeue(resync)), resync);
        assert!(cleared.is_ok());
        resyncs.cancel(parent("c"));
        let mut released = Box::pin(lanes.clone().released());
        let first = tokio::time::timeout(Duration::from_secs(5), released.next()).await;
        assert_eq!(first.expect("due within the deadline"), Some(parent("a")));
        drop(resyncs);
        tokio::time::timeout(Duration::from_secs(5), timer)
            .await
            .expect("the timer ends with its handles")
            .expect("the timer task");
        assert!(lanes.held_is_empty(), "c's resync was cleared, b's was never set");
    }
}
