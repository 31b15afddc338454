//! Stencil: a generic Kubernetes operator. OperatorDefinitions map a parent kind to
//! minijinja-templated children and JSONPath status rules; this crate compiles them,
//! renders them purely, and (in the controller) reconciles them against a cluster.

#![warn(missing_docs)]

pub mod argocd;
pub mod compile;
pub mod conditions;
pub mod convert;
pub mod crd;
pub mod definition;
pub mod discovery;
#[cfg(test)]
mod fuzz;
pub mod golden;
pub mod gvk;
pub mod http;
pub mod immutable;
pub mod json_schema;
pub mod labels;
pub mod leader;
pub mod live;
pub mod metrics;
pub mod migrate;
pub mod object_key;
pub mod ownership;
pub mod quantity;
pub mod rbac;
pub mod readiness;
pub mod reconcile;
pub mod registry;
pub mod render;
pub mod runtime;
pub mod scaffold;
pub mod schema_change;
pub mod selector;
pub mod source;
pub mod structural;
pub mod tasks;
pub mod watch;
pub mod webhook;
pub mod yaml;
