//! Stencil's pure core: what an OperatorDefinition says and what it renders, with no
//! Kubernetes client. Compile and render are pure functions of their inputs; the cluster
//! side (watches, reconcilers, the registry) and the commands build on this crate and
//! never the other way round. The crate depends on kube's types and derive only, so the
//! compiler refuses any use of a client here.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod applied;
pub mod cel_dialect;
pub mod compact_schema;
pub mod compile;
pub mod conditions;
pub mod convert;
pub mod crd;
pub mod definition;
mod digest;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
#[cfg(test)]
mod fuzz;
pub mod gvk;
pub mod immutable;
pub mod import_kro;
pub mod json_schema;
pub mod labels;
pub mod metacontroller;
pub mod object_key;
pub mod offline;
pub mod ownership;
pub mod quantity;
pub mod readiness;
pub mod render;
pub mod rollout;
pub mod schema_change;
pub mod schema_reference;
pub mod selector;
pub mod shard;
pub mod structural;
pub mod yaml;
