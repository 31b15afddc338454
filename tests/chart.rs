//! The Helm chart: `helm lint --strict` is clean, every `ci/` values file renders, the
//! manifests hold what production needs, and the chart's generated copies are current.

mod common;

use std::path::Path;

use serde_json::{Value, json};

fn chart() -> String {
    format!("{}/charts/stencil", env!("CARGO_MANIFEST_DIR"))
}

fn template(values: &str) -> Vec<Value> {
    template_with(values, &[])
}

/// The chart rendered with `values` and `extra` arguments.
fn template_with(values: &str, extra: &[&str]) -> Vec<Value> {
    let chart = chart();
    let mut args = vec!["template", "st", &chart, "--namespace", "stencil-system", "-f", values];
    args.extend_from_slice(extra);
    let text = common::run_tool("helm", &args);
    stencil::yaml::documents(&text).unwrap_or_else(|e| panic!("{values}: {e}"))
}

fn find<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

/// The arguments of a Deployment's container.
fn container_args(deploy: &Value) -> Vec<&str> {
    deploy["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect()
}

#[test]
fn helm_lint_is_clean() {
    let out = common::run_tool("helm", &["lint", "--strict", &chart()]);
    assert!(out.contains("0 chart(s) failed"), "{out}");
}

#[test]
fn every_ci_values_file_renders_a_hardened_deployment() {
    let mut files: Vec<_> = std::fs::read_dir(Path::new(&chart()).join("ci"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 4);
    for file in files {
        let objects = template(file.to_str().unwrap());
        let deploy = find(&objects, "Deployment")[0];
        let pod = &deploy["spec"]["template"]["spec"];
        let container = &pod["containers"][0];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{file:?}");
        assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true, "{file:?}");
        assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
        assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
        assert!(container["resources"]["requests"]["memory"].is_string());
        assert_eq!(container["image"], "stencil:0.1.0");
        assert!(!find(&objects, "ServiceAccount").is_empty());
        assert!(!find(&objects, "Service").is_empty());
    }
}

#[test]
fn two_replicas_turn_leader_election_on_with_a_lease_role() {
    let objects = template(&format!("{}/ci/bundled-ha-values.yaml", chart()));
    let deploy = find(&objects, "Deployment")[0];
    let args = container_args(deploy);
    assert!(args.contains(&"--leader-elect"), "{args:?}");
    assert!(args.contains(&"--definitions=/etc/stencil/definitions"), "{args:?}");
    let cm = find(&objects, "ConfigMap")[0];
    assert!(
        cm["data"]["bundled-database.yaml"]
            .as_str()
            .unwrap()
            .contains("kind: OperatorDefinition")
    );
    let role = find(&objects, "ClusterRole")[0];
    let rules = role["rules"].as_array().unwrap();
    assert!(rules.iter().any(|r| r["resources"][0] == "leases"));
    assert!(rules.iter().any(|r| r["resources"][0] == "statefulsets"));
    assert!(
        rules
            .iter()
            .all(|r| r["verbs"].as_array().unwrap().iter().all(|v| v != "*")),
        "generated RBAC has no wildcard"
    );
    assert_eq!(find(&objects, "ServiceMonitor").len(), 1);
}

#[test]
fn sharding_runs_every_replica_as_a_member_that_may_remove_a_dead_members_lease() {
    let objects = template(&format!("{}/ci/sharded-values.yaml", chart()));
    let deploy = find(&objects, "Deployment")[0];
    assert_eq!(deploy["spec"]["replicas"], 3);
    let args = container_args(deploy);
    assert!(args.contains(&"--sharding"), "{args:?}");
    assert!(args.contains(&"--leader-elect"), "{args:?}");
    let lease_rules: Vec<&Value> = find(&objects, "Role")
        .into_iter()
        .chain(find(&objects, "ClusterRole"))
        .flat_map(|r| r["rules"].as_array().unwrap())
        .filter(|r| r["resources"][0] == "leases")
        .collect();
    assert!(!lease_rules.is_empty());
    for rule in lease_rules {
        assert!(
            rule["verbs"].as_array().unwrap().iter().any(|v| v == "delete"),
            "{rule}"
        );
    }
    let unsharded = template(&format!("{}/ci/bundled-ha-values.yaml", chart()));
    let unsharded_args = container_args(find(&unsharded, "Deployment")[0]);
    assert!(!unsharded_args.contains(&"--sharding"), "{unsharded_args:?}");
}

#[test]
fn watch_namespaces_use_roles() {
    let objects = template(&format!("{}/ci/namespaced-values.yaml", chart()));
    let (own, roles): (Vec<&Value>, Vec<&Value>) = find(&objects, "Role").into_iter().partition(|r| {
        r["metadata"]["name"]
            .as_str()
            .is_some_and(|n| n.ends_with("-webhook") || n.ends_with("-revisions"))
    });
    let namespaces: Vec<&str> = roles
        .iter()
        .map(|r| r["metadata"]["namespace"].as_str().unwrap())
        .collect();
    assert_eq!(namespaces, vec!["team-a", "team-b"]);
    let own_namespaces: Vec<&str> = own
        .iter()
        .map(|r| r["metadata"]["namespace"].as_str().unwrap())
        .collect();
    assert_eq!(
        own_namespaces,
        vec!["stencil-system", "stencil-system"],
        "the webhook certificate's and the revisions' Roles are in the release namespace only"
    );
    assert!(
        roles[0]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["resources"][0] == "configmaps")
    );
    // Two namespaces share one cluster-wide watch per kind: the ClusterRole may list and
    // watch configmaps, and never write them.
    let cluster = find(&objects, "ClusterRole")[0];
    let on_configmaps: Vec<&Value> = cluster["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["resources"][0] == "configmaps")
        .collect();
    assert!(!on_configmaps.is_empty(), "{cluster}");
    assert!(
        on_configmaps.iter().all(|r| r["verbs"] == json!(["list", "watch"])),
        "{on_configmaps:?}"
    );
    let args = find(&objects, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"].clone();
    assert!(args.as_array().unwrap().iter().any(|a| a == "--namespace=team-a"));
    assert!(args.as_array().unwrap().iter().any(|a| a == "--no-cluster-definitions"));
}

#[test]
fn the_aggregate_mode_aggregates_labelled_cluster_roles() {
    let objects = template(&format!("{}/ci/aggregate-values.yaml", chart()));
    let roles = find(&objects, "ClusterRole");
    assert!(roles.iter().any(
        |r| r["aggregationRule"]["clusterRoleSelectors"][0]["matchLabels"]["stencil.dev/aggregate-to-stencil"]
            == "true"
    ));
}

#[test]
fn the_chart_ships_the_current_operators_and_version() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for entry in std::fs::read_dir(root.join("operators")).unwrap() {
        let path = entry.unwrap().path();
        let copy = root.join("charts/stencil/operators").join(path.file_name().unwrap());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            std::fs::read_to_string(&copy).unwrap_or_default(),
            "{copy:?} is stale; run `make chart`"
        );
    }
    let chart = std::fs::read_to_string(root.join("charts/stencil/Chart.yaml")).unwrap();
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        chart.contains(&format!("appVersion: \"{version}\"")),
        "Chart.yaml appVersion must be {version}"
    );
}

#[test]
fn the_grafana_dashboard_ships_as_a_labelled_config_map_of_valid_json() {
    let objects = template(&format!("{}/ci/dashboard-values.yaml", chart()));
    let dashboards: Vec<&Value> = find(&objects, "ConfigMap")
        .into_iter()
        .filter(|c| c["metadata"]["labels"]["grafana_dashboard"] == "1")
        .collect();
    assert_eq!(dashboards.len(), 1, "{objects:?}");
    assert_eq!(dashboards[0]["metadata"]["namespace"], "monitoring");
    let json: Value = serde_json::from_str(dashboards[0]["data"]["stencil.json"].as_str().unwrap()).unwrap();
    assert_eq!(json["uid"], "stencil-overview");
    let off = template(&format!("{}/values.yaml", chart()));
    assert!(
        !find(&off, "ConfigMap")
            .iter()
            .any(|c| c["metadata"]["labels"]["grafana_dashboard"] == "1"),
        "off by default"
    );
}

#[test]
fn compat_metacontroller_serves_the_controller_objects_with_their_crds_kept_on_uninstall() {
    let values = format!("{}/ci/metacontroller-values.yaml", chart());
    let objects = template(&values);
    let deploy = find(&objects, "Deployment")[0];
    assert!(container_args(deploy).contains(&"--compat=metacontroller"));
    let crds = find(&objects, "CustomResourceDefinition");
    let names: Vec<&str> = crds.iter().map(|c| c["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "compositecontrollers.metacontroller.k8s.io",
            "decoratorcontrollers.metacontroller.k8s.io"
        ]
    );
    for crd in crds {
        assert_eq!(crd["metadata"]["annotations"]["helm.sh/resource-policy"], "keep");
    }
    let role = find(&objects, "ClusterRole")[0];
    let rules = role["rules"].as_array().unwrap();
    let grants = |resource: &str, verb: &str| {
        rules.iter().any(|r| {
            r["resources"].as_array().unwrap().iter().any(|x| x == resource)
                && r["verbs"].as_array().unwrap().iter().any(|v| v == verb)
        })
    };
    assert!(grants("compositecontrollers", "watch") && grants("decoratorcontrollers/status", "patch"));
    assert!(
        grants("catsets", "patch"),
        "the rules `stencil rbac --controllers` derived"
    );
    let taking_over = template_with(&values, &["--set", "compat.metacontroller.installCRDs=false"]);
    assert!(find(&taking_over, "CustomResourceDefinition").is_empty());
}
