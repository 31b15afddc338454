//! Least-privilege RBAC derived from definitions, purely: exactly the verbs the controller
//! uses on each parent, child and lookup kind, what its RBAC children need (`grants`),
//! what metacontroller's controller objects need (`compat`), plus what Stencil itself
//! needs.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use stencil::compile::CompiledDefinition;
use stencil::gvk::{Gvk, Scopes};

pub mod compat;
mod grants;

/// Verbs on a parent kind: read it, and patch its finalizers.
pub const PARENT_VERBS: &[&str] = &["get", "list", "watch", "patch"];
/// Verbs on a decorated kind: a decorator only reads its parents.
pub const DECORATED_VERBS: &[&str] = &["get", "list", "watch"];
/// Verbs on a parent's status subresource.
pub const STATUS_VERBS: &[&str] = &["patch"];
/// Verbs on a parent's finalizers subresource: needed to set `blockOwnerDeletion`.
pub const FINALIZER_VERBS: &[&str] = &["update"];
/// Verbs on a child kind: read one not in the store yet, watch, server-side apply (which
/// may create), prune.
pub const CHILD_VERBS: &[&str] = &["get", "list", "watch", "create", "patch", "delete"];
/// Verbs on a lookup kind.
pub const LOOKUP_VERBS: &[&str] = &["list", "watch"];

/// The resource (plural) of a kind: the definition's CRD plural, a known built-in, or
/// the same guess the Kubernetes REST mapper makes.
pub fn plural(gvk: &Gvk, defs: &[CompiledDefinition]) -> String {
    for def in defs {
        if let Some(crd) = &def.spec.crd
            && def.parent.group == gvk.group
            && def.parent.kind == gvk.kind
        {
            return crd.names.plural.clone();
        }
    }
    let lower = gvk.kind.to_lowercase();
    match lower.as_str() {
        "endpoints" => lower,
        _ if lower.ends_with('s') || lower.ends_with("ch") || lower.ends_with("sh") || lower.ends_with('x') => {
            format!("{lower}es")
        }
        _ if lower.ends_with('y') && !lower.ends_with("ay") && !lower.ends_with("ey") && !lower.ends_with("oy") => {
            format!("{}ies", &lower[..lower.len() - 1])
        }
        _ => format!("{lower}s"),
    }
}

/// Rules keyed by (apiGroup, resource, resource names), with their verbs.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RuleSet {
    rules: BTreeMap<(String, String, Vec<String>), BTreeSet<String>>,
}

impl RuleSet {
    /// Grants verbs on a resource, optionally only on the named objects.
    pub fn grant(&mut self, group: &str, resource: &str, verbs: &[&str], names: &[String]) {
        let mut names = names.to_vec();
        names.sort();
        names.dedup();
        let verbs_of = self
            .rules
            .entry((group.to_string(), resource.to_string(), names))
            .or_default();
        verbs_of.extend(verbs.iter().map(|v| v.to_string()));
    }

    /// True when no rule is granted.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rules as Kubernetes PolicyRules, sorted.
    pub fn policy_rules(&self) -> Vec<Value> {
        self.rules
            .iter()
            .map(|((group, resource, names), verbs)| {
                let mut rule = json!({"apiGroups": [group], "resources": [resource], "verbs": verbs});
                if !names.is_empty() {
                    rule["resourceNames"] = json!(names);
                }
                rule
            })
            .collect()
    }
}

/// Options of the generated RBAC.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Namespaces to confine namespaced kinds to (Roles); empty means cluster-wide.
    pub namespaces: Vec<String>,
    /// Whether leader election is on (it needs Leases).
    pub leader_election: bool,
    /// Whether the parents are sharded (the sharder deletes a dead member's Lease).
    pub sharding: bool,
    /// Whether OperatorDefinition resources are served.
    pub cluster_definitions: bool,
    /// Name prefix of the generated roles.
    pub name: String,
    /// Stencil's own namespace, where it keeps each definition's revisions.
    pub home: String,
}

/// What Stencil needs: the cluster-wide rules, and the rules for namespaced kinds (granted
/// cluster-wide too when no namespace is given).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Needs {
    /// Rules on cluster-scoped kinds (and on every kind without namespaces).
    pub cluster: RuleSet,
    /// Rules on namespaced kinds, for each namespace's Role.
    pub namespaced: RuleSet,
    /// What could not be derived, each with the rule an admin must add for it.
    pub notes: Vec<String>,
}

/// Derives Stencil's needs for these definitions.
pub fn needs(defs: &[CompiledDefinition], scopes: &Scopes, options: &Options) -> Needs {
    let mut granter = Granter {
        needs: Needs::default(),
        scopes,
        options,
    };
    let mut crd_names = Vec::new();
    for def in defs {
        granter.definition(def, defs);
        if let Some(crd) = &def.spec.crd {
            crd_names.push(format!("{}.{}", crd.names.plural, def.parent.group));
        }
    }
    let mut needs = granter.needs;
    for def in defs {
        let (grants, mut notes) = grants::rbac_children(def);
        for g in grants {
            let target = if g.cluster_wide || options.namespaces.is_empty() {
                &mut needs.cluster
            } else {
                &mut needs.namespaced
            };
            let verbs: Vec<&str> = g.verbs.iter().map(String::as_str).collect();
            target.grant(&g.group, &g.resource, &verbs, &g.names);
        }
        needs.notes.append(&mut notes);
    }
    if !crd_names.is_empty() {
        grant_crds(&mut needs.cluster, &crd_names);
    }
    grant_own(&mut needs, options);
    needs
}

/// Grants a definition's kinds where they are served: namespaced kinds in each
/// namespace's Role when Stencil serves a few, everything else cluster-wide.
struct Granter<'a> {
    needs: Needs,
    scopes: &'a Scopes,
    options: &'a Options,
}

impl Granter<'_> {
    /// Grants `verbs` on `resource` of `gvk`'s group.
    fn grant(&mut self, gvk: &Gvk, resource: &str, verbs: &[&str]) {
        let confined = self.scopes.is_namespaced(gvk) && !self.options.namespaces.is_empty();
        // Several namespaces share one cluster-wide watch per kind (one store per kind,
        // one connection instead of one per namespace), so reading is granted
        // cluster-wide and writing stays in each namespace's Role.
        if confined && self.options.namespaces.len() > 1 {
            let reading: Vec<&str> = verbs
                .iter()
                .copied()
                .filter(|v| matches!(*v, "list" | "watch"))
                .collect();
            if !reading.is_empty() {
                self.needs.cluster.grant(&gvk.group, resource, &reading, &[]);
            }
        }
        let target = if confined {
            &mut self.needs.namespaced
        } else {
            &mut self.needs.cluster
        };
        target.grant(&gvk.group, resource, verbs, &[]);
    }

    /// What serving `def` needs: its parents (their status and finalizers, or a
    /// decorator's labels), its children's and lookups' kinds, and the parents' update
    /// for a storage-version migration.
    fn definition(&mut self, def: &CompiledDefinition, defs: &[CompiledDefinition]) {
        let parent = plural(&def.parent, defs);
        if def.spec.is_decorator() {
            self.grant(&def.parent, &parent, DECORATED_VERBS);
        } else {
            self.grant(&def.parent, &parent, PARENT_VERBS);
            self.grant(&def.parent, &format!("{parent}/status"), STATUS_VERBS);
            self.grant(&def.parent, &format!("{parent}/finalizers"), FINALIZER_VERBS);
        }
        for gvk in def.all_child_kinds() {
            self.grant(&gvk, &plural(&gvk, defs), CHILD_VERBS);
        }
        for gvk in def.lookup_kinds() {
            self.grant(&gvk, &plural(&gvk, defs), LOOKUP_VERBS);
        }
        if def.spec.crd.is_some() {
            // A storage-version migration rewrites every parent with a no-op update.
            self.grant(&def.parent, &parent, &["update"]);
        }
    }
}

/// What installing the parents' CRDs needs. Creating cannot be limited by name; reading
/// and applying can, and so can the webhook's watch of a converting CRD (it selects the
/// CRD by its name).
fn grant_crds(cluster: &mut RuleSet, crd_names: &[String]) {
    cluster.grant("apiextensions.k8s.io", "customresourcedefinitions", &["create"], &[]);
    cluster.grant(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        &["get", "list", "watch", "patch"],
        crd_names,
    );
    cluster.grant(
        "apiextensions.k8s.io",
        "customresourcedefinitions/status",
        &["patch"],
        crd_names,
    );
    // The cluster's own storage migration, named after the CRD and the version.
    cluster.grant(
        "storagemigration.k8s.io",
        "storageversionmigrations",
        &["create", "get", "delete"],
        &[],
    );
}

/// What Stencil needs for itself: events, Leases, and the OperatorDefinitions it serves.
fn grant_own(needs: &mut Needs, options: &Options) {
    let own = if options.namespaces.is_empty() {
        &mut needs.cluster
    } else {
        &mut needs.namespaced
    };
    own.grant("events.k8s.io", "events", &["create", "patch"], &[]);
    if options.leader_election || options.sharding {
        let mut verbs = vec!["get", "list", "watch", "create", "update", "patch"];
        if options.sharding {
            verbs.push("delete");
        }
        own.grant("coordination.k8s.io", "leases", &verbs, &[]);
    }
    if options.cluster_definitions {
        needs
            .cluster
            .grant("stencil.dev", "operatordefinitions", &["list", "watch"], &[]);
        needs
            .cluster
            .grant("stencil.dev", "operatordefinitions/status", &["get", "patch"], &[]);
    }
}

/// The ClusterRole and the per-namespace Roles as Kubernetes objects.
pub fn manifests(needs: &Needs, options: &Options) -> Vec<Value> {
    let labels = json!({"app.kubernetes.io/managed-by": "stencil", "app.kubernetes.io/component": "rbac"});
    let mut out = vec![json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": options.name, "labels": labels},
        "rules": needs.cluster.policy_rules(),
    })];
    // The definitions' revisions, in Stencil's namespace only.
    out.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": format!("{}-revisions", options.name), "namespace": options.home, "labels": labels},
        "rules": [{"apiGroups": ["apps"], "resources": ["controllerrevisions"],
                   "verbs": ["get", "list", "watch", "create", "patch", "delete"]}],
    }));
    if !needs.namespaced.is_empty() {
        for ns in &options.namespaces {
            out.push(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": options.name, "namespace": ns, "labels": labels},
                "rules": needs.namespaced.policy_rules(),
            }));
        }
    }
    out
}

/// A binding of each role in `roles` to the ServiceAccount `namespace/name`.
pub fn bindings(roles: &[Value], namespace: &str, name: &str) -> Vec<Value> {
    let subject = json!([{"kind": "ServiceAccount", "name": name, "namespace": namespace}]);
    roles
        .iter()
        .map(|role| {
            let kind = role["kind"].as_str().unwrap_or_default();
            let mut binding = json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": format!("{kind}Binding"),
                "metadata": role["metadata"].clone(),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role["metadata"]["name"]},
                "subjects": subject,
            });
            if let Some(meta) = binding["metadata"].as_object_mut() {
                meta.remove("labels");
            }
            binding
        })
        .collect()
}

#[cfg(test)]
mod tests;
