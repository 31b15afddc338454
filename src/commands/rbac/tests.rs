use super::*;
use stencil::compile::compile_file;

impl RuleSet {
    /// Whether the set allows `verb` on `group/resource` for an object named `name`.
    fn allows(&self, group: &str, resource: &str, verb: &str, name: Option<&str>) -> bool {
        self.rules.iter().any(|((g, r, names), verbs)| {
            g == group
                && r == resource
                && verbs.contains(verb)
                && (names.is_empty() || name.is_some_and(|n| names.iter().any(|x| x == n)))
        })
    }
}

fn bundled() -> Vec<CompiledDefinition> {
    let mut defs = Vec::new();
    for name in [
        "database",
        "website",
        "tenant",
        "namespace-defaults",
        "secret-propagation",
        "service-per-pod",
    ] {
        let path = format!("{}/operators/{name}.yaml", env!("CARGO_MANIFEST_DIR"));
        let (d, diags) = compile_file(&path, &std::fs::read_to_string(&path).unwrap());
        assert!(diags.0.is_empty(), "{diags}");
        defs.extend(d);
    }
    defs
}

#[test]
fn the_chart_ships_the_bundled_operators_rules() {
    let defs = bundled();
    let options = Options {
        name: "stencil".into(),
        ..Options::default()
    };
    let n = needs(&defs, &stencil::compile::scopes(&defs), &options);
    let generated = stencil::yaml::to_string(&json!({"rbac": {
        "clusterRules": n.cluster.policy_rules(),
        "namespacedRules": n.namespaced.policy_rules(),
    }}))
    .unwrap();
    let shipped = include_str!("../../../charts/stencil/files/bundled-rbac.yaml");
    assert!(
        shipped == generated,
        "charts/stencil/files/bundled-rbac.yaml is stale; run `make chart`"
    );
}

#[test]
fn plurals_follow_the_rest_mapper() {
    let p = |kind: &str| plural(&Gvk::parse("v1", kind).unwrap(), &[]);
    assert_eq!(p("ConfigMap"), "configmaps");
    assert_eq!(p("Ingress"), "ingresses");
    assert_eq!(p("NetworkPolicy"), "networkpolicies");
    assert_eq!(p("Endpoints"), "endpoints");
    assert_eq!(p("Gateway"), "gateways");
}

#[test]
fn the_bundled_operators_need_exactly_these_verbs() {
    let defs = bundled();
    let scopes = stencil::compile::scopes(&defs);
    let options = Options {
        cluster_definitions: true,
        name: "stencil".into(),
        ..Options::default()
    };
    let n = needs(&defs, &scopes, &options).cluster;
    assert!(n.allows("examples.stencil.dev", "databases", "watch", None));
    assert!(n.allows("examples.stencil.dev", "databases/status", "patch", None));
    assert!(!n.allows("examples.stencil.dev", "databases", "delete", None));
    assert!(n.allows("apps", "statefulsets", "create", None));
    assert!(n.allows("", "namespaces", "delete", None));
    assert!(n.allows("rbac.authorization.k8s.io", "rolebindings", "patch", None));
    assert!(!n.allows("rbac.authorization.k8s.io", "clusterroles", "patch", None));
    assert!(n.allows("rbac.authorization.k8s.io", "clusterroles", "bind", Some("edit")));
    assert!(!n.allows("rbac.authorization.k8s.io", "clusterroles", "bind", Some("admin")));
    assert!(!n.allows("", "pods", "list", None));
    assert!(n.allows(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        "patch",
        Some("tenants.examples.stencil.dev")
    ));
    assert!(!n.allows(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        "patch",
        Some("other.example.com")
    ));
    assert!(n.allows("apiextensions.k8s.io", "customresourcedefinitions", "create", None));
    assert!(!n.allows("coordination.k8s.io", "leases", "update", None));
    let rules = n.policy_rules();
    assert!(
        rules
            .iter()
            .all(|r| r["verbs"].as_array().unwrap().iter().all(|v| v != "*"))
    );
}

#[test]
fn namespaces_move_namespaced_kinds_into_roles() {
    let defs = bundled();
    let scopes = stencil::compile::scopes(&defs);
    let options = Options {
        namespaces: vec!["a".into(), "b".into()],
        leader_election: true,
        name: "stencil".into(),
        home: "ops".into(),
        ..Options::default()
    };
    let n = needs(&defs, &scopes, &options);
    assert!(n.namespaced.allows("apps", "statefulsets", "patch", None));
    assert!(!n.cluster.allows("apps", "statefulsets", "patch", None));
    assert!(n.cluster.allows("", "namespaces", "create", None));
    assert!(n.namespaced.allows("coordination.k8s.io", "leases", "update", None));
    assert!(
        !n.namespaced.allows("coordination.k8s.io", "leases", "delete", None),
        "leader election alone deletes no Lease"
    );
    let sharded = needs(
        &defs,
        &scopes,
        &Options {
            sharding: true,
            ..options.clone()
        },
    );
    assert!(
        sharded
            .namespaced
            .allows("coordination.k8s.io", "leases", "delete", None)
    );
    let m = manifests(&n, &options);
    let roles: Vec<(&str, &str)> = m
        .iter()
        .filter(|o| o["kind"] == "Role")
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap(),
                o["metadata"]["namespace"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        roles,
        [("stencil-revisions", "ops"), ("stencil", "a"), ("stencil", "b")]
    );
    let revisions = &m.iter().find(|o| o["metadata"]["name"] == "stencil-revisions").unwrap()["rules"][0];
    assert_eq!(
        revisions["resources"],
        json!(["controllerrevisions"]),
        "only revisions, only in Stencil's namespace"
    );
    // Two namespaces share one cluster-wide watch per kind: reading is cluster-wide.
    assert!(n.cluster.allows("apps", "statefulsets", "watch", None));
    assert!(n.cluster.allows("apps", "statefulsets", "list", None));
}

#[test]
fn one_namespace_is_watched_there_alone() {
    let defs = bundled();
    let scopes = stencil::compile::scopes(&defs);
    let options = Options {
        namespaces: vec!["a".into()],
        name: "stencil".into(),
        ..Options::default()
    };
    let n = needs(&defs, &scopes, &options);
    assert!(n.namespaced.allows("apps", "statefulsets", "watch", None));
    assert!(!n.cluster.allows("apps", "statefulsets", "watch", None));
}

#[test]
fn a_decorator_only_reads_the_kind_it_decorates() {
    let defs: Vec<CompiledDefinition> = bundled()
        .into_iter()
        .filter(|d| d.name.starts_with("service-per-pod"))
        .collect();
    let n = needs(&defs, &stencil::compile::scopes(&defs), &Options::default());
    let rules = n.cluster.policy_rules();
    let on = |group: &str, resource: &str| -> Vec<String> {
        rules
            .iter()
            .filter(|r| r["apiGroups"][0] == group && r["resources"][0] == resource)
            .flat_map(|r| r["verbs"].as_array().cloned().unwrap_or_default())
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    };
    assert_eq!(on("apps", "statefulsets"), ["get", "list", "watch"]);
    assert!(on("apps", "statefulsets/status").is_empty() && on("apps", "statefulsets/finalizers").is_empty());
}
