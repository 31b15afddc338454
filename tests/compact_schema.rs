//! A compact-schema definition on the rig, applied as an OperatorDefinition resource: the
//! API server applies the defaults its lines give (nested ones included) and refuses what
//! its markers refuse (minimum, enum, pattern, immutable, monotonic, an object's rule).

mod common;

use std::time::Duration;

use common::{TestNamespace, client, start_stencil, unique_group, wait_established, wait_for};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use stencil::definition::OperatorDefinition;

const TIMEOUT: Duration = Duration::from_secs(90);

/// The book's compact example (concepts/definitions.md), served in `group`, with one ConfigMap child.
fn databases(group: &str) -> OperatorDefinition {
    stencil::yaml::document(&databases_text(group)).unwrap()
}

/// [`databases`] as text.
fn databases_text(group: &str) -> String {
    format!(
        r#"apiVersion: stencil.dev/v1alpha1
kind: OperatorDefinition
metadata:
  name: databases.{group}
spec:
  parent: {{apiVersion: {group}/v1, kind: Database}}
  crd:
    names: {{plural: databases}}
    versions:
      - name: v1
        storage: true
        schema:
          spec:
            engine: string | required=true enum="postgresql,mysql" immutable=true description="The engine"
            version: string | required=true pattern="^[0-9]+\\.[0-9]+$" monotonic=true message="no downgrades"
            replicas: integer | default=1 minimum=1 maximum=10
            tags: "[]string | maxItems=4 uniqueItems=true"
            labels: map[string]string
            resources: object
            storage: quantity | default=1Gi monotonic=true
            limits:
              $self: description="Connection limits" validation="self.min <= self.max" message="min exceeds max"
              min: integer | default=1
              max: integer | default=100
            members: "[]Member | listType=map listMapKey=name"
          status:
            phase: string
          types:
            Member:
              name: dns-label | required=true
              timeout: duration | default=30s
  status:
    fields:
      phase: $.parent.spec.engine
  children:
    - name: config
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: {{{{ parent.metadata.name }}}}
        data:
          engine: {{{{ parent.spec.engine }}}}
"#
    )
}

fn database(group: &str, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({"apiVersion": format!("{group}/v1"), "kind": "Database",
        "metadata": {"name": name}, "spec": spec}))
    .unwrap()
}

/// `stencil validate` names a bad line of a compact schema at its file, line and column,
/// and exits 1, for each kind of mistake.
#[test]
fn validate_reports_each_bad_line_where_it_is() {
    let bad = [
        (
            "            replicas: integer | default=1 minimum=1 maximum=10",
            "            replicas: integer | minimum=one",
            "`one` is not a number",
        ),
        (
            "            labels: map[string]string",
            "            labels: map[string]strng",
            "unknown type `strng`",
        ),
        (
            "            resources: object",
            "            resources: string | maxItems=3",
            "maxItems applies to lists",
        ),
        (
            "            storage: quantity | default=1Gi monotonic=true",
            "            storage: integer | default=1Gi",
            "`1Gi` is not an integer",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("d.yaml");
    for (good, wrong, expect) in bad {
        let text = databases_text("validate.stencil.dev");
        assert!(text.contains(good), "{good}");
        let text = text.replace(good, wrong);
        std::fs::write(&file, &text).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_stencil"))
            .arg("validate")
            .arg(&file)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "validate fails on {wrong}");
        let report = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().position(|l| l == wrong).unwrap() + 1;
        let column = wrong.find(|c: char| c != ' ').unwrap() + 1;
        let at = format!("{}:{line}:{column}:", file.display());
        assert!(
            report.lines().any(|l| l.starts_with(&at) && l.contains(expect)),
            "{at} {expect}:\n{report}"
        );
    }
}

/// The API server's refusal of `result`, or a panic naming `what` if it was accepted.
fn refusal<T>(result: Result<T, kube::Error>, what: &str) -> String {
    match result {
        Ok(_) => panic!("{what} was accepted"),
        Err(kube::Error::Api(status)) => status.message,
        Err(e) => panic!("{what}: {e}"),
    }
}

#[tokio::test]
async fn the_api_server_applies_a_compact_schemas_defaults_and_refuses_what_its_markers_refuse() {
    let client = client().await;
    common::install_crd(&client, &stencil::crd::operator_definition_crd()).await;
    let group = unique_group();
    let name = format!("databases.{group}");
    let defs: Api<OperatorDefinition> = Api::all(client.clone());
    defs.patch(
        &name,
        &PatchParams::apply("test").force(),
        &Patch::Apply(&databases(&group)),
    )
    .await
    .expect("the OperatorDefinition CRD takes the compact form");
    let _stencil = start_stencil(&[], true).await;
    wait_established(&client, &name).await;
    let ns = TestNamespace::new(&client, "compact").await;
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Database"), "databases");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &ar);

    let minimal = json!({"engine": "postgresql", "version": "16.4", "members": [{"name": "a"}]});
    let created = common::create_when_served(&api, &database(&group, "db", minimal)).await;
    let spec = &created.data["spec"];
    assert_eq!(spec["replicas"], 1);
    assert_eq!(spec["storage"], "1Gi");
    assert_eq!(
        spec["limits"],
        json!({"min": 1, "max": 100}),
        "a left-out object gets its fields' defaults"
    );
    assert_eq!(
        spec["members"][0]["timeout"], "30s",
        "defaults inside a named type in a list"
    );

    let post = PostParams::default();
    for (bad, expect) in [
        (
            json!({"engine": "postgresql", "version": "16.4", "replicas": 0}),
            "replicas",
        ),
        (json!({"engine": "oracle", "version": "16.4"}), "engine"),
        (json!({"engine": "mysql", "version": "sixteen"}), "version"),
        (
            json!({"engine": "mysql", "version": "8.4", "storage": "1GB"}),
            "storage",
        ),
        (
            json!({"engine": "mysql", "version": "8.4", "limits": {"min": 5, "max": 2}}),
            "min exceeds max",
        ),
        (json!({"version": "8.4"}), "engine"),
    ] {
        let message = refusal(
            api.create(&post, &database(&group, "bad", bad.clone())).await,
            &bad.to_string(),
        );
        assert!(message.contains(expect), "{bad}: {message}");
    }

    let patch = |spec: Value| {
        let api = api.clone();
        async move {
            api.patch("db", &PatchParams::default(), &Patch::Merge(json!({"spec": spec})))
                .await
        }
    };
    for (change, expect) in [
        (json!({"engine": "mysql"}), "is immutable"),
        (json!({"version": "15.9"}), "no downgrades"),
        (json!({"storage": "512Mi"}), "may not decrease"),
    ] {
        let message = refusal(patch(change.clone()).await, &change.to_string());
        assert!(message.contains(expect), "{change}: {message}");
    }
    patch(json!({"version": "16.10", "storage": "2Gi"}))
        .await
        .expect("an upgrade and a larger volume are allowed");

    let status = wait_for("the parent's status phase", TIMEOUT, || async {
        let db = api.get("db").await.ok()?;
        (db.data["status"]["phase"] == "postgresql").then_some(db.data["status"].clone())
    })
    .await;
    assert!(status["conditions"].is_array(), "{status}");
}
