//! The OperatorDefinition `stencil.dev/v1alpha1` resource as Rust types: the serde and
//! schemars shapes of the public definition format and of its status. No logic lives
//! here beyond defaults; validation is the compiler's job.

mod crd_spec;
mod observed;
mod rollout_spec;

pub use crd_spec::{CrdNames, CrdSchema, CrdScope, CrdSpec, CrdVersion, VersionConversion};
pub use observed::{FailingParent, OperatorDefinitionStatus};
pub use rollout_spec::{
    CarriedShare, DEFAULT_PROGRESS_DEADLINE_SECONDS, DEFAULT_REVISION_HISTORY_LIMIT, OnFailure, RolloutPhase,
    RolloutSpec, RolloutStatus, RolloutStep, RolloutStrategy, rollout_problems,
};

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The desired behaviour of one operator: a parent kind, its children and its status rules.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "stencil.dev",
    version = "v1alpha1",
    kind = "OperatorDefinition",
    shortname = "opdef",
    category = "stencil",
    status = "OperatorDefinitionStatus",
    doc = "OperatorDefinition maps a parent kind to templated child resources and JSONPath status rules.",
    printcolumn = r#"{"name":"Parent","type":"string","jsonPath":".spec.parent.kind"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Parents","type":"integer","jsonPath":".status.parentCount"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OperatorDefinitionSpec {
    /// The kind this definition reconciles, or decorates when `decorate` is set.
    pub parent: ParentRef,
    /// When set, the definition is a decorator: it attaches children to existing objects
    /// of the parent kind that match, and never writes those objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decorate: Option<Decorate>,
    /// When set, Stencil installs and updates the parent's CustomResourceDefinition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crd: Option<CrdSpec>,
    /// Read-only objects the templates may read; a change to one re-renders its parents.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lookups: Vec<Lookup>,
    /// A minijinja template of macros and variables the other templates share, imported
    /// by name: `{% import "helpers" as h %}` or `{% from "helpers" import labels %}`.
    /// It sees the importing template's context (`parent`, `children`, `lookups`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helpers: Option<String>,
    /// The child resources, each produced by a minijinja template.
    pub children: Vec<Child>,
    /// JSONPath rules that write the parent's status.
    #[serde(default, skip_serializing_if = "StatusRules::is_empty")]
    pub status: StatusRules,
    /// What happens to children when a parent is deleted.
    #[serde(default)]
    pub finalize: Finalize,
    /// Namespaces other than the parent's own that children and lookups may use.
    /// Empty (the default) confines a namespaced parent to its namespace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_namespaces: Vec<String>,
    /// Seconds between full resyncs of every parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 10))]
    pub resync_seconds: Option<u32>,
    /// How an accepted edit reaches the parents: all at once (the default) or a share at
    /// a time. The CRD is shared by every revision, so a CRD change applies at once.
    #[serde(default, skip_serializing_if = "RolloutSpec::is_default")]
    pub rollout: RolloutSpec,
    /// How many revisions of the definition are kept as `ControllerRevision`s, beside the
    /// ones a rollout serves; 5 unless set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub revision_history_limit: Option<u32>,
}

impl OperatorDefinitionSpec {
    /// Whether the definition decorates existing objects instead of reconciling its own kind.
    pub fn is_decorator(&self) -> bool {
        self.decorate.is_some()
    }
}

/// A Kubernetes kind named by apiVersion and kind.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ParentRef {
    /// `group/version`, or `v1` for the core group.
    pub api_version: String,
    /// The kind, e.g. `Database`.
    pub kind: String,
}

/// Which existing objects of the parent kind a decorator decorates: those matching both
/// selectors (an absent selector matches everything).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Decorate {
    /// A label selector, sent to the API server with the list and watch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// The same shape over annotations, evaluated by Stencil.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotation_selector: Option<LabelSelector>,
    /// Also decorate objects that are children of a Stencil parent (they carry
    /// `stencil.dev/parent-uid`). Off by default, so a decorator never decorates its own
    /// children, or another's, into a chain.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub include_stencil_children: bool,
}

/// An object that templates may read, fetched by name for each parent; or, with
/// `selector`, the list of objects that match.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Lookup {
    /// Id; templates read it as `lookups.<name>`.
    pub name: String,
    /// The object's apiVersion.
    pub api_version: String,
    /// The object's kind.
    pub kind: String,
    /// A template, over `parent`, that renders the object's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_template: Option<String>,
    /// Instead of a name: a label selector (its values may be templates over `parent`);
    /// `lookups.<name>` is then the list of matching objects, sorted by namespace and name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// A template that renders the object's namespace; the parent's namespace by default.
    /// `*` looks in every namespace (selector lookups only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_template: Option<String>,
    /// When true, a missing object renders as absent instead of holding the parent back.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

/// One child entry: a template that renders zero or more objects.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Child {
    /// Id; templates and rules refer to the observed objects as `children.<name>`.
    pub name: String,
    /// How a changed child is brought up to date.
    #[serde(default)]
    pub update_policy: UpdatePolicy,
    /// With `updatePolicy: Recreate` on a kind that holds data (a PersistentVolumeClaim, a
    /// PersistentVolume, a Namespace): the author accepts that recreating the object
    /// destroys what it holds. Without it, such a definition does not compile.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub acknowledge_data_loss: bool,
    /// Children that must be observed and ready before this one is rendered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    /// When true the template may render any number of objects and `children.<name>` is
    /// a list; otherwise it renders at most one and `children.<name>` is that object.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub collection: bool,
    /// A minijinja template that renders YAML documents. One of `template` and `object`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub template: String,
    /// The child written as an object rather than a template, as kro writes one: a
    /// mapping whose strings may hold `${ CEL }` over the same context as a CEL rule
    /// (each child and lookup by its name, the parent as `schema`). A string that is one
    /// `${...}` takes the expression's value and type; `${omit()}` leaves its field out.
    /// `apiVersion` and `kind` are literal. One of `template` and `object`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub object: Option<Value>,
    /// With `object` and `collection: true`, as kro's `forEach`: each entry maps one
    /// variable to a `${...}` giving a list, and the object renders once for each
    /// combination of the values (the first entry outermost), the variables in scope.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub for_each: Vec<BTreeMap<String, String>>,
    /// A rule over the observed object (a JSONPath, one minijinja expression in `{{ }}`
    /// over its fields, or one CEL expression in `${ }`, which also sees the object as
    /// `self`, as `each` and by this child's name); replaces the default readiness rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_when: Option<String>,
    /// A rule over the context (a JSONPath, one minijinja expression in `{{ }}` or one CEL
    /// expression in `${ }`), as kro's `includeWhen`: while it does not hold, the child
    /// renders nothing (its objects are pruned) and counts as ready, and every child that
    /// depends on it is left out too. A sibling it reads must be in `dependsOn`, so the
    /// rule never judges a child that is not there yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_when: Option<String>,
    /// What to do with an existing object of the same name that is not this parent's.
    #[serde(default, skip_serializing_if = "Adopt::is_never")]
    pub adopt: Adopt,
    /// Whether this child is deleted or kept when its parent is; overrides
    /// `finalize.deletionPolicy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_policy: Option<DeletionPolicy>,
}

/// Whether a child may take over an existing object that is not its parent's.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum Adopt {
    /// Never: the parent reports `Conflict` and the object is left alone.
    #[default]
    Never,
    /// When no controller owns it (made by hand, or by Helm): take it over.
    IfUnowned,
}

impl Adopt {
    fn is_never(&self) -> bool {
        *self == Adopt::Never
    }
}

/// How Stencil brings an existing child in line with its template.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum UpdatePolicy {
    /// Server-side apply the new state over the live object. A change the API server
    /// refuses as immutable is reported on the parent (`Immutable`); nothing is deleted.
    #[default]
    InPlace,
    /// Delete the object and create it anew when its rendering changes. The only policy
    /// under which Stencil deletes a child to change it.
    Recreate,
    /// Create the object once and never update it.
    OnCreate,
}

/// Rules that write the parent's status.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StatusRules {
    /// `status.<field>` is set to what the rule gives over the context: the nodes a
    /// JSONPath selects (one node as itself, several as a list, none leaves the field
    /// out), or the value of a `{{ expression }}` or a `${ CEL expression }` (none,
    /// undefined or absent leaves it out).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fields: BTreeMap<String, String>,
    /// Conditions whose status is the truth of a rule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ConditionRule>,
    /// A minijinja template rendering a YAML mapping merged into the status, for computed
    /// values such as a phase. It sees the context plus `ready` and `waiting`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
}

impl StatusRules {
    /// True when no rule is set.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty() && self.conditions.is_empty() && self.template.is_none()
    }
}

/// A condition on the parent whose status follows a rule.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConditionRule {
    /// The condition type, in CamelCase. `Ready`, `Reconciling` and `Stalled` are Stencil's.
    #[serde(rename = "type")]
    pub type_: String,
    /// A rule over the context (a JSONPath, one minijinja expression in `{{ }}` or one CEL
    /// expression in `${ }`); the condition is True when it holds.
    pub when: String,
    /// Once True, the condition stays True while the parent's `metadata.generation` is
    /// the one it was set at, whatever the rule says later (a finished Job-like parent
    /// stays Complete when a Pod is deleted). A spec change evaluates it afresh.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub latch: bool,
    /// Reason when True; `RuleSatisfied` by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Message when True.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// What happens when a parent is deleted: an optional finalize step (its own children,
/// rendered only then, and a rule that ends it), then the teardown of the children.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Finalize {
    /// `Delete` (default) removes the children; `Orphan` leaves them in place.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
    /// Children rendered only while the parent is being deleted, such as a final-backup
    /// Job; same shape as `children`. They are deleted last, after every other child.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<Child>,
    /// A rule (a JSONPath, one minijinja expression in `{{ }}` or one CEL expression in
    /// `${ }`) over the usual context; the teardown of the other children starts once it
    /// holds. Without it, once every finalize child is ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// How long the finalize step may take, counted from the parent's deletion; past it
    /// Stencil emits a Warning `FinalizeTimeout` and tears down anyway.
    #[serde(default = "default_finalize_timeout")]
    #[schemars(range(min = 1))]
    pub timeout_seconds: u32,
    /// Finalizers another controller left on the parents this definition now serves
    /// (kro's `kro.run/finalizer`): a deleted parent that carries one is torn down as
    /// if it carried Stencil's, then released of them all. Stencil never adds them, and
    /// leaves them on parents that are not being deleted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inherit_finalizers: Vec<String>,
}

impl Default for Finalize {
    fn default() -> Self {
        Finalize {
            deletion_policy: DeletionPolicy::default(),
            children: Vec::new(),
            until: None,
            timeout_seconds: default_finalize_timeout(),
            inherit_finalizers: Vec::new(),
        }
    }
}

impl Finalize {
    /// Whether deletion runs a finalize step before the teardown.
    pub fn has_step(&self) -> bool {
        !self.children.is_empty() || self.until.is_some()
    }
}

/// `finalize.timeoutSeconds` unless set: ten minutes.
pub const DEFAULT_FINALIZE_TIMEOUT_SECONDS: u32 = 600;

fn default_finalize_timeout() -> u32 {
    DEFAULT_FINALIZE_TIMEOUT_SECONDS
}

/// Whether a deleted parent's children are deleted or kept.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum DeletionPolicy {
    /// Delete the children with their parent.
    #[default]
    Delete,
    /// Keep the children, stripped of their ownerReferences.
    Orphan,
}

pub(crate) fn default_true() -> bool {
    true
}

pub(crate) fn preserve_unknown_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}
