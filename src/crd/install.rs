//! Installing a definition's parent CRD in the cluster: only a CRD Stencil owns, only
//! when it changed, never a change that could lose data, and waiting until it is
//! Established.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use super::{CrdError, Verdict, Webhook, child_kinds, crd_name, is_ours, verdict};
use crate::compile::CompiledDefinition;
use crate::gvk::Gvk;
use crate::labels;

/// Applies a definition's parent CRD, unless the live one already matches (so a restart
/// writes nothing) or the change could lose data, and waits up to 10 s until it is
/// Established. Returns every child kind the CRD records for the definition (see
/// [`child_kinds`]); none when the definition installs no CRD.
pub async fn install(
    client: &kube::Client,
    def: &CompiledDefinition,
    webhook: Option<&Webhook>,
) -> Result<Vec<Gvk>, CrdError> {
    use kube::api::{Api, Patch, PatchParams};

    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let Some(name) = crd_name(def) else {
        return Ok(Vec::new());
    };
    if def.converts() && webhook.is_none() {
        return Err(CrdError::NoWebhook {
            definition: def.name.clone(),
            location: def.crd_location(),
        });
    }
    let live = api.get_opt(&name).await.map_err(|source| CrdError::Read {
        name: name.clone(),
        source,
    })?;
    if let Some(live) = &live
        && !is_ours(live)
    {
        return Err(CrdError::NotOurs {
            name,
            managers: crate::ownership::managers(&serde_json::to_value(live).unwrap_or_default()),
            adopt: labels::ADOPT_CRD,
            location: def.crd_location(),
        });
    }
    let kinds = child_kinds(def, live.as_ref());
    let Some((desired, verdict)) = verdict(def, live.as_ref(), webhook)? else {
        return Ok(kinds);
    };
    match verdict {
        Verdict::Unchanged => {}
        Verdict::Breaking(changes) if !def.allow_breaking_changes => {
            return Err(CrdError::Breaking {
                name,
                changes,
                location: def.crd_location(),
            });
        }
        Verdict::Create | Verdict::Update | Verdict::Breaking(_) => {
            let params = PatchParams::apply(labels::FIELD_MANAGER).force();
            api.patch(&name, &params, &Patch::Apply(&desired))
                .await
                .map_err(|source| CrdError::Apply {
                    name: name.clone(),
                    source,
                })?;
        }
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
            return Ok(kinds);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Err(CrdError::NotEstablished(name))
}
