//! Watch faults for the fault suite, in `fault-injection` builds only: between a kind's
//! watch and its store, each event can arrive late (`STENCIL_FAULT_DELAY_EVENTS`), and an
//! object's updates that follow each other within the delay can reach the store as the
//! latest alone (`STENCIL_FAULT_COALESCE_EVENTS`): what a slow watch, or one that skips
//! intermediate states, shows a controller. Both name kinds and milliseconds,
//! `Kind=millis` separated by commas (`ConfigMap=300,Widget=100`); `*` names every kind
//! the other pairs do not. At a watch's start, its first list can show the kind's
//! objects as they were at an older resourceVersion (`STENCIL_FAULT_STALE_LIST`,
//! `Kind=resourceVersion`), the current ones following as a relist: what a restarted
//! controller would read from a lagging API server or watch cache. Stencil's own lists
//! ask for the most recent state, which an API server serves consistently; the fault
//! shows what a lag would do anyway.

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

/// Serves the first list of a kind at an older resourceVersion.
pub const STALE_LIST: &str = "STENCIL_FAULT_STALE_LIST";

/// How long a stale first list stands before the watch itself starts: its first list
/// then replaces the stale one, as a relist does.
pub const STALE_FOR: Duration = Duration::from_secs(2);

/// The resourceVersion `STENCIL_FAULT_STALE_LIST` gives `kind`'s first list (`Kind=rv`,
/// `*` for every kind), if any.
pub fn stale_version(kind: &str) -> Option<String> {
    let value = std::env::var(STALE_LIST).ok()?;
    millis_for(&pairs(STALE_LIST, &value).ok()?, kind).map(|rv| rv.to_string())
}

/// `events` preceded by a stale first list: `list` (the kind's objects as they were at
/// an older resourceVersion) is served as the first list, and the watch starts
/// [`STALE_FOR`] later, its own first list arriving as a relist. What a restarted
/// controller sees from a lagging API server or watch cache. A list that cannot be
/// made (the version compacted) is logged, and the watch starts as usual.
pub fn stale_first_list(
    events: BoxStream<'static, Item>,
    list: futures::future::BoxFuture<'static, Result<Vec<DynamicObject>, kube::Error>>,
    kind: String,
) -> BoxStream<'static, Item> {
    let stale = futures::stream::once(async move {
        match list.await {
            Ok(objects) => {
                tracing::warn!(%kind, objects = objects.len(), "fault: the first list is stale");
                let mut items = vec![Ok(Event::Init)];
                items.extend(objects.into_iter().map(|o| Ok(Event::InitApply(o))));
                items.push(Ok(Event::InitDone));
                items
            }
            Err(e) => {
                tracing::error!(%kind, error = %e, "fault: the stale first list failed; the watch starts as usual");
                Vec::new()
            }
        }
    })
    .flat_map(futures::stream::iter);
    let later = futures::stream::once(async move {
        tokio::time::sleep(STALE_FOR).await;
        events
    })
    .flatten();
    stale.chain(later).boxed()
}

/// The objects of `shared`'s kind as they were at `version` (fault injection).
pub(super) fn stale_list(
    shared: &super::SharedWatch,
    client: kube::Client,
    selector: Option<String>,
    version: String,
) -> futures::future::BoxFuture<'static, Result<Vec<DynamicObject>, kube::Error>> {
    let api = shared.api(client);
    let types = kube::core::TypeMeta {
        api_version: shared.resolved.resource.api_version.clone(),
        kind: shared.resolved.resource.kind.clone(),
    };
    let mut params = kube::api::ListParams::default()
        .at(&version)
        .matching(kube::api::VersionMatch::Exact);
    params.label_selector = selector;
    Box::pin(async move {
        let listed = api.list(&params).await?;
        Ok(listed
            .items
            .into_iter()
            .map(|mut o| {
                o.types = Some(types.clone());
                o
            })
            .collect())
    })
}

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
    for name in [DELAY_EVENTS, COALESCE_EVENTS, STALE_LIST] {
        if let Ok(value) = std::env::var(name) {
            pairs(name, &value)?;
        }
    }
    Ok(())
}

/// The faults the environment gives `kind`: none unless a variable names it (or `*`).
pub fn for_kind(kind: &str) -> Faults {
    let millis = |name: &str| {
        let value = std::env::var(name).ok()?;
        millis_for(&pairs(name, &value).ok()?, kind)
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

/// The milliseconds `pairs` give `kind`: its own pair's, or else the `*` pair's.
fn millis_for(pairs: &[(String, u64)], kind: &str) -> Option<u64> {
    let named = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, ms)| *ms);
    named(kind).or_else(|| named("*"))
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

/// Which object an update or a deletion is of, for coalescing.
fn object_of(item: &Item) -> Option<(Option<&str>, Option<&str>)> {
    match item {
        Ok(Event::Apply(o) | Event::Delete(o)) => Some((o.metadata.namespace.as_deref(), o.metadata.name.as_deref())),
        _ => None,
    }
}

impl Pending {
    /// Takes an event that arrived at `now`. Coalescing, an update takes the place of the
    /// same object's update still waiting, and keeps its time: the intermediate state
    /// never reaches the store. Only the object's last waiting event is replaced, and only
    /// an update: a deletion in between stays, so the order of events never changes.
    fn push(&mut self, now: Instant, item: Item) {
        if self.faults.coalesce
            && matches!(item, Ok(Event::Apply(_)))
            && let Some(object) = object_of(&item)
            && let Some(waiting) = self.queue.iter_mut().rev().find(|(_, w)| object_of(w) == Some(object))
            && matches!(waiting.1, Ok(Event::Apply(_)))
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
        let deleted = |name: &str, version: &str| match apply(name, version) {
            Ok(Event::Apply(o)) => Ok(Event::Delete(o)),
            other => other,
        };
        let events =
            futures::stream::iter([apply("a", "1"), deleted("a", "2"), apply("a", "3"), apply("a", "4")]).boxed();
        let seen: Vec<String> = inject(events, faults).map(|item| version(&item)).collect().await;
        assert_eq!(seen, ["a@1", "a@2", "a@4"], "a deletion is never jumped over");
    }

    #[test]
    fn the_environment_names_kinds_and_milliseconds() {
        assert_eq!(
            pairs(DELAY_EVENTS, "ConfigMap=300, Widget=5").unwrap(),
            [("ConfigMap".to_string(), 300), ("Widget".to_string(), 5)]
        );
        let every = pairs(DELAY_EVENTS, "*=100,ConfigMap=300").unwrap();
        assert_eq!(millis_for(&every, "ConfigMap"), Some(300), "a kind's own pair first");
        assert_eq!(millis_for(&every, "Widget"), Some(100), "then `*`");
        assert_eq!(millis_for(&every[1..], "Widget"), None);
        let wrong = pairs(DELAY_EVENTS, "ConfigMap").unwrap_err();
        assert!(wrong.contains("`ConfigMap` is not Kind=millis"), "{wrong}");
    }
}
