//! The OperatorDefinition's status: what the controller observed about a definition.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What the controller observed about a definition.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorDefinitionStatus {
    /// `Ready`, `Conflict` and friends, following the Kubernetes condition conventions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The kinds this definition watches, as `apiVersion/kind`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub watched_kinds: Vec<String>,
    /// How many parents the definition serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_count: Option<i64>,
    /// A decorator's count of the objects it decorates now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decorated_parents: Option<i64>,
    /// A decorator's count of decorated objects whose children are all ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_parents: Option<i64>,
    /// A decorator's first few decorated objects that are not ready, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failing_parents: Vec<FailingParent>,
    /// The versions the parent CRD may hold objects at (its `status.storedVersions`);
    /// after a storage-version migration, only the storage version.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stored_versions: Vec<String>,
    /// Objects rewritten by the last storage-version migration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migrated_objects: Option<i64>,
    /// The definition's revisions: the one every parent renders, and the one a rollout
    /// moves them to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<super::RolloutStatus>,
    /// The last compile or reconcile error, with its location.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The generation the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// A decorated object whose children are not all ready.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailingParent {
    /// `Kind namespace/name` of the decorated object.
    pub parent: String,
    /// The reason of its `Ready=False`, as a composite parent's condition would give it.
    pub reason: String,
    /// What is wrong.
    pub message: String,
}
