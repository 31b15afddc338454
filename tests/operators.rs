//! The bundled operators against a real API server: Stencil's OperatorDefinition CRD and
//! every parent CRD the bundled definitions declare are accepted and established, each
//! definition round-trips through the cluster as a custom resource, every example parent
//! is valid, and the database's CEL rules reject a downgrade and an engine change.

mod common;

use common::{TestNamespace, client, once_served, wait_established};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use std::path::PathBuf;
use stencil::compile::{CompiledDefinition, compile_resource};
use stencil::definition::OperatorDefinition;
use stencil::source::files;

fn bundled() -> Vec<CompiledDefinition> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("operators");
    let loaded = files::load(&[dir]).unwrap();
    assert!(loaded.diagnostics.is_empty(), "{:?}", loaded.diagnostics);
    assert_eq!(loaded.definitions.len(), 6);
    loaded.definitions
}

/// Applies a CRD with server-side apply and waits for it to be Established.
async fn install(client: &Client, crd: &CustomResourceDefinition) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd.name_any();
    api.patch(&name, &PatchParams::apply("stencil-test").force(), &Patch::Apply(crd))
        .await
        .unwrap_or_else(|e| panic!("CRD {name} rejected: {e}"));
    wait_established(client, &name).await;
}

async fn install_parent_crds(client: &Client) {
    for def in bundled() {
        // Decorators decorate kinds that exist; they install no CRD.
        if let Some(crd) = stencil::crd::parent_crd(&def, None).unwrap() {
            install(client, &crd).await;
        }
    }
}

fn api_for(client: &Client, api_version: &str, kind: &str, plural: &str, ns: Option<&str>) -> Api<DynamicObject> {
    let (group, version) = api_version.split_once('/').unwrap();
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

/// Server-side applies an object, retrying while a just-established kind is not served yet.
async fn apply(api: &Api<DynamicObject>, obj: &Value) -> Result<DynamicObject, kube::Error> {
    let name = obj["metadata"]["name"].as_str().unwrap().to_string();
    let (params, patch) = (PatchParams::apply("stencil-test"), Patch::Apply(obj));
    once_served(|| api.patch(&name, &params, &patch)).await
}

fn example(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples").join(name);
    stencil::yaml::document(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::test]
async fn bundled_definitions_round_trip_as_operator_definition_resources() {
    let client = client().await;
    install(&client, &stencil::crd::operator_definition_crd()).await;
    let api: Api<OperatorDefinition> = Api::all(client.clone());
    for def in bundled() {
        let resource = OperatorDefinition::new(&def.name, def.spec.clone());
        let (params, patch) = (PatchParams::apply("stencil-test").force(), Patch::Apply(&resource));
        let stored = once_served(|| api.patch(&def.name, &params, &patch))
            .await
            .unwrap_or_else(|e| panic!("{} rejected by the OperatorDefinition schema: {e}", def.name));
        assert_eq!(
            stored.spec, def.spec,
            "{} changed on its way through the API server",
            def.name
        );
        compile_resource(&stored).unwrap_or_else(|d| panic!("{d}"));
        // Leave no definitions behind for a Stencil that reads them in another test.
        api.delete(&def.name, &Default::default()).await.unwrap();
    }
}

#[tokio::test]
async fn the_operator_definition_schema_rejects_an_unknown_field() {
    let client = client().await;
    install(&client, &stencil::crd::operator_definition_crd()).await;
    let api = api_for(
        &client,
        "stencil.dev/v1alpha1",
        "OperatorDefinition",
        "operatordefinitions",
        None,
    );
    let bad = json!({"apiVersion": "stencil.dev/v1alpha1", "kind": "OperatorDefinition",
        "metadata": {"name": "typo.example.com"},
        "spec": {"parent": {"apiVersion": "example.com/v1", "kind": "Typo"},
            "children": [{"name": "a", "template": "x", "updatePolicy": "Sometimes"}]}});
    let err = apply(&api, &bad).await.expect_err("an unknown updatePolicy is invalid");
    let kube::Error::Api(status) = err else { panic!("{err}") };
    assert_eq!(status.code, 422, "{status:?}");
    assert!(status.message.contains("updatePolicy"), "{}", status.message);
}

#[tokio::test]
async fn every_example_parent_is_valid_against_its_crd() {
    let client = client().await;
    install_parent_crds(&client).await;
    let ns = TestNamespace::new(&client, "examples").await;
    for (file, kind, plural, namespaced) in [
        ("database.yaml", "Database", "databases", true),
        ("website.yaml", "Website", "websites", true),
        ("tenant.yaml", "Tenant", "tenants", false),
        (
            "secret-propagation.yaml",
            "SecretPropagation",
            "secretpropagations",
            false,
        ),
    ] {
        let mut obj = example(file);
        let api_version = obj["apiVersion"].as_str().unwrap().to_string();
        if namespaced {
            obj["metadata"]["namespace"] = ns.name.clone().into();
        } else {
            obj["metadata"]["name"] = format!("{}-t", ns.name).into();
        }
        let api = api_for(
            &client,
            &api_version,
            kind,
            plural,
            namespaced.then_some(ns.name.as_str()),
        );
        apply(&api, &obj)
            .await
            .unwrap_or_else(|e| panic!("examples/{file} rejected: {e}"));
        if !namespaced {
            api.delete(obj["metadata"]["name"].as_str().unwrap(), &Default::default())
                .await
                .unwrap();
        }
    }
}

#[tokio::test]
async fn the_database_crd_forbids_a_version_downgrade_and_an_engine_change() {
    let client = client().await;
    install_parent_crds(&client).await;
    let ns = TestNamespace::new(&client, "dbcel").await;
    let api = api_for(
        &client,
        "examples.stencil.dev/v1",
        "Database",
        "databases",
        Some(&ns.name),
    );
    let db = |engine: &str, version: &str| {
        json!({"apiVersion": "examples.stencil.dev/v1", "kind": "Database",
            "metadata": {"name": "orders", "namespace": ns.name}, "spec": {"engine": engine, "version": version}})
    };
    let created = apply(&api, &db("postgresql", "16.4")).await.unwrap();
    assert_eq!(created.data["spec"]["replicas"], 1, "the schema default applies");
    for version in ["17.0", "17.10"] {
        apply(&api, &db("postgresql", version))
            .await
            .expect("an upgrade is allowed, compared as a version and not as text");
    }
    for (engine, version, expect) in [
        ("postgresql", "16.9", "version cannot be downgraded"),
        ("postgresql", "17.9", "version cannot be downgraded"),
        ("mysql", "17.10", "engine is immutable"),
        ("postgresql", "seventeen", "spec.version"),
    ] {
        let err = apply(&api, &db(engine, version)).await.expect_err(expect);
        let kube::Error::Api(status) = err else { panic!("{err}") };
        assert_eq!(status.code, 422, "{status:?}");
        assert!(status.message.contains(expect), "{}", status.message);
    }
}
