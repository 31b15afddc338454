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
