//! Storage-version migration: when a definition's CRD stores at a new version while
//! objects may still sit in etcd at an old one, every object is stored anew at the new
//! version, and only then are the old versions dropped from the CRD's
//! `status.storedVersions`. After that an old version can be removed without losing
//! anything. Where the cluster migrates storage itself (a `StorageVersionMigration`,
//! `cluster`), Stencil asks it to; elsewhere it rewrites every object (a no-op update
//! the API server stores at the new version). Progress goes to the definition's status.

mod cluster;
mod rewrite;

use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use sha2::{Digest as _, Sha256};

use crate::compile::CompiledDefinition;

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
    /// A finished migration's StorageVersionMigration could not be deleted; the versions
    /// it moved stay in `storedVersions` until it is.
    #[error("migrating CRD {crd}: deleting the finished StorageVersionMigration {name}: {source}")]
    Marker {
        /// The CRD.
        crd: String,
        /// The StorageVersionMigration.
        name: String,
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
    /// Objects Stencil rewrote, or found written since the switch, so far.
    pub migrated: u64,
    /// How many objects there are to look at, when the API server says.
    pub total: Option<u64>,
    /// The StorageVersionMigration doing the work, when the cluster does it.
    pub through: Option<String>,
}

/// The versions `live` may still hold objects at (its `status.storedVersions`) other
/// than `def`'s storage version: what a migration would move.
pub fn pending(def: &CompiledDefinition, live: &CustomResourceDefinition) -> Vec<String> {
    let storage = def.storage_version().unwrap_or_default();
    live.status
        .as_ref()
        .and_then(|s| s.stored_versions.as_ref())
        .map(|v| v.iter().filter(|v| *v != storage).cloned().collect())
        .unwrap_or_default()
}

impl Progress {
    /// Whether every object is stored at the storage version.
    pub fn done(&self) -> bool {
        self.stored_versions.len() <= 1
    }

    /// The `Migrated` condition's message.
    pub fn message(&self) -> String {
        let stored = self.stored_versions.join(", ");
        match (self.done(), &self.through, self.total) {
            (true, Some(svm), _) => {
                format!("every object is stored at {stored} (migrated by StorageVersionMigration {svm})")
            }
            (true, None, _) => format!("every object is stored at {stored}"),
            (false, Some(svm), _) => {
                format!("the cluster migrates the objects stored at {stored} (StorageVersionMigration {svm})")
            }
            (false, None, Some(total)) => {
                format!("rewriting the objects stored at {stored}: {} of {total}", self.migrated)
            }
            (false, None, None) => format!("rewriting the objects stored at {stored}: {} so far", self.migrated),
        }
    }
}

/// One change of a CRD's storage version: from the versions objects may sit at, to the
/// new one, at the CRD's generation. Its markers (the StorageVersionMigration's name and
/// annotation, the rewrite's record on the CRD) name the switch, so a marker left by an
/// earlier switch to the same version (v2, then v3, then v2 again) is never taken for
/// this one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Switch {
    /// `<to>-<hash>`: the version moved to and 8 hex digits of what identifies the switch.
    pub id: String,
}

impl Switch {
    /// The switch from `from` (the stored versions other than `to`) to `to`, decided at
    /// the CRD's `generation`.
    pub fn new(from: &[String], to: &str, generation: i64) -> Switch {
        let mut from = from.to_vec();
        from.sort();
        let digest = Sha256::digest(format!("{}>{to}@{generation}", from.join(",")).as_bytes());
        let hex: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
        Switch {
            id: format!("{to}-{hex}"),
        }
    }
}

/// The `storageVersionHash` discovery shows for a resource stored at `group/version/kind`.
pub fn storage_version_hash(group: &str, version: &str, kind: &str) -> String {
    let digest = Sha256::digest(format!("{group}/{version}/{kind}").as_bytes());
    base64::engine::general_purpose::STANDARD.encode(&digest[..8])
}

/// Migrates `def`'s parents to its storage version if objects may be stored at another,
/// calling `report` with the progress (once when there is nothing to do).
///
/// # Errors
///
/// The CRD cannot be read or patched, the cluster's migration failed, or the rewrite fails;
/// progress made so far is kept and resumes.
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
    let live_annotations = live.metadata.annotations.clone().unwrap_or_default();
    let switch = Switch::new(
        &pending(def, &live),
        &version,
        live.metadata.generation.unwrap_or_default(),
    );
    let nothing_pending = pending(def, &live).is_empty();
    let stored: Vec<String> = live.status.and_then(|s| s.stored_versions).unwrap_or_default();
    if nothing_pending {
        report(Progress {
            stored_versions: stored,
            migrated: 0,
            total: None,
            through: None,
        });
        return Ok(());
    }
    tracing::info!(crd, from = ?stored, to = %version, "migrating stored objects to the storage version");
    wait_until_storing(client, def, &crd, &version).await?;
    let plural = crd.split('.').next().unwrap_or_default();
    let mut migrated = 0;
    let by_cluster = method == Method::Auto && through_cluster(client, def, &crd, &switch, &stored, &report).await?;
    if !by_cluster {
        let target = rewrite::Target {
            crds: &crds,
            crd: &crd,
            switched_at: rewrite::switched_at(&live_annotations, &switch),
            resource: ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk(&def.parent.group, &version, &def.parent.kind),
                plural,
            ),
            switch: &switch,
        };
        migrated = rewrite::run(client, target, |done, total| {
            report(Progress {
                stored_versions: stored.clone(),
                migrated: done,
                total,
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
        total: None,
        through: by_cluster.then(|| cluster::name(&crd, &switch)),
    });
    Ok(())
}

/// Has the cluster's own storage migration store every object anew, saying so first;
/// false when the cluster has none, and the objects are to be rewritten one by one.
async fn through_cluster(
    client: &kube::Client,
    def: &CompiledDefinition,
    crd: &str,
    switch: &Switch,
    stored: &[String],
    report: &impl Fn(Progress),
) -> Result<bool, MigrateError> {
    let plural = crd.split('.').next().unwrap_or_default();
    let name = cluster::name(crd, switch);
    report(Progress {
        stored_versions: stored.to_vec(),
        migrated: 0,
        total: None,
        through: Some(name.clone()),
    });
    match cluster::migrate(client, &def.parent.group, plural, &name, switch).await {
        cluster::Outcome::Succeeded => Ok(true),
        cluster::Outcome::Undeleted(source) => Err(MigrateError::Marker {
            crd: crd.to_string(),
            name,
            source,
        }),
        cluster::Outcome::Unavailable(why) => {
            tracing::info!(
                crd,
                why,
                "the cluster does not migrate storage here; rewriting every object"
            );
            Ok(false)
        }
    }
}

/// Waits until discovery shows the resource stored at `version`, so that every rewrite
/// lands there. Discovery is one API server's answer: with several API servers behind a
/// load balancer, another may still store at the old version for as long as its CRD
/// watch lags (usually well under a second), and the cluster offers no stable way to ask
/// each (the StorageVersion API is alpha); the book says so (concepts/versions.md).
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
    fn progress_says_n_of_m_while_rewriting_and_who_migrated_at_the_end() {
        let mut p = Progress {
            stored_versions: vec!["v1".into(), "v2".into()],
            migrated: 120,
            total: Some(500),
            through: None,
        };
        assert!(!p.done());
        assert_eq!(p.message(), "rewriting the objects stored at v1, v2: 120 of 500");
        p.through = Some("widgets.example.com-v2".into());
        assert!(p.message().contains("StorageVersionMigration widgets.example.com-v2"));
        p.stored_versions = vec!["v2".into()];
        assert!(p.done());
        assert_eq!(
            p.message(),
            "every object is stored at v2 (migrated by StorageVersionMigration widgets.example.com-v2)"
        );
    }

    #[test]
    fn each_storage_switch_has_markers_of_its_own() {
        let v = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let first = Switch::new(&v(&["v1"]), "v2", 3);
        let back = Switch::new(&v(&["v3"]), "v2", 9);
        assert!(first.id.starts_with("v2-") && back.id.starts_with("v2-"));
        assert_ne!(first, back, "v1 -> v2 and, later, v3 -> v2 are two switches");
        assert_ne!(Switch::new(&v(&["v1"]), "v2", 4), first, "another generation");
        assert_eq!(
            Switch::new(&v(&["v3", "v1"]), "v2", 3),
            Switch::new(&v(&["v1", "v3"]), "v2", 3)
        );
        assert_ne!(
            cluster::name("widgets.example.com", &first),
            cluster::name("widgets.example.com", &back),
            "a StorageVersionMigration left by the first switch is not the second's"
        );
    }

    #[test]
    fn the_storage_version_hash_is_the_api_servers() {
        // As kube-apiserver reports it for apps/v1 Deployments.
        assert_eq!(storage_version_hash("apps", "v1", "Deployment"), "8aSe+NMegvE=");
    }
}
