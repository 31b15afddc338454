//! Storage-version migration: when a definition's CRD stores at a new version while
//! objects may still sit in etcd at an old one, every object is stored anew at the new
//! version, and only then are the old versions dropped from the CRD's
//! `status.storedVersions`. After that an old version can be removed without losing
//! anything. Where the cluster migrates storage itself (a `StorageVersionMigration`,
//! [`cluster`]), Stencil asks it to; elsewhere it rewrites every object (a no-op update
//! the API server stores at the new version). Progress goes to the definition's status.

mod cluster;

use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use sha2::{Digest as _, Sha256};

use crate::compile::CompiledDefinition;

/// Objects listed per page.
const PAGE: u32 = 250;

/// How long the API server may take to start storing at the new version.
const SWITCH_TIMEOUT: Duration = Duration::from_secs(60);

/// A migration that could not finish; it is retried when the definition restarts.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// A request failed.
    #[error("migrating CRD {crd} to storage version {version}: {source}")]
    Api {
        /// The CRD.
        crd: String,
        /// The storage version.
        version: String,
        /// What the API server said.
        source: kube::Error,
    },
    /// Discovery never showed the new storage version.
    #[error(
        "migrating CRD {crd}: the API server did not start storing at {version} within {}s",
        SWITCH_TIMEOUT.as_secs()
    )]
    NotSwitched {
        /// The CRD.
        crd: String,
        /// The storage version.
        version: String,
    },
}

/// Who stores the objects anew.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Method {
    /// The cluster's StorageVersionMigration where it is served and taken up; Stencil's
    /// own rewrite otherwise.
    #[default]
    Auto,
    /// Stencil rewrites every object itself.
    Rewrite,
}

/// Where a migration stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// The CRD's `status.storedVersions` now.
    pub stored_versions: Vec<String>,
    /// Objects Stencil rewrote so far.
    pub migrated: u64,
    /// The StorageVersionMigration doing the work, when the cluster does it.
    pub through: Option<String>,
}

/// The `storageVersionHash` discovery shows for a resource stored at `group/version/kind`.
pub fn storage_version_hash(group: &str, version: &str, kind: &str) -> String {
    let digest = Sha256::digest(format!("{group}/{version}/{kind}").as_bytes());
    base64::engine::general_purpose::STANDARD.encode(&digest[..8])
}

/// Migrates `def`'s parents to its storage version if objects may be stored at another,
/// calling `report` with the progress (once when there is nothing to do).
pub async fn run(
    client: &kube::Client,
    def: &CompiledDefinition,
    method: Method,
    report: impl Fn(Progress),
) -> Result<(), MigrateError> {
    let (Some(crd), Some(version)) = (crate::crd::crd_name(def), def.storage_version()) else {
        return Ok(());
    };
    let version = version.to_string();
    let fail = |source| MigrateError::Api {
        crd: crd.clone(),
        version: version.clone(),
        source,
    };
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let live = crds.get(&crd).await.map_err(fail)?;
    let stored: Vec<String> = live.status.and_then(|s| s.stored_versions).unwrap_or_default();
    if stored.iter().all(|v| *v == version) {
        report(Progress {
            stored_versions: stored,
            migrated: 0,
            through: None,
        });
        return Ok(());
    }
    tracing::info!(crd, from = ?stored, to = %version, "migrating stored objects to the storage version");
    wait_until_storing(client, def, &crd, &version).await?;
    let plural = crd.split('.').next().unwrap_or_default();
    let mut migrated = 0;
    let by_cluster = method == Method::Auto && {
        let name = cluster::name(&crd, &version);
        report(Progress {
            stored_versions: stored.clone(),
            migrated: 0,
            through: Some(name.clone()),
        });
        match cluster::migrate(client, &def.parent.group, plural, &name).await {
            cluster::Outcome::Succeeded => true,
            cluster::Outcome::Unavailable(why) => {
                tracing::info!(
                    crd,
                    why,
                    "the cluster does not migrate storage here; rewriting every object"
                );
                false
            }
        }
    };
    if !by_cluster {
        migrated = rewrite(client, def, plural, &version, |migrated| {
            report(Progress {
                stored_versions: stored.clone(),
                migrated,
                through: None,
            })
        })
        .await
        .map_err(fail)?;
    }
    let status = serde_json::json!({"status": {"storedVersions": [version]}});
    crds.patch_status(&crd, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .map_err(fail)?;
    tracing::info!(crd, migrated, by_cluster, version = %version, "storage migration done; storedVersions pruned");
    report(Progress {
        stored_versions: vec![version.clone()],
        migrated,
        through: by_cluster.then(|| cluster::name(&crd, &version)),
    });
    Ok(())
}

/// Rewrites every object of the parent resource at `version`, page by page; returns how
/// many it rewrote, calling `report` after each page.
async fn rewrite(
    client: &kube::Client,
    def: &CompiledDefinition,
    plural: &str,
    version: &str,
    report: impl Fn(u64),
) -> Result<u64, kube::Error> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&def.parent.group, version, &def.parent.kind),
        plural,
    );
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let mut migrated = 0u64;
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let page = api.list(&params).await?;
        for obj in &page.items {
            let name = obj.metadata.name.clone().unwrap_or_default();
            let scoped: Api<DynamicObject> = match &obj.metadata.namespace {
                Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
                None => Api::all_with(client.clone(), &resource),
            };
            match scoped.replace(&name, &PostParams::default(), obj).await {
                // A conflict means someone wrote it since the list: it is stored anew.
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {}
                Err(e) => return Err(e),
            }
            migrated += 1;
        }
        report(migrated);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(migrated),
        }
    }
}

/// Waits until discovery shows the resource stored at `version`, so that every rewrite
/// lands there.
async fn wait_until_storing(
    client: &kube::Client,
    def: &CompiledDefinition,
    crd: &str,
    version: &str,
) -> Result<(), MigrateError> {
    let want = storage_version_hash(&def.parent.group, version, &def.parent.kind);
    let plural = crd.split('.').next().unwrap_or_default();
    let deadline = tokio::time::Instant::now() + SWITCH_TIMEOUT;
    while tokio::time::Instant::now() < deadline {
        let list = client
            .list_api_group_resources(&format!("{}/{version}", def.parent.group))
            .await;
        let hash = list.ok().and_then(|l| {
            l.resources
                .into_iter()
                .find(|r| r.name == plural)
                .and_then(|r| r.storage_version_hash)
        });
        if hash.as_deref() == Some(want.as_str()) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Err(MigrateError::NotSwitched {
        crd: crd.to_string(),
        version: version.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_storage_version_hash_is_the_api_servers() {
        // As kube-apiserver reports it for apps/v1 Deployments.
        assert_eq!(storage_version_hash("apps", "v1", "Deployment"), "8aSe+NMegvE=");
    }
}
