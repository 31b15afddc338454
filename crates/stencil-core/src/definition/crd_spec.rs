//! The parent's CustomResourceDefinition as a definition states it: names, scope, and each
//! version with its schema, columns, scale subresource and conversion templates.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceSubresourceScale,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{default_true, preserve_unknown_object};

/// The parent's CustomResourceDefinition; its group and kind come from `spec.parent`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CrdSpec {
    /// `Namespaced` (default) or `Cluster`.
    #[serde(default)]
    pub scope: CrdScope,
    /// Plural, singular, short names and categories.
    pub names: CrdNames,
    /// Every served version; exactly one is the storage version.
    pub versions: Vec<CrdVersion>,
}

/// Whether the parent kind is namespaced or cluster-scoped.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum CrdScope {
    /// Objects live in a namespace.
    #[default]
    Namespaced,
    /// Objects are cluster-scoped.
    Cluster,
}

/// The names of the parent's CRD, as in `CustomResourceDefinitionNames` less the kind.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CrdNames {
    /// Lower-case plural name; the CRD is named `<plural>.<group>`.
    pub plural: String,
    /// Lower-case singular name; defaults to the lower-cased kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub singular: Option<String>,
    /// Short names for kubectl.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub short_names: Vec<String>,
    /// Categories, e.g. `all`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub categories: Vec<String>,
}

/// One version of the parent's CRD.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CrdVersion {
    /// The version name, e.g. `v1`.
    pub name: String,
    /// Whether the API server serves this version.
    #[serde(default = "default_true")]
    pub served: bool,
    /// Whether objects are stored in this version; exactly one version stores (a lone
    /// version does without saying so).
    #[serde(default)]
    pub storage: bool,
    /// Marks the version deprecated.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deprecated: bool,
    /// The warning returned to clients of a deprecated version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation_warning: Option<String>,
    /// The version's structural schema.
    pub schema: CrdSchema,
    /// Extra columns for `kubectl get`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_printer_columns: Vec<CustomResourceColumnDefinition>,
    /// The scale subresource, so `kubectl scale` and a HorizontalPodAutoscaler can drive
    /// a parent: `specReplicasPath` (under `.spec`), `statusReplicasPath` (under `.status`,
    /// written by a status rule) and an optional `labelSelectorPath`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<CustomResourceSubresourceScale>,
    /// How an object of this version converts to the storage version and back, for a
    /// version whose schema differs from the storage version's. The storage version has
    /// none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversion: Option<VersionConversion>,
}

/// The two templates that convert one version to and from the storage version (the hub).
/// Each renders over `object` a mapping with `spec` and, optionally, `status`;
/// `metadata` is carried over by Stencil. A field the other version cannot hold survives
/// a round trip through it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VersionConversion {
    /// A template over `object` (an object of this version) that renders the storage
    /// version's `spec` (and `status`).
    pub to_storage: String,
    /// A template over `object` (an object of the storage version) that renders this
    /// version's `spec` (and `status`).
    pub from_storage: String,
}

/// A CRD version's schema: the OpenAPI v3 schema as the API server takes it, or the
/// compact form (`spec`, `status`, `types`; see [`crate::compact_schema`]), which compiles
/// to it. One of the two, not both.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CrdSchema {
    /// A structural OpenAPI v3 schema; `x-kubernetes-validations` (CEL) are allowed.
    #[serde(rename = "openAPIV3Schema", default, skip_serializing_if = "Value::is_null")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub open_api_v3_schema: Value,
    /// The compact form's spec: one `name: type | markers` line per field, a mapping for
    /// an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub spec: Option<Value>,
    /// The compact form's status fields; without them any status is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub status: Option<Value>,
    /// The compact form's named types, as kro's `types`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub types: Option<Value>,
}

impl CrdSchema {
    /// Whether the schema is written in the compact form.
    pub fn is_compact(&self) -> bool {
        self.spec.is_some() || self.status.is_some() || self.types.is_some()
    }
}
