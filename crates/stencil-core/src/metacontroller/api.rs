//! The `metacontroller.k8s.io/v1alpha1` objects Stencil serves with `--compat
//! metacontroller`: CompositeController and DecoratorController, field for field as
//! metacontroller's API reference documents them, so an object written for metacontroller
//! reads the same here and a CRD printed from these types keeps every field it stores.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::definition::preserve_unknown_object;

/// A controller of a parent kind whose children a sync hook decides.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "metacontroller.k8s.io",
    version = "v1alpha1",
    kind = "CompositeController",
    shortname = "cc",
    shortname = "cctl",
    status = "ControllerStatus",
    doc = "CompositeController: a parent kind whose children a sync hook decides (served by Stencil with --compat metacontroller)."
)]
#[serde(rename_all = "camelCase")]
pub struct CompositeControllerSpec {
    /// The parent kind.
    pub parent_resource: ParentResourceRule,
    /// The kinds of children the hooks return.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub child_resources: Vec<ChildResourceRule>,
    /// The hooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks: Option<CompositeHooks>,
    /// Connection settings per hook host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoint_configs: Vec<EndpointConfig>,
    /// Seconds between syncs of every parent, even when nothing changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resync_period_seconds: Option<i32>,
    /// Children are claimed by a `controller-uid` label instead of the parent's
    /// `spec.selector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generate_selector: Option<bool>,
}

/// A controller that attaches objects to existing objects of one or more kinds.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "metacontroller.k8s.io",
    version = "v1alpha1",
    kind = "DecoratorController",
    shortname = "dec",
    shortname = "decorators",
    status = "ControllerStatus",
    doc = "DecoratorController: attachments a sync hook decides for existing objects (served by Stencil with --compat metacontroller)."
)]
#[serde(rename_all = "camelCase")]
pub struct DecoratorControllerSpec {
    /// The kinds of objects decorated, each with its selectors.
    pub resources: Vec<DecoratorResourceRule>,
    /// The kinds of objects the hooks attach.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<AttachmentRule>,
    /// The hooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks: Option<DecoratorHooks>,
    /// Connection settings per hook host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoint_configs: Vec<EndpointConfig>,
    /// Seconds between syncs of every decorated object, even when nothing changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resync_period_seconds: Option<i32>,
}

/// The controller objects' status, which metacontroller leaves empty; kept as written.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ControllerStatus(pub BTreeMap<String, Value>);

impl JsonSchema for ControllerStatus {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ControllerStatus".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        preserve_unknown_object(generator)
    }
}

/// A kind by `apiVersion` and its plural `resource` name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRule {
    /// `group/version`, or `v1` for the core group.
    pub api_version: String,
    /// The lowercase plural name, e.g. `deployments`.
    pub resource: String,
}

/// The parent kind of a CompositeController.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ParentResourceRule {
    /// The kind.
    #[serde(flatten)]
    pub rule: ResourceRule,
    /// Which parent fields start a rolling update of children.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history: Option<RevisionHistory>,
    /// Only parents with these labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// A change of the status alone does not sync the parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_status_changes: Option<bool>,
}

/// The parent fields whose change rolls children (`["spec"]` when empty).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RevisionHistory {
    /// Dotted paths, e.g. `spec.template`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub field_paths: Vec<String>,
}

/// A kind of child of a CompositeController.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChildResourceRule {
    /// The kind.
    #[serde(flatten)]
    pub rule: ResourceRule,
    /// How an existing child that differs from the hook's answer is brought in line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<ChildUpdateStrategy>,
}

/// How existing children are updated.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChildUpdateStrategy {
    /// `OnDelete` when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<UpdateMethod>,
    /// What an updated child must show before a rolling update goes on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_checks: Option<StatusChecks>,
}

/// How an existing child that differs from the desired one is brought in line.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum UpdateMethod {
    /// Never: only a child deleted by someone else comes back, as the newest sync says.
    #[default]
    OnDelete,
    /// Deleted and created again.
    Recreate,
    /// Updated where it is.
    InPlace,
    /// Recreated one at a time, each passing the status checks first.
    RollingRecreate,
    /// Updated one at a time, each passing the status checks first.
    RollingInPlace,
}

/// The checks of a rolling update.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatusChecks {
    /// Conditions every updated child must have.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<StatusConditionCheck>,
}

/// A condition an updated child must have.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatusConditionCheck {
    /// The condition's type.
    #[serde(rename = "type")]
    pub type_: String,
    /// Its status, when it matters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Its reason, when it matters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The hooks of a CompositeController.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompositeHooks {
    /// Which related objects a parent's sync sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub customize: Option<Hook>,
    /// The desired children and status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync: Option<Hook>,
    /// Called while the parent is deleted, until it answers `finalized: true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalize: Option<Hook>,
    /// Called before a child is updated in a rolling update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_update_child: Option<Hook>,
    /// Called after a child is updated in a rolling update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_update_child: Option<Hook>,
}

/// The hooks of a DecoratorController.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DecoratorHooks {
    /// Which related objects an object's sync sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub customize: Option<Hook>,
    /// The desired attachments, labels, annotations and status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync: Option<Hook>,
    /// Called while the object is deleted, until it answers `finalized: true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalize: Option<Hook>,
}

/// One hook: how to call it and which request shape it takes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Hook {
    /// `v1` (the default) or `v2`: how children are keyed in the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<HookVersion>,
    /// The webhook to call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<Webhook>,
}

/// The request shape of a hook.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HookVersion {
    /// Children keyed by name, or `namespace/name` under a cluster-scoped parent.
    #[default]
    V1,
    /// Children keyed `namespace/name`, or name for a cluster-scoped kind.
    V2,
}

/// How a hook is reached.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Webhook {
    /// The whole URL; it wins over `service` and `path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// A Go duration (`10s`, `1m30s`); 10 s when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Response caching by ETag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<EtagConfig>,
    /// Appended to the service's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The Service the hook is reached through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceReference>,
    /// `loose` or `strict` reading of the response.
    #[serde(default, rename = "responseUnMarshallMode", skip_serializing_if = "Option::is_none")]
    pub response_unmarshall_mode: Option<String>,
    /// The CA that signs an HTTPS hook's certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub ca_bundle: Option<Value>,
    /// A client certificate for mutual TLS.
    #[serde(default, rename = "clientTLS", skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub client_tls: Option<Value>,
    /// A token sent in the `Authorization` header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub authorization: Option<Value>,
    /// HTTP basic authentication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub basic_auth: Option<Value>,
}

/// ETag caching of hook responses.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtagConfig {
    /// Whether responses are cached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Seconds a cached response is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_timeout_seconds: Option<i32>,
    /// Seconds between sweeps of the cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_cleanup_seconds: Option<i32>,
}

/// A Service that serves a hook.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceReference {
    /// The Service's name.
    pub name: String,
    /// The Service's namespace.
    pub namespace: String,
    /// The port; 80 when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    /// `http` (the default) or `https`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
}

/// Connection settings for the hooks of one host.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointConfig {
    /// The host they apply to.
    pub host: String,
    /// The CA that signs the host's certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub ca_bundle: Option<Value>,
    /// A client certificate for mutual TLS.
    #[serde(default, rename = "clientTLS", skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub client_tls: Option<Value>,
    /// A token sent in the `Authorization` header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub authorization: Option<Value>,
    /// HTTP basic authentication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub basic_auth: Option<Value>,
}

/// A kind a DecoratorController decorates, with the selectors an object must match.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DecoratorResourceRule {
    /// The kind.
    #[serde(flatten)]
    pub rule: ResourceRule,
    /// Only objects with these labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Only objects with these annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotation_selector: Option<AnnotationSelector>,
    /// A change of the status alone does not sync the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_status_changes: Option<bool>,
}

/// A label selector's shape over annotations.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnnotationSelector {
    /// Annotations an object must carry with these values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_annotations: BTreeMap<String, String>,
    /// Set-based requirements on annotations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

impl AnnotationSelector {
    /// The same selector in a label selector's terms.
    pub fn as_label_selector(&self) -> LabelSelector {
        LabelSelector {
            match_labels: (!self.match_annotations.is_empty()).then(|| self.match_annotations.clone()),
            match_expressions: (!self.match_expressions.is_empty()).then(|| self.match_expressions.clone()),
        }
    }
}

/// A kind a DecoratorController attaches.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AttachmentRule {
    /// The kind.
    #[serde(flatten)]
    pub rule: ResourceRule,
    /// How an existing attachment that differs from the hook's answer is brought in line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<AttachmentUpdateStrategy>,
}

/// How existing attachments are updated.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AttachmentUpdateStrategy {
    /// `OnDelete` when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<UpdateMethod>,
}
