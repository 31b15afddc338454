//! The Widget definitions integration tests start from, and replicas of `stencil run`
//! over one of them.

use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};

use super::{TestNamespace, client, unique_group};

/// A ConfigMap child whose data follows `spec.size`.
pub const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ parent.metadata.name }}-cm\ndata:\n  size: {{ parent.spec.size | required('spec.size is required') | quote }}";

/// A child entry with `template`, indented for a definition.
pub fn child(name: &str, template: &str) -> String {
    stencil_core::fixtures::child(name, template)
}

/// A second child, `{parent}-gate`, whose readiness rule never holds.
pub fn never_ready() -> String {
    let gate = child(
        "gate",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ parent.metadata.name }}-gate\ndata:\n  open: \"no\"",
    );
    format!("{gate}      readyWhen: \"$.data.never\"\n")
}

/// A Widget definition in `group` with its CRD, `children` and `extra` spec fields.
pub fn definition(group: &str, children: &str, extra: &str) -> String {
    let widget = stencil_core::fixtures::ParentKind {
        group,
        kind: "Widget",
        plural: "widgets",
    };
    stencil_core::fixtures::definition(widget, children, extra)
}

/// Replicas of `stencil run` over one Widget definition in a fresh namespace, sharing a
/// Lease there: what `tests/leader.rs` and `tests/sharding.rs` start from.
pub struct Replicated {
    pub client: Client,
    pub ns: TestNamespace,
    pub group: String,
    /// The Lease's name (`--leader-election-id`).
    pub lease: String,
    /// The arguments every replica runs with.
    pub args: Vec<String>,
    /// The definition's directory; the replicas' logs go there too.
    pub dir: tempfile::TempDir,
}

impl Replicated {
    /// A namespace named after `prefix`, a Widget definition with a ConfigMap child, and
    /// the arguments of replicas running with `mode` (`--leader-elect` or `--sharding`)
    /// and `extra`.
    pub async fn new(prefix: &str, mode: &str, extra: &[&str]) -> Replicated {
        let client = client().await;
        let ns = TestNamespace::new(&client, prefix).await;
        let group = unique_group();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("widgets.yaml"),
            definition(&group, &child("cm", CM), ""),
        )
        .unwrap();
        let lease = format!("stencil-{}", &group[..9]);
        let mut args = vec![
            format!("--definitions={}", dir.path().display()),
            format!("--namespace={}", ns.name),
            "--no-cluster-definitions".to_string(),
            mode.to_string(),
            format!("--leader-election-id={lease}"),
            format!("--leader-election-namespace={}", ns.name),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        Replicated {
            client,
            ns,
            group,
            lease,
            args,
            dir,
        }
    }
}

/// The Widgets of `group` in namespace `ns`.
pub fn widgets(client: &Client, group: &str, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", "Widget"), "widgets");
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// A Widget of `group` named `name` with `spec`.
pub fn widget(group: &str, name: &str, spec: serde_json::Value) -> DynamicObject {
    serde_json::from_value(
        serde_json::json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
        "metadata": {"name": name}, "spec": spec}),
    )
    .unwrap()
}
