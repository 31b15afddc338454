//! Group/version/kind names, and which built-in kinds are cluster-scoped. The renderer
//! needs scopes without a cluster; the controller adds what discovery knows.

use std::collections::BTreeSet;

/// A kind named by its group, version and kind.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Gvk {
    /// The API group; empty for the core group.
    pub group: String,
    /// The version, e.g. `v1`.
    pub version: String,
    /// The kind, e.g. `Deployment`.
    pub kind: String,
}

/// An apiVersion that is not `version` or `group/version`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not an apiVersion; write `group/version`, or `v1` for the core group")]
pub struct ApiVersionError(pub String);

impl Gvk {
    /// Builds a GVK from an apiVersion and a kind.
    ///
    /// # Errors
    ///
    /// `api_version` is neither `group/version` nor a bare core version.
    pub fn parse(api_version: &str, kind: &str) -> Result<Gvk, ApiVersionError> {
        let bad = || ApiVersionError(api_version.to_string());
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) if !g.is_empty() && !v.is_empty() && !v.contains('/') => (g, v),
            Some(_) => return Err(bad()),
            None if !api_version.is_empty() => ("", api_version),
            None => return Err(bad()),
        };
        if api_version.chars().any(char::is_whitespace) {
            return Err(bad());
        }
        Ok(Gvk {
            group: group.to_string(),
            version: version.to_string(),
            kind: kind.to_string(),
        })
    }

    /// `group/version`, or the bare version for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// Adds `kinds` to `seen`. A kind `seen` holds at another version is replaced: both
/// versions name the same objects, and watching both would count each object twice.
pub fn remember(seen: &mut Vec<Gvk>, kinds: impl IntoIterator<Item = Gvk>) {
    for kind in kinds {
        seen.retain(|s| s.group != kind.group || s.kind != kind.kind);
        seen.push(kind);
    }
}

impl std::fmt::Display for Gvk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.api_version(), self.kind)
    }
}

/// Built-in kinds that are cluster-scoped, as `(group, kind)`.
const CLUSTER_SCOPED: &[(&str, &str)] = &[
    ("", "Namespace"),
    ("", "Node"),
    ("", "PersistentVolume"),
    ("", "ComponentStatus"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("storage.k8s.io", "StorageClass"),
    ("storage.k8s.io", "CSIDriver"),
    ("storage.k8s.io", "CSINode"),
    ("storage.k8s.io", "VolumeAttachment"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("node.k8s.io", "RuntimeClass"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding"),
    ("certificates.k8s.io", "CertificateSigningRequest"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    ("networking.k8s.io", "IngressClass"),
    ("networking.k8s.io", "IPAddress"),
    ("networking.k8s.io", "ServiceCIDR"),
    ("resource.k8s.io", "DeviceClass"),
    ("resource.k8s.io", "ResourceSlice"),
    ("stencil.dev", "OperatorDefinition"),
];

/// Knows whether a kind is namespaced: the built-in table plus kinds added by the caller
/// (the definitions' own CRDs, or what discovery reports).
#[derive(Debug, Clone, Default)]
pub struct Scopes {
    cluster: BTreeSet<(String, String)>,
    namespaced: BTreeSet<(String, String)>,
}

impl Scopes {
    /// Records a kind's scope, overriding the built-in table.
    pub fn insert(&mut self, group: &str, kind: &str, namespaced: bool) {
        let key = (group.to_string(), kind.to_string());
        if namespaced {
            self.cluster.remove(&key);
            self.namespaced.insert(key);
        } else {
            self.namespaced.remove(&key);
            self.cluster.insert(key);
        }
    }

    /// Whether objects of the kind live in a namespace; unknown kinds are namespaced.
    pub fn is_namespaced(&self, gvk: &Gvk) -> bool {
        let key = (gvk.group.clone(), gvk.kind.clone());
        if self.namespaced.contains(&key) {
            return true;
        }
        if self.cluster.contains(&key) {
            return false;
        }
        !CLUSTER_SCOPED.iter().any(|(g, k)| *g == gvk.group && *k == gvk.kind)
    }
}

/// The RBAC rule, as text, that allows `verb` on `resource` of `group`: what a forbidden
/// request names on a status, and what `stencil rbac` tells an admin to grant.
pub fn missing_rule(group: &str, resource: &str, verb: &str) -> String {
    format!("apiGroups: [\"{group}\"], resources: [\"{resource}\"], verbs: [\"{verb}\"]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_core_and_grouped_api_versions() {
        let core = Gvk::parse("v1", "Secret").unwrap();
        assert_eq!((core.group.as_str(), core.version.as_str()), ("", "v1"));
        let apps = Gvk::parse("apps/v1", "Deployment").unwrap();
        assert_eq!(apps.api_version(), "apps/v1");
        assert!(Gvk::parse("a/b/c", "X").is_err());
        assert!(Gvk::parse("", "X").is_err());
        assert!(Gvk::parse("/v1", "X").is_err());
    }

    #[test]
    fn scopes_know_built_ins_and_accept_overrides() {
        let mut scopes = Scopes::default();
        let ns = Gvk::parse("v1", "Namespace").unwrap();
        let tenant = Gvk::parse("example.com/v1", "Tenant").unwrap();
        assert!(!scopes.is_namespaced(&ns));
        assert!(scopes.is_namespaced(&tenant));
        scopes.insert("example.com", "Tenant", false);
        assert!(!scopes.is_namespaced(&tenant));
    }
}
