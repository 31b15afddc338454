//! Stencil: a generic Kubernetes operator. OperatorDefinitions map a parent kind to
//! minijinja-templated children and JSONPath status rules. Three layers:
//! - the pure core, the `stencil-core` crate (re-exported here): definitions, compile,
//!   render, readiness, ownership decisions, CRD building; it has no client;
//! - the cluster side: sources, watches, discovery, the registry of controllers, the
//!   reconciler, leader election, the conversion webhook, storage migration, the runtime;
//! - the commands, in the `stencil` binary (`src/commands/`): the CLI's subcommands, the
//!   golden runner, scaffolding, RBAC derivation and Argo CD health; they build on both.
//!   The live reads behind `stencil diff` are here, on the cluster side (`live`).

#![deny(missing_docs)]
#![forbid(unsafe_code)]

// The core as the binary, the tests and the bench use it; the rest of it serves the
// cluster side only.
pub use stencil_core::{
    applied, compact_schema, compile, convert, definition, gvk, import_kro, json_schema, labels, metacontroller,
    offline, render, rollout, schema_reference, yaml,
};
pub(crate) use stencil_core::{conditions, immutable, object_key, ownership, selector, shard};

pub mod compat;
pub mod crd;
pub mod hooks;
pub mod leader;
pub mod live;
pub mod metrics;
pub mod migrate;
pub(crate) mod registry;
pub mod revisions;
pub mod runtime;
pub(crate) mod sharding;
pub mod source;
pub mod webhook;

mod discovery;
mod http;
mod reconcile;
mod tasks;
mod watch;
