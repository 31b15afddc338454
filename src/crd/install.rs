//! Installing a definition's parent CRD in the cluster: only a CRD Stencil owns, only
//! when it changed, never a change that could lose data, and waiting until it is
//! Established.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use super::{CrdError, CrdVerdict, Webhook, child_kinds, crd_name, is_ours, verdict};
use crate::compile::CompiledDefinition;
use crate::gvk::Gvk;
use crate::labels;

/// Why a parent CRD was not installed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// The CRD cannot be built from its definition.
    #[error(transparent)]
    Crd(#[from] CrdError),
    /// The live CRD could not be read; nothing is written until it can.
    #[error("cannot read CRD {name}: {source}")]
    Read {
        /// The CRD's name.
        name: String,
        /// What the server said.
        #[source]
        source: kube::Error,
    },
    /// A CRD of that name exists and Stencil did not install it: it is never written.
    #[error(
        "{location}: CRD {name} exists and was not installed by Stencil ({managers}); Stencil leaves it as it is. Remove spec.crd from the definition to serve the CRD as it stands, or annotate the CRD with {adopt}: \"true\" to let Stencil manage it from now on"
    )]
    NotOurs {
        /// The CRD's name.
        name: String,
        /// Who wrote it, from its managed fields.
        managers: String,
        /// The annotation that hands it over.
        adopt: &'static str,
        /// Where `spec.crd` is written.
        location: String,
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
    /// The definition's versions need conversion, and this process serves no webhook.
    #[error(
        "{location}: definition {definition} converts between CRD versions, which needs Stencil's conversion webhook; run with --webhook-service NAMESPACE/NAME (the chart does) or --webhook-url URL"
    )]
    NoWebhook {
        /// The definition.
        definition: String,
        /// Where `spec.crd` is written.
        location: String,
    },
    /// The CRD was applied but the API server does not serve it yet.
    #[error("CRD {0} is not Established yet")]
    NotEstablished(String),
    /// The CRD needs a write that only the leader of a sharded ring makes.
    #[error("CRD {0} differs from the definition's; waiting for the leader to apply it")]
    AwaitingLeader(String),
}

/// Who writes a CRD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Installer {
    /// This process applies it (it runs alone, or leads the ring).
    Apply,
    /// Another process does (a member of a sharded ring that does not lead): this one
    /// checks and waits until the live CRD matches.
    AwaitLeader,
}

/// Applies a definition's parent CRD, unless the live one already matches (so a restart
/// writes nothing) or the change could lose data, and waits up to 10 s until it is
/// Established. Returns every child kind the CRD records for the definition (see
/// [`child_kinds`]); none when the definition installs no CRD.
///
/// # Errors
///
/// The CRD cannot be built or read, exists and is not Stencil's, needs a write that
/// another process makes ([`Installer::AwaitLeader`]), would lose data (without
/// the definition's `allow-breaking-changes`), needs a webhook this process does not serve,
/// is refused by the API server, or is not Established within 10 s.
pub async fn install(
    client: &kube::Client,
    def: &CompiledDefinition,
    webhook: Option<&Webhook>,
    installer: Installer,
) -> Result<Vec<Gvk>, InstallError> {
    use kube::api::{Api, Patch, PatchParams};

    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let Some(name) = crd_name(def) else {
        return Ok(Vec::new());
    };
    if def.converts() && webhook.is_none() {
        return Err(InstallError::NoWebhook {
            definition: def.name.clone(),
            location: def.crd_location(),
        });
    }
    let live = api.get_opt(&name).await.map_err(|source| InstallError::Read {
        name: name.clone(),
        source,
    })?;
    if let Some(live) = &live
        && !is_ours(live)
    {
        return Err(InstallError::NotOurs {
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
        CrdVerdict::Unchanged => {}
        CrdVerdict::Breaking(changes) if !def.allow_breaking_changes => {
            return Err(InstallError::Breaking {
                name,
                changes,
                location: def.crd_location(),
            });
        }
        CrdVerdict::Create | CrdVerdict::Update | CrdVerdict::Breaking(_) if installer == Installer::AwaitLeader => {
            return Err(InstallError::AwaitingLeader(name));
        }
        CrdVerdict::Create | CrdVerdict::Update | CrdVerdict::Breaking(_) => {
            let params = PatchParams::apply(labels::FIELD_MANAGER).force();
            api.patch(&name, &params, &Patch::Apply(&desired))
                .await
                .map_err(|source| InstallError::Apply {
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
    Err(InstallError::NotEstablished(name))
}
