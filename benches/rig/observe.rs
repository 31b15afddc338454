//! Sees convergence through watches instead of repeated LISTs: one watch on a
//! namespace's parents (counting those `Ready`) and one per child kind (counting the
//! objects labelled `app.kubernetes.io/managed-by`). Every contender is timed by the same
//! observer, and the observer costs the API server a few watch events, not a LIST of
//! every object five times a second, which at N = 10,000 would load the very server
//! whose speed is measured.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::api::{Api, DynamicObject};
use kube::core::ApiResource;
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::{Parents, apps};

/// The label every contender puts on the children it manages.
const MANAGED: &str = "app.kubernetes.io/managed-by";

/// Running watches over one namespace, with the counts they see.
pub(super) struct Observer {
    counts: watch::Receiver<BTreeMap<&'static str, usize>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Observer {
    /// Starts watching `ns`; the counts are complete once each watch's first list is in.
    pub(super) async fn start(client: &Client, ns: &str, p: Parents) -> Observer {
        let (tx, counts) = watch::channel(BTreeMap::new());
        let children = [
            ("ConfigMap", ApiResource::erase::<ConfigMap>(&())),
            ("Secret", ApiResource::erase::<Secret>(&())),
            ("Service", ApiResource::erase::<Service>(&())),
            ("Deployment", ApiResource::erase::<Deployment>(&())),
        ];
        let mut tasks = vec![tokio::spawn(count(
            apps(client, ns, p),
            watcher::Config::default(),
            "ready",
            is_ready,
            tx.clone(),
        ))];
        for (kind, ar) in children {
            let api = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &ar);
            tasks.push(tokio::spawn(count(
                api,
                watcher::Config::default().labels(MANAGED),
                kind,
                |_| true,
                tx.clone(),
            )));
        }
        let mut observer = Observer { counts, tasks };
        let watches = observer.tasks.len();
        observer
            .wait("the observer's first lists", Duration::from_secs(600), |c| {
                c.len() == watches
            })
            .await;
        observer
    }

    /// Waits until `n` parents are Ready and `children` children exist; returns when.
    pub(super) async fn converged(&mut self, n: usize, children: usize, timeout: Duration) -> Instant {
        self.wait("convergence", timeout, |c| {
            c.get("ready").copied().unwrap_or(0) >= n
                && c.iter().filter(|(k, _)| **k != "ready").map(|(_, v)| v).sum::<usize>() >= children
        })
        .await
    }

    async fn wait(
        &mut self,
        what: &str,
        timeout: Duration,
        done: impl FnMut(&BTreeMap<&'static str, usize>) -> bool,
    ) -> Instant {
        let waited = tokio::time::timeout(timeout, self.counts.wait_for(done))
            .await
            .map(|seen| seen.map(|_| ()));
        match waited {
            Ok(seen) => seen.expect("the observer's watches"),
            Err(_) => panic!("timed out waiting for {what}: {:?}", *self.counts.borrow()),
        }
        Instant::now()
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Whether a parent's `Ready` condition is True.
pub(super) fn is_ready(o: &DynamicObject) -> bool {
    o.data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

/// Keeps the set of names in `api` that pass `counts`, publishing its size under `key`
/// once the first list is complete and on every change after it.
async fn count(
    api: Api<DynamicObject>,
    config: watcher::Config,
    key: &'static str,
    counts: fn(&DynamicObject) -> bool,
    tx: watch::Sender<BTreeMap<&'static str, usize>>,
) {
    let mut names = HashSet::new();
    let mut listing = HashSet::new();
    let mut stream = watcher::watcher(api, config).boxed();
    while let Some(event) = stream.next().await {
        let before = names.len();
        match event {
            Ok(Event::Init) => listing.clear(),
            Ok(Event::InitApply(o)) => {
                if counts(&o) {
                    listing.insert(o.name_any());
                }
            }
            Ok(Event::InitDone) => {
                names = std::mem::take(&mut listing);
                tx.send_modify(|c| {
                    c.insert(key, names.len());
                });
                continue;
            }
            Ok(Event::Apply(o)) if counts(&o) => {
                names.insert(o.name_any());
            }
            Ok(Event::Apply(o) | Event::Delete(o)) => {
                names.remove(&o.name_any());
            }
            Err(e) => eprintln!("observer: watching {key}: {e}"),
        }
        if names.len() != before {
            tx.send_modify(|c| {
                c.insert(key, names.len());
            });
        }
    }
}
