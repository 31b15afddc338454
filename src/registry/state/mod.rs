//! The registry as a pure state machine: [`step`] takes one source event and says what to
//! do about it as [`Effect`]s, which the supervisor carries out off the loop. No client,
//! no task, no waiting here, so every transition is tested without a cluster.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::report::Report;
use crate::compile::CompiledDefinition;
use crate::gvk::Gvk;
use crate::source::{Origin, SourceEvent};

/// A parent kind as definitions claim it: group and kind (one definition serves a kind
/// whatever version it names). Decorators claim no kind: any number may decorate one, so
/// each has a key of its own.
pub type ParentKind = (String, String);

/// The parent kind a definition serves.
pub fn parent_kind(def: &CompiledDefinition) -> ParentKind {
    if def.spec.is_decorator() {
        (
            format!("{} decorated by", def.parent.group),
            format!("{} {}", def.parent.kind, def.name),
        )
    } else {
        (def.parent.group.clone(), def.parent.kind.clone())
    }
}

/// Something the registry decided; the supervisor does it.
#[derive(Debug)]
pub enum Effect {
    /// Run this definition's controller, stopping the one it runs first.
    Start {
        /// The definition's origin.
        origin: Origin,
        /// The version to run.
        def: Arc<CompiledDefinition>,
        /// Every child kind any version of it had, so removed templates' children are
        /// still seen and pruned.
        kinds_seen: Vec<Gvk>,
        /// The version it replaces, which keeps serving if this one's CRD change is
        /// refused as breaking.
        fallback: Option<Arc<CompiledDefinition>>,
    },
    /// Stop this definition's controller.
    Stop(Origin),
    /// Nobody serves this definition's parent kind any more: take Stencil's finalizer off
    /// every parent, so none is left undeletable.
    Release(Arc<CompiledDefinition>),
    /// Update the definition's status (and log it).
    Report(Origin, Report),
    /// A file holds errors that name no definition.
    FileInvalid(String, String),
}

/// What the registry knows of one definition.
#[derive(Debug)]
struct Entry {
    /// Order of arrival: the first definition of a parent kind keeps it.
    seq: u64,
    good: Option<Arc<CompiledDefinition>>,
    kinds_seen: Vec<Gvk>,
    running: bool,
}

/// Every definition the sources reported, and which of them run.
#[derive(Debug, Default)]
pub struct State {
    entries: BTreeMap<Origin, Entry>,
    next_seq: u64,
}

/// How many definitions are in each state, for the `stencil_definitions` gauge.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Definitions whose controller runs.
    pub running: i64,
    /// Good definitions waiting for a parent kind another definition holds.
    pub conflict: i64,
    /// Definitions that never compiled.
    pub invalid: i64,
}

impl State {
    /// How many definitions are in each state.
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for e in self.entries.values() {
            match (e.running, &e.good) {
                (true, _) => c.running += 1,
                (false, Some(_)) => c.conflict += 1,
                (false, None) => c.invalid += 1,
            }
        }
        c
    }

    fn entry(&mut self, origin: &Origin) -> &mut Entry {
        if !self.entries.contains_key(origin) {
            self.next_seq += 1;
            let entry = Entry {
                seq: self.next_seq,
                good: None,
                kinds_seen: Vec::new(),
                running: false,
            };
            self.entries.insert(origin.clone(), entry);
        }
        self.entries.get_mut(origin).expect("inserted above")
    }

    /// The origin that runs a parent kind, other than `except`.
    fn holder(&self, kind: &ParentKind, except: &Origin) -> Option<&Origin> {
        self.entries
            .iter()
            .find(|(o, e)| *o != except && e.running && e.good.as_deref().map(parent_kind).as_ref() == Some(kind))
            .map(|(o, _)| o)
    }

    /// After `old` stopped serving its parent kind: the earliest definition waiting for the
    /// kind takes it over, or else its parents are released.
    fn hand_over(&mut self, old: Arc<CompiledDefinition>) -> Vec<Effect> {
        let kind = parent_kind(&old);
        let next = self
            .entries
            .iter()
            .filter(|(_, e)| !e.running && e.good.as_deref().map(parent_kind).as_ref() == Some(&kind))
            .min_by_key(|(_, e)| e.seq)
            .map(|(o, _)| o.clone());
        match next {
            Some(origin) => vec![self.start(&origin)],
            // A decorator never put a finalizer on anything.
            None if old.spec.is_decorator() => Vec::new(),
            None => vec![Effect::Release(old)],
        }
    }

    fn start(&mut self, origin: &Origin) -> Effect {
        let entry = self.entry(origin);
        entry.running = true;
        Effect::Start {
            origin: origin.clone(),
            def: entry.good.clone().expect("only good definitions start"),
            kinds_seen: entry.kinds_seen.clone(),
            fallback: None,
        }
    }
}

/// Takes one source event; returns what to do, in order.
pub fn step(state: &mut State, event: SourceEvent) -> Vec<Effect> {
    match event {
        SourceEvent::Upsert(origin, def) => upsert(state, origin, Arc::new(*def)),
        SourceEvent::Invalid(origin, diags) => {
            let running = state.entry(&origin).running;
            vec![Effect::Report(
                origin,
                Report::CompileError {
                    message: diags.to_string(),
                    running,
                },
            )]
        }
        SourceEvent::FileInvalid(file, diags) => vec![Effect::FileInvalid(file, diags.to_string())],
        SourceEvent::Remove(origin) => remove(state, origin),
    }
}

fn upsert(state: &mut State, origin: Origin, def: Arc<CompiledDefinition>) -> Vec<Effect> {
    let kind = parent_kind(&def);
    let entry = state.entry(&origin);
    let previous = entry.good.replace(def.clone());
    let moved = previous.as_deref().map(parent_kind).is_some_and(|k| k != kind);
    // Children of the old parent kind's parents are not this kind's to prune.
    if moved {
        entry.kinds_seen.clear();
    }
    crate::gvk::remember(&mut entry.kinds_seen, def.all_child_kinds());
    let was_running = entry.running;
    let mut effects = vec![Effect::Report(origin.clone(), Report::Compiled)];
    if was_running && moved {
        entry.running = false;
        effects.push(Effect::Stop(origin.clone()));
        effects.extend(state.hand_over(previous.clone().expect("moved implies a previous version")));
    }
    match state.holder(&kind, &origin) {
        Some(holder) => {
            let message = format!("{} is already served by {holder}", def.parent);
            effects.push(Effect::Report(origin, Report::Conflict { message }));
        }
        None => {
            let mut start = state.start(&origin);
            if let Effect::Start { fallback, .. } = &mut start
                && was_running
                && !moved
            {
                *fallback = previous;
            }
            effects.push(start);
        }
    }
    effects
}

fn remove(state: &mut State, origin: Origin) -> Vec<Effect> {
    let Some(entry) = state.entries.remove(&origin) else {
        return Vec::new();
    };
    let mut effects = Vec::new();
    if entry.running {
        effects.push(Effect::Stop(origin.clone()));
        effects.extend(state.hand_over(entry.good.expect("a running definition is good")));
    }
    effects.push(Effect::Report(origin, Report::Removed));
    effects
}

#[cfg(test)]
mod tests;
