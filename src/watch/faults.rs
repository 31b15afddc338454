//! Watch faults for the fault suite, in `fault-injection` builds only: between a kind's
//! watch and its store, each event can arrive late (`STENCIL_FAULT_DELAY_EVENTS`), and an
//! object's updates that follow each other within the delay can reach the store as the
//! latest alone (`STENCIL_FAULT_COALESCE_EVENTS`): what a slow watch, or one that skips
//! intermediate states, shows a controller. Both name kinds and milliseconds,
//! `Kind=millis` separated by commas (`ConfigMap=300,Widget=100`).

use std::collections::VecDeque;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::api::DynamicObject;
use kube::runtime::watcher::{self, Event};
use tokio::time::Instant;

/// How late events of a kind arrive.
pub const DELAY_EVENTS: &str = "STENCIL_FAULT_DELAY_EVENTS";

/// How late events of a kind arrive, an object's updates within that time coalesced.
pub const COALESCE_EVENTS: &str = "STENCIL_FAULT_COALESCE_EVENTS";

type Item = Result<Event<DynamicObject>, watcher::Error>;

/// The faults one kind's events get.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Faults {
    /// How long each event waits before it reaches the store.
    pub delay: Duration,
    /// Whether an update replaces the one of the same object still waiting.
    pub coalesce: bool,
}

/// Reads both variables, so a wrong one stops `stencil run` before it watches anything.
///
/// # Errors
///
/// A variable that is not `Kind=millis` pairs separated by commas, naming it.
pub fn check_env() -> Result<(), String> {
    for name in [DELAY_EVENTS, COALESCE_EVENTS] {
        if let Ok(value) = std::env::var(name) {
            pairs(name, &value)?;
        }
    }
    Ok(())
}

/// The faults the environment gives `kind`: none unless a variable names it.
pub fn for_kind(kind: &str) -> Faults {
    let millis = |name: &str| {
        let value = std::env::var(name).ok()?;
        let pairs = pairs(name, &value).ok()?;
        pairs.into_iter().find(|(k, _)| k == kind).map(|(_, ms)| ms)
    };
    match (millis(COALESCE_EVENTS), millis(DELAY_EVENTS)) {
        (Some(ms), _) => Faults {
            delay: Duration::from_millis(ms),
            coalesce: true,
        },
        (None, Some(ms)) => Faults {
            delay: Duration::from_millis(ms),
            coalesce: false,
        },
        (None, None) => Faults::default(),
    }
}

fn pairs(name: &str, value: &str) -> Result<Vec<(String, u64)>, String> {
    value
        .split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|pair| {
            let parsed = pair
                .split_once('=')
                .and_then(|(kind, ms)| Some((kind.trim().to_string(), ms.trim().parse().ok()?)));
            parsed.ok_or_else(|| format!("{name}={value}: `{pair}` is not Kind=millis"))
        })
        .collect()
}

/// The events waiting to reach the store, in the order they arrived.
struct Pending {
    faults: Faults,
    queue: VecDeque<(Instant, Item)>,
}

/// Which object an update is of, for coalescing.
fn updated(item: &Item) -> Option<(Option<&str>, Option<&str>)> {
    match item {
        Ok(Event::Apply(o)) => Some((o.metadata.namespace.as_deref(), o.metadata.name.as_deref())),
        _ => None,
    }
}

impl Pending {
    /// Takes an event that arrived at `now`. Coalescing, an update takes the place of the
    /// same object's update still waiting, and keeps its time: the intermediate state
    /// never reaches the store.
    fn push(&mut self, now: Instant, item: Item) {
        if self.faults.coalesce
            && let Some(object) = updated(&item)
            && let Some(waiting) = self.queue.iter_mut().find(|(_, w)| updated(w) == Some(object))
        {
            waiting.1 = item;
            return;
        }
        self.queue.push_back((now + self.faults.delay, item));
    }

    /// The first event whose time has come.
    fn pop_due(&mut self, now: Instant) -> Option<Item> {
        if self.queue.front().is_some_and(|(due, _)| *due <= now) {
            return self.queue.pop_front().map(|(_, item)| item);
        }
        None
    }

    fn next_due(&self) -> Option<Instant> {
        self.queue.front().map(|(due, _)| *due)
    }
}

/// `events` with `faults`; unchanged when there are none.
pub fn inject(events: BoxStream<'static, Item>, faults: Faults) -> BoxStream<'static, Item> {
    if faults == Faults::default() {
        return events;
    }
    let pending = Pending {
        faults,
        queue: VecDeque::new(),
    };
    futures::stream::unfold(
        (events, pending, false),
        |(mut events, mut pending, mut ended)| async move {
            loop {
                if let Some(item) = pending.pop_due(Instant::now()) {
                    return Some((item, (events, pending, ended)));
                }
                let due = pending.next_due();
                if ended && due.is_none() {
                    return None;
                }
                tokio::select! {
                    next = events.next(), if !ended => match next {
                        Some(item) => pending.push(Instant::now(), item),
                        None => ended = true,
                    },
                    () = tokio::time::sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {}
                }
            }
        },
    )
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn apply(name: &str, version: &str) -> Item {
        let o = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": version}});
        Ok(Event::Apply(serde_json::from_value(o).unwrap()))
    }

    fn version(item: &Item) -> String {
        match item {
            Ok(Event::Apply(o) | Event::Delete(o)) => {
                format!(
                    "{}@{}",
                    o.metadata.name.clone().unwrap(),
                    o.metadata.resource_version.clone().unwrap()
                )
            }
            _ => "other".into(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn events_arrive_late_and_in_order() {
        let faults = Faults {
            delay: Duration::from_millis(300),
            coalesce: false,
        };
        let start = Instant::now();
        let events = futures::stream::iter([apply("a", "1"), apply("a", "2")]).boxed();
        let seen: Vec<(String, Duration)> = inject(events, faults)
            .map(|item| (version(&item), start.elapsed()))
            .collect()
            .await;
        assert_eq!(seen.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(), ["a@1", "a@2"]);
        assert!(seen.iter().all(|s| s.1 >= Duration::from_millis(300)), "{seen:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn coalescing_delivers_an_objects_latest_update_alone() {
        let faults = Faults {
            delay: Duration::from_millis(300),
            coalesce: true,
        };
        let events =
            futures::stream::iter([apply("a", "1"), apply("b", "1"), apply("a", "2"), apply("a", "3")]).boxed();
        let seen: Vec<String> = inject(events, faults).map(|item| version(&item)).collect().await;
        assert_eq!(seen, ["a@3", "b@1"], "a's intermediate updates never arrive");
    }

    #[test]
    fn the_environment_names_kinds_and_milliseconds() {
        assert_eq!(
            pairs(DELAY_EVENTS, "ConfigMap=300, Widget=5").unwrap(),
            [("ConfigMap".to_string(), 300), ("Widget".to_string(), 5)]
        );
        let wrong = pairs(DELAY_EVENTS, "ConfigMap").unwrap_err();
        assert!(wrong.contains("`ConfigMap` is not Kind=millis"), "{wrong}");
    }
}
