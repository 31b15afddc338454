//! kro and Stencil side by side on the rig. Each of kro's examples (its RGD, its instance
//! and the objects it expects) is served by kro, then, imported by `stencil import kro`
//! into a group of its own, by Stencil: the children each makes, normalised (the labels
//! and annotations each controller writes for itself, owner references, managed fields,
//! server-assigned fields and status left out), and the instance's status values are
//! the same. One example (kro's AWS network stack) makes collections of kinds nothing
//! acts on here: the test writes their status as their controller would.

mod common;

use std::collections::BTreeMap;

use common::kro::{TIMEOUT, apply};
use common::{client, start_stencil, wait_for};
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::pinned_kind;
use serde_json::{Value, json};

/// One of kro's examples: its RGD, its instance, objects it expects to exist, and the
/// status the controllers of its children's kinds would write (by kind, `{name}` standing
/// for the object's name), which the test writes in their place.
struct Example {
    rgd: Source,
    instance: Source,
    expects: &'static [Source],
    observed: &'static [(&'static str, &'static str)],
}

/// Where an example's RGD, instance or expected objects come from.
enum Source {
    /// A file of kro's module.
    Kro(&'static str),
    /// Written here: an example kro's suites write in Go, or an instance kro ships none of.
    Here(&'static str),
}

impl Source {
    /// The file name messages give, and the text.
    fn read(&self, module: &std::path::Path) -> (String, String) {
        match self {
            Source::Kro(path) => (path.to_string(), std::fs::read_to_string(module.join(path)).unwrap()),
            Source::Here(text) => ("kro_differential.rs".to_string(), text.to_string()),
        }
    }

    /// The YAML documents.
    fn documents(&self, module: &std::path::Path) -> Vec<Value> {
        stencil::yaml::documents(&self.read(module).1).unwrap()
    }
}

/// An instance of kro's AWS network stack: two availability zones, so each subnet
/// collection holds two Subnets.
const NETWORK_STACK: &str = "
apiVersion: kro.run/v1alpha1
kind: NetworkStack
metadata:
  name: demo-net
spec:
  vpcName: demo
  cidrBlock: 10.42.0.0/16
  region: us-west-2
  availabilityZones: [us-west-2a, us-west-2b]
";

/// The ACK EC2 kinds the network stack makes, with their plurals. Their CRDs are stubs
/// that keep any field: nothing acts on AWS, the test writes the status ACK would.
const ACK_EC2: [(&str, &str); 7] = [
    ("VPC", "vpcs"),
    ("InternetGateway", "internetgateways"),
    ("RouteTable", "routetables"),
    ("Subnet", "subnets"),
    ("ElasticIPAddress", "elasticipaddresses"),
    ("NATGateway", "natgateways"),
    ("SecurityGroup", "securitygroups"),
];

const EXAMPLES: [Example; 7] = [
    Example {
        rgd: Source::Kro("examples/kubernetes/webapp/rg.yaml"),
        instance: Source::Kro("examples/kubernetes/webapp/instance.yaml"),
        expects: &[],
        observed: &[],
    },
    Example {
        rgd: Source::Kro("examples/kubernetes/additionalPrinterColumns/rg.yaml"),
        instance: Source::Kro("examples/kubernetes/additionalPrinterColumns/instance.yaml"),
        expects: &[],
        observed: &[],
    },
    Example {
        rgd: Source::Kro("test/e2e/chainsaw/check-instance-creation/rgd.yaml"),
        instance: Source::Kro("test/e2e/chainsaw/check-instance-creation/instance.yaml"),
        expects: &[],
        observed: &[],
    },
    Example {
        rgd: Source::Kro("test/e2e/chainsaw/check-multi-resource-rgd/rgd.yaml"),
        instance: Source::Kro("test/e2e/chainsaw/check-multi-resource-rgd/instance.yaml"),
        expects: &[],
        observed: &[],
    },
    Example {
        rgd: Source::Kro("test/e2e/chainsaw/check-external-references/rgd.yaml"),
        instance: Source::Kro("test/e2e/chainsaw/check-external-references/instance.yaml"),
        expects: &[Source::Kro(
            "test/e2e/chainsaw/check-external-references/configmap.yaml",
        )],
        observed: &[],
    },
    Example {
        rgd: Source::Kro("examples/aws/aws-accounts-factory/01-network-stack.yaml"),
        instance: Source::Here(NETWORK_STACK),
        expects: &[],
        observed: &[
            ("VPC", r#"{"vpcID": "vpc-{name}"}"#),
            ("Subnet", r#"{"subnetID": "subnet-{name}"}"#),
            ("SecurityGroup", r#"{"id": "sg-{name}"}"#),
        ],
    },
    Example {
        rgd: Source::Here(SELECTED_RGD),
        instance: Source::Here(SELECTED_INSTANCE),
        expects: &[Source::Here(SELECTED_CONFIGMAPS)],
        observed: &[],
    },
];

/// An external collection by label selector, as kro's integration suite writes one (in
/// Go there): every ConfigMap of the team, in every namespace.
const SELECTED_RGD: &str = r#"
apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata:
  name: team-summary
spec:
  schema:
    apiVersion: v1alpha1
    kind: TeamSummary
    spec:
      team: string
    status:
      count: ${size(configs)}
      names: ${configs.map(c, c.metadata.namespace + '/' + c.metadata.name)}
  resources:
    - id: configs
      externalRef:
        apiVersion: v1
        kind: ConfigMap
        metadata:
          selector:
            matchLabels:
              differential-team: ${schema.spec.team}
    - id: summary
      template:
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: ${schema.metadata.name}-summary
        data:
          keys: ${configs.map(c, c.data.key).join(",")}
"#;

const SELECTED_INSTANCE: &str = "
apiVersion: kro.run/v1alpha1
kind: TeamSummary
metadata:
  name: blue
spec:
  team: blue
";

/// The team's ConfigMaps, in two namespaces, and one of another team.
const SELECTED_CONFIGMAPS: &str = "
apiVersion: v1
kind: ConfigMap
metadata: {name: blue-b, namespace: default, labels: {differential-team: blue}}
data: {key: b}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: blue-a, namespace: kube-public, labels: {differential-team: blue}}
data: {key: a}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: green-a, namespace: default, labels: {differential-team: green}}
data: {key: g}
";

/// The group Stencil serves an imported kind in, so both can be installed at once.
const IMPORTED: &str = "imported.stencil.dev";

/// Every object of the kinds the RGD's templates name, in `namespace`, that carries
/// `label`, normalised, by kind and name.
async fn children(client: &Client, rgd: &Value, namespace: &str, label: &str) -> BTreeMap<String, Value> {
    let mut found = BTreeMap::new();
    for resource in rgd["spec"]["resources"].as_array().unwrap() {
        let Some(template) = resource.get("template") else {
            continue;
        };
        let api = kind_api(client, template, namespace).await;
        for object in api.list(&ListParams::default().labels(label)).await.unwrap() {
            let value = serde_json::to_value(&object).unwrap();
            found.insert(
                format!(
                    "{} {}",
                    template["kind"].as_str().unwrap(),
                    object.metadata.name.clone().unwrap()
                ),
                normalised(value),
            );
        }
    }
    found
}

/// What both controllers must agree on: the object but what each writes for itself and
/// what the API server assigns.
fn normalised(mut object: Value) -> Value {
    let own = |key: &str| {
        key.starts_with("kro.run/")
            || key.starts_with("internal.kro.run/")
            || key.starts_with("stencil.dev/")
            || key.starts_with("applyset.kubernetes.io/")
            || key == "app.kubernetes.io/managed-by"
            || key.starts_with("deployment.kubernetes.io/")
            || key == "kubectl.kubernetes.io/last-applied-configuration"
    };
    let metadata = object["metadata"].take();
    let mut kept = json!({"name": metadata["name"]});
    for key in ["labels", "annotations"] {
        if let Some(map) = metadata[key].as_object() {
            let map: serde_json::Map<String, Value> = map
                .iter()
                .filter(|(k, _)| !own(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if !map.is_empty() {
                kept[key] = Value::Object(map);
            }
        }
    }
    object["metadata"] = kept;
    let fields = object.as_object_mut().unwrap();
    fields.remove("status");
    if let Some(spec) = fields.get_mut("spec").and_then(Value::as_object_mut) {
        for assigned in ["clusterIP", "clusterIPs"] {
            spec.remove(assigned);
        }
    }
    object
}

/// `value` without the times things happened (a condition's `lastTransitionTime`), which
/// differ between two runs whoever serves them.
fn timeless(value: &Value) -> Value {
    match value {
        Value::Object(m) => m
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "lastTransitionTime" | "lastUpdateTime"))
            .map(|(k, v)| (k.clone(), timeless(v)))
            .collect::<serde_json::Map<_, _>>()
            .into(),
        Value::Array(items) => items.iter().map(timeless).collect(),
        other => other.clone(),
    }
}

/// The instance's status values: the fields the RGD declares, and kro's `state`.
fn status_values(rgd: &Value, instance: &Value) -> Value {
    let mut keys: Vec<String> = rgd["spec"]["schema"]["status"]
        .as_object()
        .map(|s| s.keys().cloned().collect())
        .unwrap_or_default();
    keys.push("state".into());
    let status = &instance["status"];
    keys.iter()
        .map(|k| (k.clone(), timeless(&status[k])))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

async fn instance_api(client: &Client, instance: &Value) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::try_from(&kube::api::TypeMeta {
        api_version: instance["apiVersion"].as_str().unwrap().to_string(),
        kind: instance["kind"].as_str().unwrap().to_string(),
    })
    .unwrap();
    let (resource, _) = wait_for(&format!("{} served", gvk.kind), TIMEOUT, || async {
        pinned_kind(client, &gvk).await.ok()
    })
    .await;
    Api::namespaced_with(client.clone(), "default", &resource)
}

/// Creates `instance` in `default` and waits until it is ACTIVE (with every status value
/// the RGD declares, when the example's children get a status), writing the status of
/// its children as their controllers would; then its children (those labelled `label`
/// with its name) and status values, and deletes it.
async fn serve(
    client: &Client,
    rgd: &Value,
    example: &Example,
    mut instance: Value,
    label: &str,
) -> (BTreeMap<String, Value>, Value) {
    instance["metadata"]["namespace"] = "default".into();
    apply(client, &instance, "default").await;
    let api = instance_api(client, &instance).await;
    let name = instance["metadata"]["name"].as_str().unwrap().to_string();
    let label = format!("{label}={name}");
    let served = wait_for(&format!("{name} ACTIVE"), TIMEOUT, || async {
        observe(client, rgd, example, &label).await;
        let live = serde_json::to_value(api.get(&name).await.ok()?).ok()?;
        let complete =
            example.observed.is_empty() || status_values(rgd, &live).as_object()?.values().all(|v| !v.is_null());
        (live["status"]["state"] == "ACTIVE" && complete).then_some(live)
    })
    .await;
    let children = children(client, rgd, "default", &label).await;
    let values = status_values(rgd, &served);
    api.delete(&name, &DeleteParams::default()).await.unwrap();
    wait_for(&format!("{name} deleted"), TIMEOUT, || async {
        api.get_opt(&name).await.ok()?.is_none().then_some(())
    })
    .await;
    (children, values)
}

/// Writes the status the example's children's controllers would, on each child labelled
/// `label` that has none yet.
async fn observe(client: &Client, rgd: &Value, example: &Example, label: &str) {
    for (kind, status) in example.observed {
        let Some(template) = rgd["spec"]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| &r["template"])
            .find(|t| t["kind"] == *kind)
        else {
            continue;
        };
        let api = kind_api(client, template, "default").await;
        for object in api.list(&ListParams::default().labels(label)).await.unwrap() {
            if object.data.get("status").is_some_and(|s| !s.is_null()) {
                continue;
            }
            let object_name = object.metadata.name.clone().unwrap();
            let status: Value = serde_json::from_str(&status.replace("{name}", &object_name)).unwrap();
            let patch = json!({"status": status});
            let _ = api
                .patch_status(&object_name, &PatchParams::default(), &Patch::Merge(&patch))
                .await;
        }
    }
}

/// The API of the kind `template` names, in `namespace`.
async fn kind_api(client: &Client, template: &Value, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::try_from(&kube::api::TypeMeta {
        api_version: template["apiVersion"].as_str().unwrap().to_string(),
        kind: template["kind"].as_str().unwrap().to_string(),
    })
    .unwrap();
    let (api_resource, _) = pinned_kind(client, &gvk).await.unwrap();
    Api::namespaced_with(client.clone(), namespace, &api_resource)
}

/// A CRD for an ACK EC2 kind that keeps any field and has a status subresource.
fn ack_stub(kind: &str, plural: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.ec2.services.k8s.aws")},
        "spec": {
            "group": "ec2.services.k8s.aws",
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}
            }]
        }
    })
}

#[tokio::test]
async fn kro_and_stencil_make_the_same_children_and_status_from_kros_examples() {
    let client = client().await;
    let (module, build) = (common::kro::module(), common::kro::build());
    common::kro::install_crds(&client, &build).await;
    for (kind, plural) in ACK_EC2 {
        apply(&client, &ack_stub(kind, plural), "default").await;
    }
    let examples: Vec<(Value, Value)> = EXAMPLES
        .iter()
        .map(|e| {
            (
                e.rgd.documents(&module).remove(0),
                e.instance.documents(&module).remove(0),
            )
        })
        .collect();
    for e in &EXAMPLES {
        for source in e.expects {
            for object in source.documents(&module) {
                apply(&client, &object, "default").await;
            }
        }
    }

    let mut by_kro = Vec::new();
    {
        let _kro = common::kro::start(&build, "kro-differential");
        for (e, (rgd, instance)) in EXAMPLES.iter().zip(&examples) {
            apply(&client, rgd, "default").await;
            let served = serve(&client, rgd, e, instance.clone(), "kro.run/instance-name").await;
            assert!(
                !served.0.is_empty(),
                "kro made children for {}",
                rgd["metadata"]["name"]
            );
            by_kro.push(served);
        }
        // The network stack's collections: one Subnet per zone in each, and the status
        // lists read from them.
        let (children, values) = &by_kro[5];
        for subnet in ["demo-public-1", "demo-public-2", "demo-private-1", "demo-private-2"] {
            assert!(children.contains_key(&format!("Subnet {subnet}")), "{children:#?}");
        }
        assert_eq!(
            values["privateSubnetIds"],
            json!(["subnet-demo-private-1", "subnet-demo-private-2"]),
            "{values:#}"
        );
        // The external collection: the team's ConfigMaps in every namespace, in the order
        // the API server lists them.
        let (children, values) = &by_kro[6];
        assert_eq!(
            values["names"],
            json!(["default/blue-b", "kube-public/blue-a"]),
            "{values:#}"
        );
        assert_eq!(
            children["ConfigMap blue-summary"]["data"]["keys"], "b,a",
            "{children:#?}"
        );
    }

    let dir = std::env::temp_dir().join(format!("kro-differential-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut paths = Vec::new();
    for (i, e) in EXAMPLES.iter().enumerate() {
        let (file, text) = e.rgd.read(&module);
        for t in stencil::import_kro::import(&file, &text).unwrap() {
            let path = dir.join(format!("{i}.yaml"));
            std::fs::write(&path, imported_group(&t.text)).unwrap();
            paths.push(path);
        }
    }
    let _stencil = start_stencil(&paths, false).await;
    for (i, (rgd, instance)) in examples.iter().enumerate() {
        let mut instance = instance.clone();
        let version = instance["apiVersion"]
            .as_str()
            .unwrap()
            .rsplit('/')
            .next()
            .unwrap()
            .to_string();
        instance["apiVersion"] = format!("{IMPORTED}/{version}").into();
        let by_stencil = serve(&client, rgd, &EXAMPLES[i], instance, "stencil.dev/parent-name").await;
        let rgd = &rgd["metadata"]["name"];
        assert_eq!(by_stencil.0, by_kro[i].0, "{rgd}: the children");
        assert_eq!(by_stencil.1, by_kro[i].1, "{rgd}: the status values");
    }
}

/// A translation served in [`IMPORTED`] rather than kro's group.
fn imported_group(text: &str) -> String {
    text.replace("apiVersion: kro.run/", &format!("apiVersion: {IMPORTED}/"))
        .replace("apiVersion: test.kro.run/", &format!("apiVersion: {IMPORTED}/"))
        .replace(".kro.run\n", &format!(".{IMPORTED}\n"))
}
