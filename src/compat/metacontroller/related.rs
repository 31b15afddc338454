//! The customize hook's related objects: its rules cached per parent uid and generation
//! (a parent's related rules may depend on its spec only, so metacontroller asks once per
//! generation), one watch per related kind started on the first rule that names it and
//! kept while the controller runs, the objects a rule relates picked from that watch's
//! store, and a change of a related object waking every parent whose rules relate it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::StreamExt as _;
use futures::channel::mpsc::UnboundedSender;
use kube::core::{ApiResource, DynamicObject};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, ResourceExt as _};
use serde_json::Value;

use super::resolve::{Resolved, resolve};
use crate::metacontroller::api::{HookVersion, ResourceRule};
use crate::metacontroller::hook::RelatedRule;
use crate::metacontroller::related::{self, Scope};
use crate::tasks::Owned;

/// How long a sync waits for a new related kind's first list.
const FIRST_LIST: Duration = Duration::from_secs(30);

/// A customize hook's answer.
pub(super) type Rules = Arc<Vec<RelatedRule>>;

/// The related objects of one parent resource's syncs.
pub(super) struct Related {
    client: Client,
    shared: Arc<Shared>,
    /// The watch of each related kind, by `(apiVersion, resource)`.
    kinds: tokio::sync::Mutex<HashMap<(String, String), Arc<Kind>>>,
}

/// What the related kinds' watches share with the syncs.
struct Shared {
    parents: Store<DynamicObject>,
    parent_resource: ApiResource,
    /// The customize hook's version, which scopes its rules.
    version: HookVersion,
    wake: UnboundedSender<ObjectRef<DynamicObject>>,
    /// Each parent's rules (by uid), with the generation they were asked for.
    rules: Mutex<HashMap<String, (i64, Rules)>>,
    /// The namespaces, once a rule selects by namespace labels.
    namespaces: OnceLock<(Store<DynamicObject>, ApiResource)>,
}

/// One related kind, watched.
struct Kind {
    resolved: Resolved,
    store: Store<DynamicObject>,
    _watch: Owned<()>,
}

impl Related {
    /// No related kind watched yet; a related object's change is sent to `wake`.
    pub(super) fn new(
        client: Client,
        parents: Store<DynamicObject>,
        parent_resource: ApiResource,
        version: HookVersion,
        wake: UnboundedSender<ObjectRef<DynamicObject>>,
    ) -> Related {
        let shared = Shared {
            parents,
            parent_resource,
            version,
            wake,
            rules: Mutex::default(),
            namespaces: OnceLock::new(),
        };
        Related {
            client,
            shared: Arc::new(shared),
            kinds: tokio::sync::Mutex::default(),
        }
    }

    /// The rules cached for the parent with `uid` at `generation`.
    pub(super) fn cached(&self, uid: &str, generation: i64) -> Option<Rules> {
        let rules = self.shared.rules.lock().expect("rules lock");
        rules.get(uid).filter(|(g, _)| *g == generation).map(|(_, r)| r.clone())
    }

    /// Caches `rules` for the parent with `uid` at `generation`, forgetting the rules of
    /// parents that are gone.
    pub(super) fn cache(&self, uid: String, generation: i64, rules: Rules) {
        let mut cached = self.shared.rules.lock().expect("rules lock");
        cached.insert(uid, (generation, rules));
        let parents = self.shared.parents.state();
        if cached.len() > 2 * parents.len() + 16 {
            let live: Vec<String> = parents.iter().filter_map(|p| p.uid()).collect();
            cached.retain(|uid, _| live.contains(uid));
        }
    }

    /// The kinds `rules` name (`(apiVersion, kind)`) and the objects they relate to
    /// `parent`.
    pub(super) async fn objects(
        &self,
        parent: &DynamicObject,
        rules: &[RelatedRule],
    ) -> Result<(Vec<(String, String)>, Vec<Value>), String> {
        if rules.iter().any(|r| r.namespace_selector.is_some()) && self.shared.namespaces.get().is_none() {
            let namespaces = self.kind("v1", "namespaces").await?;
            let _ = self
                .shared
                .namespaces
                .set((namespaces.store.clone(), namespaces.resolved.resource.clone()));
        }
        let mut kinds = Vec::new();
        let mut objects = Vec::new();
        for rule in rules {
            let kind = self.kind(&rule.api_version, &rule.resource).await?;
            let scope = Scope {
                version: self.shared.version,
                parent_namespace: parent.metadata.namespace.as_deref(),
                related_namespaced: kind.resolved.namespaced,
            };
            kinds.push((rule.api_version.clone(), kind.resolved.resource.kind.clone()));
            for object in kind.store.state() {
                let object = kind.resolved.typed(&object);
                if related::selects(rule, &scope, &object, |ns| self.shared.namespace_labels(ns))
                    .map_err(|e| e.to_string())?
                {
                    objects.push(object);
                }
            }
        }
        Ok((kinds, objects))
    }

    /// The watch of `resource` in `api_version`, started and listed once if new.
    async fn kind(&self, api_version: &str, resource: &str) -> Result<Arc<Kind>, String> {
        let key = (api_version.to_string(), resource.to_string());
        let kind = {
            let mut kinds = self.kinds.lock().await;
            match kinds.get(&key) {
                Some(kind) => kind.clone(),
                None => {
                    let rule = ResourceRule {
                        api_version: key.0.clone(),
                        resource: key.1.clone(),
                    };
                    let resolved = resolve(&self.client, &rule).await?;
                    let kind = Arc::new(self.watch(resolved, key.0.clone()));
                    kinds.insert(key, kind.clone());
                    kind
                }
            }
        };
        match tokio::time::timeout(FIRST_LIST, kind.store.wait_until_ready()).await {
            Ok(Ok(())) => Ok(kind),
            _ => Err(format!("related {resource} ({api_version}) not listed yet")),
        }
    }

    /// Starts watching `resolved`: every change of one of its objects after the first
    /// list wakes the parents whose rules relate it.
    fn watch(&self, resolved: Resolved, api_version: String) -> Kind {
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resolved.resource);
        let writer = reflector::store::Writer::new(resolved.resource.clone());
        let store = writer.as_reader();
        let shared = self.shared.clone();
        let watched = resolved.clone();
        let events = watcher(api, watcher::Config::default())
            .default_backoff()
            .reflect(writer);
        let task = events.for_each(move |event| {
            if let Ok(watcher::Event::Apply(object) | watcher::Event::Delete(object)) = event {
                shared.wake_for(&api_version, &watched, &watched.typed(&object));
            }
            futures::future::ready(())
        });
        Kind {
            resolved,
            store,
            _watch: Owned::spawn(task),
        }
    }
}

impl Shared {
    fn namespace_labels(&self, name: &str) -> Option<BTreeMap<String, String>> {
        let (namespaces, resource) = self.namespaces.get()?;
        Some(
            namespaces
                .get(&ObjectRef::new_with(name, resource.clone()))?
                .labels()
                .clone(),
        )
    }

    /// Wakes every parent whose cached rules relate `object`, of kind `resolved`.
    fn wake_for(&self, api_version: &str, resolved: &Resolved, object: &Value) {
        let rules = self.rules.lock().expect("rules lock");
        for parent in self.parents.state() {
            let Some((_, rules)) = parent.uid().and_then(|uid| rules.get(&uid).cloned()) else {
                continue;
            };
            let scope = Scope {
                version: self.version,
                parent_namespace: parent.metadata.namespace.as_deref(),
                related_namespaced: resolved.namespaced,
            };
            let relates = rules
                .iter()
                .filter(|r| r.api_version == api_version && r.resource == resolved.resource.plural)
                .any(|r| related::selects(r, &scope, object, |ns| self.namespace_labels(ns)).unwrap_or(false));
            if relates {
                let _ = self
                    .wake
                    .unbounded_send(ObjectRef::from_obj_with(parent.as_ref(), self.parent_resource.clone()));
            }
        }
    }
}
