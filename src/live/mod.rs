//! A definition's world read from a live cluster, for the commands that look before they
//! leap (`stencil render --from-cluster`, `stencil diff`): the parents, each parent's
//! observed children (by the `stencil.dev/parent-uid` label), its lookups, and any
//! existing object a desired child names. Nothing here writes.

mod compare;
pub mod diff;

use std::collections::BTreeMap;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, TypeMeta};
use serde_json::Value;

use crate::compile::CompiledDefinition;
use crate::discovery::{self, DiscoveryError, Resolved};
use crate::gvk::{Gvk, Scopes};
use crate::labels;
use crate::object_key::ObjectKey;
use crate::offline::{Admission, Observed, render_offline, split_observed};
use crate::render::{self, RenderFailure, RenderOutput, Target};

/// Why the cluster could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// A kind the definition uses is not served.
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    /// A request failed.
    #[error("cannot {action}: {source}")]
    Request {
        /// What was being read.
        action: String,
        /// What the server said.
        #[source]
        source: kube::Error,
    },
    /// The parent named on the command line is not the definition's kind.
    #[error("{0}")]
    Parent(String),
}

/// The served kinds of one definition: its parent's, its children's and its lookups'.
pub struct Kinds {
    /// The parent kind.
    pub parent: Resolved,
    /// Every child kind (`children` and `finalize.children`).
    pub children: Vec<(Gvk, Resolved)>,
    /// Every lookup kind.
    lookups: Vec<(Gvk, Resolved)>,
    /// Which kinds are namespaced, from discovery.
    pub scopes: Scopes,
}

impl Kinds {
    /// Asks discovery for every kind `def` uses. A child kind that is not served yet is
    /// left out: no object of it can exist.
    ///
    /// # Errors
    ///
    /// The parent kind or a lookup kind is not served, or discovery fails.
    pub async fn resolve(client: &Client, def: &CompiledDefinition) -> Result<Kinds, LiveError> {
        let parent = discovery::resolve(client, &def.parent).await?;
        let mut scopes = Scopes::default();
        scopes.insert(&def.parent.group, &def.parent.kind, parent.namespaced);
        let children = served(client, def.all_child_kinds(), &mut scopes).await;
        let lookups = served(client, def.lookup_kinds(), &mut scopes).await;
        Ok(Kinds {
            parent,
            children,
            lookups,
            scopes,
        })
    }

    /// A child or lookup kind as discovery resolved it once; `None` when it is not served.
    fn kind(&self, gvk: &Gvk) -> Option<&Resolved> {
        self.children
            .iter()
            .chain(&self.lookups)
            .find(|(g, _)| g == gvk)
            .map(|(_, r)| r)
    }

    fn api(&self, client: &Client, resolved: &Resolved, namespace: Option<&str>) -> Api<DynamicObject> {
        discovery::api(client, namespace.filter(|_| resolved.namespaced), &resolved.resource)
    }

    /// The parent kind's API, in `namespace` when given.
    pub fn parents(&self, client: &Client, namespace: Option<&str>) -> Api<DynamicObject> {
        self.api(client, &self.parent, namespace)
    }

    /// Every object of the child kinds that `selector` selects, by parent UID.
    ///
    /// # Errors
    ///
    /// A child kind cannot be listed.
    pub async fn children(&self, client: &Client, selector: &str) -> Result<BTreeMap<String, Vec<Value>>, LiveError> {
        let mut by_parent: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for (gvk, resolved) in &self.children {
            let list = self
                .api(client, resolved, None)
                .list(&ListParams::default().labels(selector))
                .await
                .map_err(|source| LiveError::Request {
                    action: format!("list {gvk}"),
                    source,
                })?;
            for obj in list.items {
                let value = to_value(obj, &resolved.resource);
                if let Some(uid) = value
                    .pointer("/metadata/labels")
                    .and_then(|l| l.get(labels::PARENT_UID))
                    .and_then(Value::as_str)
                {
                    by_parent.entry(uid.to_string()).or_default().push(value);
                }
            }
        }
        Ok(by_parent)
    }

    /// Reads one object of a child or lookup kind; `None` when it does not exist or its
    /// kind is not served.
    ///
    /// # Errors
    ///
    /// The API server refuses the read or cannot be reached.
    pub async fn get(
        &self,
        client: &Client,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Value>, LiveError> {
        let Ok(gvk) = Gvk::parse(api_version, kind) else {
            return Ok(None);
        };
        let Some(resolved) = self.kind(&gvk) else {
            return Ok(None);
        };
        let api = self.api(client, resolved, namespace);
        api.get_opt(name)
            .await
            .map(|o| o.map(|o| to_value(o, &resolved.resource)))
            .map_err(|source| LiveError::Request {
                action: format!("read {}", ObjectKey::new(&gvk, namespace, name)),
                source,
            })
    }

    /// Lists the objects of a lookup kind that a label selector matches, in one namespace
    /// or (`None`) all; empty when the kind is not served.
    ///
    /// # Errors
    ///
    /// The API server refuses the list or cannot be reached.
    pub async fn list(
        &self,
        client: &Client,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        selector: &str,
    ) -> Result<Vec<Value>, LiveError> {
        let Ok(gvk) = Gvk::parse(api_version, kind) else {
            return Ok(Vec::new());
        };
        let Some(resolved) = self.kind(&gvk) else {
            return Ok(Vec::new());
        };
        let api = self.api(client, resolved, namespace);
        let list = api
            .list(&ListParams::default().labels(selector))
            .await
            .map_err(|source| LiveError::Request {
                action: format!("list {gvk} matching `{selector}`"),
                source,
            })?;
        Ok(list
            .items
            .into_iter()
            .map(|o| to_value(o, &resolved.resource))
            .collect())
    }
}

/// The kinds of `gvks` that discovery serves, recorded in `scopes`.
async fn served(client: &Client, gvks: Vec<Gvk>, scopes: &mut Scopes) -> Vec<(Gvk, Resolved)> {
    let mut found = Vec::new();
    for gvk in gvks {
        if let Ok(r) = discovery::resolve(client, &gvk).await {
            scopes.insert(&gvk.group, &gvk.kind, r.namespaced);
            found.push((gvk, r));
        }
    }
    found
}

/// An object as the offline render reads it: with its apiVersion and kind (which the items
/// of a list of built-in kinds lack), without `managedFields`.
pub fn to_value(mut obj: DynamicObject, resource: &ApiResource) -> Value {
    if obj.types.is_none() {
        obj.types = Some(TypeMeta {
            api_version: resource.api_version.clone(),
            kind: resource.kind.clone(),
        });
    }
    let mut value = serde_json::to_value(obj).unwrap_or_default();
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    value
}

/// One parent's world, read from the cluster.
pub struct Snapshot {
    /// The parent.
    pub parent: Value,
    /// Its observed children, and existing objects its desired children name.
    pub observed: Observed,
    /// Its lookups that exist.
    pub lookups: Vec<Value>,
}

impl Snapshot {
    /// Reads the lookups of `parent` and the existing objects its desired children name,
    /// given its observed `children`. A render failure is returned as is: the caller
    /// reports it.
    ///
    /// # Errors
    ///
    /// A lookup or an existing object cannot be read.
    pub async fn read(
        client: &Client,
        def: &CompiledDefinition,
        kinds: &Kinds,
        parent: Value,
        children: Vec<Value>,
    ) -> Result<Result<Snapshot, RenderFailure>, LiveError> {
        let mut lookups = Vec::new();
        let requests = match render::lookup_requests(def, &parent, &kinds.scopes) {
            Ok(r) => r,
            Err(f) => return Ok(Err(f)),
        };
        for r in &requests {
            match &r.target {
                Target::Name(name) => {
                    let found = kinds
                        .get(client, &r.api_version, &r.kind, r.namespace.as_deref(), name)
                        .await?;
                    lookups.extend(found);
                }
                Target::Selector(m) => {
                    let found = kinds
                        .list(client, &r.api_version, &r.kind, r.namespace.as_deref(), m.query())
                        .await?;
                    lookups.extend(found);
                }
            }
        }
        let mut observed = split_observed(children, &parent);
        let out = match render_offline(def, &kinds.scopes, &parent, &observed, &lookups, Admission::AsStored) {
            Ok(out) => out,
            Err(f) => return Ok(Err(f)),
        };
        for child in &out.children {
            let Some(key) = ObjectKey::of_value(&child.object) else {
                continue;
            };
            let known = observed
                .children
                .values()
                .flatten()
                .chain(&observed.existing)
                .any(|o| ObjectKey::of_value(o).as_ref() == Some(&key));
            if known {
                continue;
            }
            let api_version = child.object["apiVersion"].as_str().unwrap_or_default();
            let found = kinds
                .get(client, api_version, &key.kind, key.namespace.as_deref(), &key.name)
                .await?;
            observed.existing.extend(found);
        }
        Ok(Ok(Snapshot {
            parent,
            observed,
            lookups,
        }))
    }

    /// Renders the parent as the controller would from this snapshot.
    pub fn render(&self, def: &CompiledDefinition, scopes: &Scopes) -> Result<RenderOutput, RenderFailure> {
        render_offline(
            def,
            scopes,
            &self.parent,
            &self.observed,
            &self.lookups,
            Admission::AsStored,
        )
    }
}
