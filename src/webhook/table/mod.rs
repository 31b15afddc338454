//! Which definition converts which CRD: the one whose versions the live CRD carries
//! ([`crate::crd::carries`]), kept until the CRD carries another. Every replica keeps
//! this table from its own sources and its own reads of the CRDs, leader or not, so
//! conversion goes on through a failover.
//!
//! An edit whose CRD change is refused as breaking is a candidate the live CRD does not
//! carry, so the definition before it goes on converting; a removed definition goes on
//! converting while its CRD carries it (the CRD still sends its objects here); a CRD that
//! carries no definition this process knows is not converted at all, and each review
//! says why, so nothing is ever converted into a schema the CRD does not have.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, RwLock};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::compile::CompiledDefinition;
use crate::source::{Origin, SourceEvent};

/// How many CRDs that no loaded definition declares are followed because a review asked.
const MAX_ASKED: usize = 64;

/// What this process knows of one converting CRD.
#[derive(Default)]
struct Entry {
    /// The definition each source holds now for this CRD.
    sources: Vec<(Origin, Arc<CompiledDefinition>)>,
    /// The definition the live CRD carries, once seen.
    installed: Option<Arc<CompiledDefinition>>,
    /// The live CRD as last read: none before the first read.
    live: Option<Live>,
    /// A review asked for it: kept while the CRD exists, so a CRD whose definition this
    /// process never loaded (removed before it started) converts with a kept revision.
    asked: bool,
    /// Whether the kept revisions were looked at since the CRD was last read carrying no
    /// known definition; until then a review waits.
    looked: bool,
}

/// A live CRD as read.
enum Live {
    /// It exists, with these versions.
    Present(Box<CustomResourceDefinition>),
    /// It does not exist.
    Absent,
}

impl Entry {
    /// Chooses the definition the live CRD carries: a source's first (an accepted edit
    /// takes over at once), else the one it carried before.
    fn settle(&mut self, crd: &str) {
        let Some(Live::Present(live)) = &self.live else {
            if matches!(self.live, Some(Live::Absent)) {
                self.installed = None;
            }
            return;
        };
        let carried = self
            .sources
            .iter()
            .map(|(_, def)| def)
            .chain(self.installed.iter())
            .find(|def| crate::crd::carries(live, def))
            .cloned();
        if carried.is_none() && self.installed.is_some() {
            tracing::warn!(
                crd,
                "the CRD no longer carries the definition that converted it; converting nothing until it carries a known one"
            );
        }
        self.installed = carried;
    }

    /// Whether the entry still matters: a source declares it, or the CRD may still send
    /// reviews for a definition this process knows.
    fn needed(&self) -> bool {
        let may_exist = !matches!(self.live, Some(Live::Absent));
        !self.sources.is_empty() || self.installed.is_some() || (self.asked && may_exist)
    }
}

/// What the table says about one CRD's conversion.
#[derive(Debug, Clone)]
pub enum Lookup {
    /// Convert with this definition.
    Found(Arc<CompiledDefinition>),
    /// The live CRD has not been read yet: ask again shortly.
    Pending,
    /// Nothing converts the CRD, and why.
    Refused(String),
}

/// The definitions that convert, by the name of the CRD they install.
#[derive(Clone)]
pub struct Conversions {
    by_crd: Arc<RwLock<HashMap<String, Entry>>>,
    /// The CRDs whose live state this table needs, for the task that reads them.
    names: Arc<tokio::sync::watch::Sender<BTreeSet<String>>>,
}

impl Default for Conversions {
    fn default() -> Self {
        Conversions {
            by_crd: Arc::default(),
            names: Arc::new(tokio::sync::watch::Sender::new(BTreeSet::new())),
        }
    }
}

impl Conversions {
    /// An empty table.
    pub fn new() -> Conversions {
        Conversions::default()
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Entry>> {
        self.by_crd.write().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The definition that converts CRD `crd`, or why there is none.
    pub fn get(&self, crd: &str) -> Lookup {
        let table = self.by_crd.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(entry) = table.get(crd) else {
            return Lookup::Refused(format!("no definition loaded in this Stencil converts CRD {crd}"));
        };
        match (&entry.live, &entry.installed) {
            (_, Some(def)) => Lookup::Found(def.clone()),
            (None, None) => Lookup::Pending,
            (Some(Live::Absent), None) => Lookup::Refused(format!("CRD {crd} is not installed")),
            (Some(Live::Present(_)), None) if !entry.looked => Lookup::Pending,
            (Some(Live::Present(_)), None) => Lookup::Refused(format!(
                "CRD {crd} carries versions that no definition loaded in this Stencil declares (an edit refused as a breaking change, or a CRD changed by hand); nothing is converted, so nothing is lost: install the definition the CRD carries, or force the edit with stencil.dev/allow-breaking-changes"
            )),
        }
    }

    /// Notes that a review asked for CRD `crd`, which no loaded definition declares: it is
    /// read from now on, and converted with the kept revision it carries, if any. At most
    /// `MAX_ASKED` such CRDs are followed at once.
    pub fn ask(&self, crd: &str) {
        let mut table = self.write();
        if !table.contains_key(crd) && table.values().filter(|e| e.asked).count() < MAX_ASKED {
            let entry = table.entry(crd.to_string()).or_default();
            entry.asked = true;
            self.publish(&table);
        }
    }

    /// The CRDs whose live state the table needs, as they change.
    pub fn names(&self) -> tokio::sync::watch::Receiver<BTreeSet<String>> {
        self.names.subscribe()
    }

    /// Follows one source event: a definition that converts becomes a candidate for its
    /// CRD, replacing its source's earlier one. A removed definition, or one that no longer
    /// converts, stays while the CRD carries it. An edit that does not compile changes
    /// nothing.
    pub fn observe(&self, event: &SourceEvent) {
        let mut table = self.write();
        let origin = match event {
            SourceEvent::Upsert(origin, _) | SourceEvent::Remove(origin) => origin,
            SourceEvent::Invalid(..) | SourceEvent::FileInvalid(..) => return,
        };
        for (crd, entry) in table.iter_mut() {
            let before = entry.sources.len();
            entry.sources.retain(|(o, _)| o != origin);
            if entry.sources.len() < before && matches!(event, SourceEvent::Remove(_)) && entry.installed.is_some() {
                tracing::info!(crd, definition = %origin, "the definition is removed; its CRD goes on converting with it while the CRD carries it");
            }
        }
        if let SourceEvent::Upsert(origin, def) = event
            && def.converts()
            && let Some(name) = crate::crd::crd_name(def)
        {
            let entry = table.entry(name.clone()).or_default();
            entry.sources.push((origin.clone(), Arc::new((**def).clone())));
            entry.settle(&name);
        }
        table.retain(|_, e| e.needed());
        self.publish(&table);
    }

    /// Follows a read of CRD `crd`: `live` is what the API server holds (none: it does not
    /// exist).
    pub fn observe_crd(&self, crd: &str, live: Option<CustomResourceDefinition>) {
        let mut table = self.write();
        let Some(entry) = table.get_mut(crd) else { return };
        entry.live = Some(live.map_or(Live::Absent, |l| Live::Present(Box::new(l))));
        entry.settle(crd);
        entry.looked = false;
        table.retain(|_, e| e.needed());
        self.publish(&table);
    }

    /// Whether CRD `crd` is read but carries no definition this process knows: the
    /// moment to look for one in the definition's kept revisions.
    pub fn unknown(&self, crd: &str) -> Option<CustomResourceDefinition> {
        let table = self.by_crd.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        match table.get(crd)? {
            Entry {
                live: Some(Live::Present(live)),
                installed: None,
                ..
            } => Some((**live).clone()),
            _ => None,
        }
    }

    /// Ends the look for what CRD `crd` carries (see [`Conversions::unknown`]): `found`,
    /// a kept revision, converts it if the CRD as last read does carry it; without one,
    /// reviews are refused and say why.
    pub fn recall(&self, crd: &str, found: Option<CompiledDefinition>) {
        let mut table = self.write();
        let Some(entry) = table.get_mut(crd) else { return };
        entry.looked = true;
        if let Some(Live::Present(live)) = &entry.live
            && let Some(def) = found
            && entry.installed.is_none()
            && crate::crd::carries(live, &def)
        {
            tracing::info!(crd, definition = %def.name, "converting with the definition's kept revision the CRD carries");
            entry.installed = Some(Arc::new(def));
        }
    }

    /// Every converting CRD as last read, by name, with the webhook it points at (a CRD
    /// whose conversion is not a webhook any more is left out).
    pub fn live_webhooks(&self) -> Vec<(String, crate::crd::Webhook)> {
        let table = self.by_crd.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        table
            .iter()
            .filter_map(|(name, e)| match &e.live {
                Some(Live::Present(live)) => Some((name.clone(), crate::crd::Webhook::of_live(live)?)),
                _ => None,
            })
            .collect()
    }

    fn publish(&self, table: &HashMap<String, Entry>) {
        let names: BTreeSet<String> = table.keys().cloned().collect();
        self.names.send_if_modified(|current| {
            let changed = *current != names;
            *current = names;
            changed
        });
    }
}

#[cfg(test)]
mod tests;
