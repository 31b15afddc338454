//! Where definitions come from: local files and directories (hot-reloaded) and
//! OperatorDefinition resources in the cluster. Each source emits [`SourceEvent`]s.

pub mod cluster;
pub mod files;

use crate::compile::{CompiledDefinition, Diagnostics};

/// Where one definition came from; the registry's key for it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Origin {
    /// A definition in a local file.
    File {
        /// The file.
        path: String,
        /// The definition's `metadata.name`.
        name: String,
    },
    /// An OperatorDefinition resource.
    Cluster {
        /// Its name.
        name: String,
    },
}

impl Origin {
    /// The definition's name.
    pub fn name(&self) -> &str {
        match self {
            Origin::File { name, .. } | Origin::Cluster { name } => name,
        }
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::File { path, name } => write!(f, "{path} ({name})"),
            Origin::Cluster { name } => write!(f, "OperatorDefinition/{name}"),
        }
    }
}

/// What a source reports.
#[derive(Debug)]
pub enum SourceEvent {
    /// A definition appeared or changed and compiled.
    Upsert(Origin, Box<CompiledDefinition>),
    /// A definition changed but does not compile; the last good version keeps running.
    Invalid(Origin, Diagnostics),
    /// A file holds errors that name no definition (malformed YAML, say).
    FileInvalid(String, Diagnostics),
    /// A definition is gone.
    Remove(Origin),
}

/// The events that matter of a backlog (a standby's queue at failover): for each origin
/// its last event, with the last good version before a last compile error (which keeps
/// it running), in the order of their last arrival. A definition removed and added again
/// meanwhile is only added, so nothing is stopped or released for it.
pub fn latest(events: Vec<SourceEvent>) -> Vec<SourceEvent> {
    use std::collections::HashMap;
    #[derive(PartialEq, Eq, Hash)]
    enum Key {
        Origin(Origin),
        File(String),
    }
    let key = |e: &SourceEvent| match e {
        SourceEvent::Upsert(o, _) | SourceEvent::Invalid(o, _) | SourceEvent::Remove(o) => Key::Origin(o.clone()),
        SourceEvent::FileInvalid(f, _) => Key::File(f.clone()),
    };
    let mut last: HashMap<Key, usize> = HashMap::new();
    let mut last_good: HashMap<Key, usize> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        if matches!(e, SourceEvent::Upsert(..)) {
            last_good.insert(key(e), i);
        }
        if matches!(e, SourceEvent::Remove(_)) {
            last_good.remove(&key(e));
        }
        last.insert(key(e), i);
    }
    let keep: std::collections::BTreeSet<usize> = last
        .iter()
        .flat_map(|(k, &i)| {
            let good = matches!(events[i], SourceEvent::Invalid(..)).then(|| last_good.get(k).copied());
            std::iter::once(i).chain(good.flatten())
        })
        .collect();
    events
        .into_iter()
        .enumerate()
        .filter(|(i, _)| keep.contains(i))
        .map(|(_, e)| e)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::compile_file;
    use stencil_core::fixtures::{CONFIGMAP, ParentKind, bare_definition, child};

    /// A definition named `<name>.example.com` with one ConfigMap child.
    fn def(name: &str) -> Box<CompiledDefinition> {
        let parent = ParentKind {
            group: "example.com",
            kind: "Widget",
            plural: name,
        };
        let text = bare_definition(parent, &child("cm", CONFIGMAP), "");
        let (mut defs, diags) = compile_file("d.yaml", &text);
        assert!(diags.0.is_empty(), "{diags}");
        Box::new(defs.remove(0))
    }

    fn file(path: &str) -> Origin {
        Origin::File {
            path: path.into(),
            name: "widgets".into(),
        }
    }

    fn shape(events: &[SourceEvent]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                SourceEvent::Upsert(o, _) => format!("upsert {o}"),
                SourceEvent::Invalid(o, _) => format!("invalid {o}"),
                SourceEvent::Remove(o) => format!("remove {o}"),
                SourceEvent::FileInvalid(f, _) => format!("file {f}"),
            })
            .collect()
    }

    #[test]
    fn a_backlog_keeps_the_last_event_of_each_definition() {
        let events = vec![
            SourceEvent::Upsert(file("a.yaml"), def("widgets")),
            SourceEvent::Remove(file("a.yaml")),
            SourceEvent::Upsert(file("a.yaml"), def("widgets")),
            SourceEvent::Remove(file("b.yaml")),
            SourceEvent::Upsert(file("c.yaml"), def("widgets")),
            SourceEvent::Invalid(file("c.yaml"), Diagnostics(Vec::new())),
        ];
        assert_eq!(
            shape(&latest(events)),
            [
                "upsert a.yaml (widgets)",
                "remove b.yaml (widgets)",
                "upsert c.yaml (widgets)",
                "invalid c.yaml (widgets)"
            ],
            "a definition removed and added again is only added; a compile error keeps the good version before it"
        );
    }

    #[test]
    fn a_definition_removed_last_is_removed() {
        let events = vec![
            SourceEvent::Upsert(file("a.yaml"), def("widgets")),
            SourceEvent::Invalid(file("a.yaml"), Diagnostics(Vec::new())),
            SourceEvent::Remove(file("a.yaml")),
        ];
        assert_eq!(shape(&latest(events)), ["remove a.yaml (widgets)"]);
    }
}
