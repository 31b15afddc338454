//! Stencil: a generic Kubernetes operator. OperatorDefinitions map a parent kind to
//! minijinja-templated children and JSONPath status rules. Three layers:
//! - the pure core, the `stencil-core` crate (re-exported here): definitions, compile,
//!   render, readiness, ownership decisions, CRD building; it has no client;
//! - the cluster side: sources, watches, discovery, the registry of controllers, the
//!   reconciler, leader election, the conversion webhook, storage migration, the runtime;
//! - the commands' own modules: golden cases, scaffolding, RBAC derivation, Argo CD
//!   health, the live reads behind `stencil diff`.

#![warn(missing_docs)]

pub use stencil_core::{
    applied, compile, conditions, convert, definition, gvk, immutable, json_schema, labels, object_key, ownership,
    quantity, readiness, render, schema_change, selector, structural, yaml,
};

pub mod argocd;
pub mod crd;
pub mod discovery;
pub mod golden;
pub mod http;
pub mod leader;
pub mod live;
pub mod metrics;
pub mod migrate;
pub mod rbac;
pub mod reconcile;
pub mod registry;
pub mod runtime;
pub mod scaffold;
pub mod source;
pub mod tasks;
pub mod watch;
pub mod webhook;
