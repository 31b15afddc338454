//! CustomResourceDefinitions as Stencil produces and judges them, purely: its own
//! OperatorDefinition CRD, the parent CRD a definition declares in `spec.crd`, whether an
//! update of the live one could lose data, and which child kinds a CRD records. Installing
//! one is the cluster side's.

use k8s_openapi::ByteString;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, CustomResourceDefinitionNames, CustomResourceDefinitionSpec,
    CustomResourceDefinitionVersion, CustomResourceSubresourceStatus, CustomResourceSubresources,
    CustomResourceValidation, JSONSchemaProps, ServiceReference, WebhookClientConfig, WebhookConversion,
};
use kube::CustomResourceExt;
use kube::core::ObjectMeta;

use crate::compile::CompiledDefinition;
use crate::definition::{CrdScope, OperatorDefinition};
use crate::gvk::Gvk;
use crate::labels;

/// A parent CRD that cannot be built from its definition.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// A version's schema is not an OpenAPI v3 schema Kubernetes accepts.
    #[error("definition {definition}: spec.crd.versions[{version}].schema: {message}")]
    Schema {
        /// The definition.
        definition: String,
        /// The CRD version.
        version: String,
        /// What was wrong.
        message: String,
    },
}

/// The name of the CRD a definition installs (`<plural>.<group>`), if it declares one.
pub fn crd_name(def: &CompiledDefinition) -> Option<String> {
    def.spec
        .crd
        .as_ref()
        .map(|crd| format!("{}.{}", crd.names.plural, def.parent.group))
}

/// The OperatorDefinition CRD, as `stencil crd` prints it and the chart ships it.
pub fn operator_definition_crd() -> CustomResourceDefinition {
    OperatorDefinition::crd()
}

/// How the API server reaches Stencil's conversion webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A Service in the cluster (the chart's), on its port 443.
    Service {
        /// The Service's namespace.
        namespace: String,
        /// The Service's name.
        name: String,
    },
    /// A URL, for a Stencil outside the cluster: `https://127.0.0.1:9443`.
    Url(String),
}

/// Where the API server sends a CRD's ConversionReviews, and the CA it trusts there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    /// The webhook's address.
    pub endpoint: Endpoint,
    /// The PEM CA bundle that signs the webhook's serving certificate.
    pub ca_bundle: Vec<u8>,
}

/// The path under which the webhook converts the objects of CRD `crd`.
pub fn conversion_path(crd: &str) -> String {
    format!("/convert/{crd}")
}

impl Webhook {
    /// The webhook a live CRD already points at, so an offline comparison keeps it.
    pub fn of_live(live: &CustomResourceDefinition) -> Option<Webhook> {
        let config = live
            .spec
            .conversion
            .as_ref()?
            .webhook
            .as_ref()?
            .client_config
            .as_ref()?;
        let endpoint = match (&config.url, &config.service) {
            (Some(url), _) => Endpoint::Url(
                url.rsplit_once("/convert/")
                    .map_or(url.as_str(), |(u, _)| u)
                    .to_string(),
            ),
            (None, Some(s)) => Endpoint::Service {
                namespace: s.namespace.clone(),
                name: s.name.clone(),
            },
            (None, None) => return None,
        };
        Some(Webhook {
            endpoint,
            ca_bundle: config.ca_bundle.as_ref().map(|b| b.0.clone()).unwrap_or_default(),
        })
    }

    fn conversion(&self, crd: &str) -> CustomResourceConversion {
        let path = conversion_path(crd);
        let (url, service) = match &self.endpoint {
            Endpoint::Url(base) => (Some(format!("{}{path}", base.trim_end_matches('/'))), None),
            Endpoint::Service { namespace, name } => (
                None,
                Some(ServiceReference {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    path: Some(path),
                    port: Some(443),
                }),
            ),
        };
        CustomResourceConversion {
            strategy: "Webhook".into(),
            webhook: Some(WebhookConversion {
                client_config: Some(WebhookClientConfig {
                    ca_bundle: Some(ByteString(self.ca_bundle.clone())),
                    service,
                    url,
                }),
                conversion_review_versions: vec!["v1".into()],
            }),
        }
    }
}

/// The parent CRD a definition declares, or `None` when it has no `spec.crd`. Every
/// version gets the status subresource, since Stencil writes parent status through it.
/// Versions that convert by template point the API server at `webhook`; without one
/// (offline) the CRD carries no conversion, and Stencil adds it when it installs.
///
/// # Errors
///
/// A version's schema is not an OpenAPI v3 schema Kubernetes accepts (`CrdError::Schema`).
pub fn parent_crd(
    def: &CompiledDefinition,
    webhook: Option<&Webhook>,
) -> Result<Option<CustomResourceDefinition>, CrdError> {
    let Some(crd) = &def.spec.crd else {
        return Ok(None);
    };
    let group = def.parent.group.clone();
    let kind = def.parent.kind.clone();
    let versions = crd
        .versions
        .iter()
        .map(|v| {
            let schema: JSONSchemaProps =
                serde_json::from_value(v.schema.open_api_v3_schema.clone()).map_err(|e| CrdError::Schema {
                    definition: def.name.clone(),
                    version: v.name.clone(),
                    message: e.to_string(),
                })?;
            Ok(CustomResourceDefinitionVersion {
                name: v.name.clone(),
                served: v.served,
                storage: v.storage,
                deprecated: v.deprecated.then_some(true),
                deprecation_warning: v.deprecation_warning.clone(),
                schema: Some(CustomResourceValidation {
                    open_api_v3_schema: Some(schema),
                }),
                subresources: Some(CustomResourceSubresources {
                    status: Some(CustomResourceSubresourceStatus(serde_json::json!({}))),
                    scale: v.scale.clone(),
                }),
                additional_printer_columns: (!v.additional_printer_columns.is_empty())
                    .then(|| v.additional_printer_columns.clone()),
                selectable_fields: None,
            })
        })
        .collect::<Result<Vec<_>, CrdError>>()?;
    Ok(Some(CustomResourceDefinition {
        metadata: ObjectMeta {
            name: crd_name(def),
            labels: Some(
                [
                    (labels::MANAGED_BY.to_string(), labels::MANAGED_BY_VALUE.to_string()),
                    (labels::DEFINITION.to_string(), def.name.clone()),
                ]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        spec: CustomResourceDefinitionSpec {
            group,
            names: CustomResourceDefinitionNames {
                kind: kind.clone(),
                list_kind: Some(format!("{kind}List")),
                plural: crd.names.plural.clone(),
                singular: Some(crd.names.singular.clone().unwrap_or_else(|| kind.to_lowercase())),
                short_names: (!crd.names.short_names.is_empty()).then(|| crd.names.short_names.clone()),
                categories: (!crd.names.categories.is_empty()).then(|| crd.names.categories.clone()),
            },
            scope: match crd.scope {
                CrdScope::Namespaced => "Namespaced",
                CrdScope::Cluster => "Cluster",
            }
            .to_string(),
            versions,
            conversion: webhook
                .filter(|_| def.converts())
                .map(|w| w.conversion(&format!("{}.{}", crd.names.plural, def.parent.group))),
            preserve_unknown_fields: None,
        },
        status: None,
    }))
}

/// What applying a definition's CRD over the live one would do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CrdVerdict {
    /// The live CRD already is what the definition declares: nothing to write.
    Unchanged,
    /// There is no live CRD yet.
    Create,
    /// The live CRD changes, and nothing stored can be lost.
    Update,
    /// The live CRD changes in ways that could lose data (refused unless the definition
    /// allows breaking changes), each with its version and path.
    Breaking(Vec<String>),
}

/// The CRD a definition installs, as applied (with its applied-hash annotation), and what
/// applying it over `live` would do. `None` when the definition declares no CRD.
///
/// # Errors
///
/// The definition's CRD cannot be built ([`parent_crd`]).
pub fn verdict(
    def: &CompiledDefinition,
    live: Option<&CustomResourceDefinition>,
    webhook: Option<&Webhook>,
) -> Result<Option<(serde_json::Value, CrdVerdict)>, CrdError> {
    use crate::applied::{live_contains, live_hash, with_hash};
    let Some(mut crd) = parent_crd(def, webhook)? else {
        return Ok(None);
    };
    let kinds = child_kinds(def, live);
    if !kinds.is_empty() {
        let record = kinds.iter().map(Gvk::to_string).collect::<Vec<_>>().join(",");
        crd.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(labels::CHILD_KINDS.to_string(), record);
    }
    let (desired, hash) = with_hash(serde_json::to_value(&crd).unwrap_or_default());
    let verdict = match live {
        None => CrdVerdict::Create,
        Some(l) => {
            let value = serde_json::to_value(l).unwrap_or_default();
            if live_hash(&value) == Some(hash.as_str()) && live_contains(&value, &desired) {
                CrdVerdict::Unchanged
            } else {
                match crate::schema_change::breaking_changes(l, &crd) {
                    changes if changes.is_empty() => CrdVerdict::Update,
                    changes => CrdVerdict::Breaking(changes),
                }
            }
        }
    };
    Ok(Some((desired, verdict)))
}

/// The child kinds `live` records (its [`labels::CHILD_KINDS`] annotation) with the ones
/// `def` writes now (at their current version), sorted: a kind is never forgotten, so
/// its objects stay pruned.
pub fn child_kinds(def: &CompiledDefinition, live: Option<&CustomResourceDefinition>) -> Vec<Gvk> {
    let mut kinds: Vec<Gvk> = live
        .and_then(|l| l.metadata.annotations.as_ref())
        .and_then(|a| a.get(labels::CHILD_KINDS))
        .map(|v| v.split(',').filter_map(parse_kind).collect())
        .unwrap_or_default();
    crate::gvk::remember(&mut kinds, def.all_child_kinds());
    kinds.sort_by_key(Gvk::to_string);
    kinds
}

/// `apiVersion/Kind` (the last `/` splits them) back into a kind.
fn parse_kind(text: &str) -> Option<Gvk> {
    let (api_version, kind) = text.trim().rsplit_once('/')?;
    (!kind.is_empty()).then_some(())?;
    Gvk::parse(api_version, kind).ok()
}

/// Whether `live` carries `def`'s versions: the same version names, the same storage
/// version and the same schema for each. The conversion webhook converts a CRD's objects
/// only with the definition it carries, so an edit refused as breaking (the CRD keeps the
/// old schema) never converts with templates written for a schema the CRD does not have.
pub fn carries(live: &CustomResourceDefinition, def: &CompiledDefinition) -> bool {
    let Ok(Some(built)) = parent_crd(def, None) else {
        return false;
    };
    let shape = |versions: &[CustomResourceDefinitionVersion]| {
        let mut shape: Vec<_> = versions
            .iter()
            .map(|v| (v.name.clone(), v.storage, v.schema.clone()))
            .collect();
        shape.sort_by(|a, b| a.0.cmp(&b.0));
        shape
    };
    crd_name(def).as_deref() == live.metadata.name.as_deref()
        && shape(&live.spec.versions) == shape(&built.spec.versions)
}

/// Whether Stencil may write a live CRD: it installed it (Stencil's managed-by label), or
/// its owner handed it over with the adoption annotation.
pub fn is_ours(live: &CustomResourceDefinition) -> bool {
    let installed = live
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(labels::MANAGED_BY))
        .is_some_and(|v| v == labels::MANAGED_BY_VALUE);
    let handed_over = live
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(labels::ADOPT_CRD))
        .is_some_and(|v| v == "true");
    installed || handed_over
}

#[cfg(test)]
mod tests;
