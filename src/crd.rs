//! CustomResourceDefinitions: the ones Stencil produces, purely (its own OperatorDefinition
//! CRD and the parent CRD a definition declares in `spec.crd`), and installing a
//! definition's parent CRD in the cluster, unless the update could lose data.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionNames, CustomResourceDefinitionSpec,
    CustomResourceDefinitionVersion, CustomResourceSubresourceStatus, CustomResourceSubresources,
    CustomResourceValidation, JSONSchemaProps,
};
use kube::CustomResourceExt;
use kube::api::ObjectMeta;

use crate::compile::CompiledDefinition;
use crate::definition::{CrdScope, OperatorDefinition};
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
    /// The API server refused the CRD.
    #[error("cannot apply CRD {name}: {source}")]
    Apply {
        /// The CRD's name.
        name: String,
        /// What the server said.
        #[source]
        source: kube::Error,
    },
    /// The update could lose data; the live CRD is left as it is.
    #[error("{location}: refusing to update CRD {name}: {}; set the annotation stencil.dev/allow-breaking-changes: \"true\" on the definition to force it", changes.join("; "))]
    Breaking {
        /// The CRD's name.
        name: String,
        /// Each breaking change, with its version and path.
        changes: Vec<String>,
        /// Where `spec.crd` is written.
        location: String,
    },
    /// The CRD was applied but the API server does not serve it yet.
    #[error("CRD {0} is not Established yet")]
    NotEstablished(String),
}

/// The OperatorDefinition CRD, as `stencil crd` prints it and the chart ships it.
pub fn operator_definition_crd() -> CustomResourceDefinition {
    OperatorDefinition::crd()
}

/// The parent CRD a definition declares, or `None` when it has no `spec.crd`. Every
/// version gets the status subresource, since Stencil writes parent status through it.
pub fn parent_crd(def: &CompiledDefinition) -> Result<Option<CustomResourceDefinition>, CrdError> {
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
            name: Some(format!("{}.{}", crd.names.plural, group)),
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
            conversion: None,
            preserve_unknown_fields: None,
        },
        status: None,
    }))
}

/// Applies a definition's parent CRD, unless the live one already matches (so a restart
/// writes nothing), and waits up to 10 s until it is Established.
pub async fn install(client: &kube::Client, def: &CompiledDefinition) -> Result<(), CrdError> {
    use crate::reconcile::diff::{live_contains, live_hash, with_hash};
    use kube::ResourceExt;
    use kube::api::{Api, Patch, PatchParams};

    let Some(crd) = parent_crd(def)? else {
        return Ok(());
    };
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd.name_any();
    let (desired, hash) = with_hash(serde_json::to_value(&crd).unwrap_or_default());
    let live_crd = api.get_opt(&name).await.ok().flatten();
    let live = live_crd.as_ref().and_then(|c| serde_json::to_value(c).ok());
    let current = live.is_some_and(|l| live_hash(&l) == Some(hash.as_str()) && live_contains(&l, &desired));
    if !current {
        if let Some(live) = &live_crd
            && !def.allow_breaking_changes
        {
            let changes = crate::schema_change::breaking_changes(live, &crd);
            if !changes.is_empty() {
                return Err(CrdError::Breaking {
                    name,
                    changes,
                    location: def.crd_location(),
                });
            }
        }
        let params = PatchParams::apply(labels::FIELD_MANAGER).force();
        api.patch(&name, &params, &Patch::Apply(&desired))
            .await
            .map_err(|source| CrdError::Apply {
                name: name.clone(),
                source,
            })?;
    }
    for _ in 0..100 {
        let established = api
            .get(&name)
            .await
            .ok()
            .and_then(|c| c.status)
            .and_then(|s| s.conditions)
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Established" && c.status == "True"));
        if established {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Err(CrdError::NotEstablished(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn the_chart_ships_the_generated_crd() {
        let generated = crate::yaml::to_stream(&[serde_json::to_value(operator_definition_crd()).unwrap()]).unwrap();
        let shipped = include_str!("../charts/stencil/crds/operatordefinitions.stencil.dev.yaml");
        assert!(
            shipped == generated,
            "charts/stencil/crds/operatordefinitions.stencil.dev.yaml is stale; run `make chart`"
        );
    }

    #[test]
    fn the_operator_definition_crd_is_cluster_scoped_with_status() {
        let crd = operator_definition_crd();
        assert_eq!(crd.metadata.name.as_deref(), Some("operatordefinitions.stencil.dev"));
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(crd.spec.names.short_names, Some(vec!["opdef".to_string()]));
        let v = &crd.spec.versions[0];
        assert!(v.subresources.as_ref().and_then(|s| s.status.as_ref()).is_some());
        let schema = serde_json::to_value(v.schema.as_ref().unwrap()).unwrap();
        assert_eq!(
            schema.pointer("/openAPIV3Schema/properties/spec/properties/children/items/properties/template/type"),
            Some(&Value::from("string"))
        );
    }
}
