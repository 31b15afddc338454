//! The exported names, the dashboard against them, and controller-runtime's names.

use super::*;

/// The metric names a PromQL expression reads, without the `_total`, `_bucket`,
/// `_sum` and `_count` suffixes of their samples.
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let bytes: Vec<char> = expr.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_alphabetic() || bytes[i] == '_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == '_') {
                i += 1;
            }
            if bytes.get(i) == Some(&'{') {
                let name: String = bytes[start..i].iter().collect();
                let base = ["_total", "_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s))
                    .unwrap_or(&name)
                    .to_string();
                names.push(base);
            }
        } else {
            i += 1;
        }
    }
    names
}

#[test]
fn the_grafana_dashboard_reads_only_metrics_stencil_exports() {
    let text = std::fs::read_to_string("charts/stencil/files/grafana-dashboard.json").unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    // A family is exported once it has a sample: give every family one.
    let m = Metrics::new();
    let result = |r: &str| ResultLabels {
        controller: "d".into(),
        result: r.into(),
    };
    m.reconcile_total.get_or_create(&result("success")).inc();
    m.reconcile_errors_total.get_or_create(&controller("d")).inc();
    m.reconcile_time_seconds.get_or_create(&controller("d")).observe(0.1);
    m.reconciles_in_flight.get_or_create(&definition("d")).inc();
    m.workqueue_adds_total.get_or_create(&queue("d")).inc();
    m.workqueue_queue_duration_seconds
        .get_or_create(&queue("d"))
        .observe(0.1);
    m.workqueue_retries_total.get_or_create(&queue("d")).inc();
    m.leader_election_master_status.get_or_create(&queue("d")).set(1);
    m.shard_parents
        .get_or_create(&MemberLabel { member: "m".into() })
        .set(1);
    m.fenced_writes_total
        .get_or_create(&ResultLabel { result: "sent".into() })
        .inc();
    m.definitions
        .get_or_create(&StateLabel {
            state: "running".into(),
        })
        .set(1);
    let applied = ApplyLabels {
        definition: "d".into(),
        kind: "ConfigMap".into(),
        result: "created".into(),
    };
    m.children_applied_total.get_or_create(&applied).inc();
    m.apply_skipped_total.get_or_create(&definition("d")).inc();
    m.template_render_seconds.get_or_create(&definition("d")).observe(0.1);
    m.rest_client_requests_total
        .get_or_create(&MethodLabel { method: "GET".into() })
        .inc();
    let exported = m.encode();
    let types: Vec<&str> = exported
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    let mut read = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            for name in metric_names(target["expr"].as_str().unwrap()) {
                assert!(
                    types.contains(&name.as_str()),
                    "panel {}: {name} is not exported",
                    panel["title"]
                );
                read += 1;
            }
        }
    }
    assert!(read >= 12, "the panels read the metrics ({read})");
    for needed in [
        "controller_runtime_reconcile",
        "stencil_children_applied",
        "stencil_watched_kinds",
        "leader_election_master_status",
    ] {
        assert!(text.contains(needed), "the dashboard shows {needed}");
    }
}

#[test]
fn controller_runtime_names_are_exported() {
    let metrics = Metrics::new();
    metrics
        .reconcile_total
        .get_or_create(&ResultLabels {
            controller: "d".into(),
            result: "success".into(),
        })
        .inc();
    metrics.workqueue_adds_total.get_or_create(&queue("d")).inc();
    metrics
        .template_render_seconds
        .get_or_create(&definition("d"))
        .observe(0.001);
    let text = metrics.encode();
    assert!(
        text.contains("controller_runtime_reconcile_total{controller=\"d\",result=\"success\"}"),
        "{text}"
    );
    assert!(text.contains("workqueue_adds_total{name=\"d\"}"), "{text}");
    assert!(
        text.contains("# TYPE stencil_template_render_seconds histogram"),
        "{text}"
    );
}
