//! What a revision is: the hash of the part of a definition that rolls out, the name of
//! its `ControllerRevision`, and that object.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::definition::OperatorDefinitionSpec;
use crate::labels;

/// Hex digits of a revision hash.
pub const REVISION_HASH_LEN: usize = 10;

/// Longest name Kubernetes accepts for a `ControllerRevision` (a DNS subdomain).
const MAX_NAME: usize = 253;

/// The spec's fields that say how to roll out, not what: editing them makes no revision.
const NOT_ROLLED_OUT: [&str; 2] = ["rollout", "revisionHistoryLimit"];

/// The hash that names a revision of `spec`: the first [`REVISION_HASH_LEN`] hex digits
/// of the SHA-256 of its JSON, without the rollout strategy and the history limit.
pub fn revision_hash(spec: &OperatorDefinitionSpec) -> String {
    let mut value = serde_json::to_value(spec).expect("a definition spec is JSON");
    if let Some(fields) = value.as_object_mut() {
        for key in NOT_ROLLED_OUT {
            fields.remove(key);
        }
    }
    let digest = Sha256::digest(value.to_string().as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    hex[..REVISION_HASH_LEN].to_string()
}

/// The name of the `ControllerRevision` of `definition` at `hash`:
/// `<definition>-<hash>`, the definition's name cut to fit.
pub fn revision_name(definition: &str, hash: &str) -> String {
    let room = MAX_NAME - hash.len() - 1;
    let stem = definition.get(..room.min(definition.len())).unwrap_or(definition);
    format!("{}-{hash}", stem.trim_end_matches(['.', '-']))
}

/// The `ControllerRevision` (apps/v1) that keeps `spec` as revision `number` of
/// `definition`, in `namespace`: the spec whole under `data.spec`, the hash in an
/// annotation, the definition in the `stencil.dev/definition` label its children carry.
pub fn revision_object(definition: &str, namespace: &str, spec: &OperatorDefinitionSpec, number: i64) -> Value {
    let hash = revision_hash(spec);
    json!({
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": revision_name(definition, &hash),
            "namespace": namespace,
            "labels": {
                labels::DEFINITION: labels::label_value(definition),
                labels::MANAGED_BY: labels::MANAGED_BY_VALUE,
            },
            "annotations": {labels::REVISION_HASH: hash},
        },
        "data": {"spec": spec},
        "revision": number,
    })
}
