//! `stencil run` against the rig: children follow their parent, drift is reverted,
//! deleted children come back, deleted parents leave nothing behind, a render error
//! deletes nothing, definitions hot-reload from files and from OperatorDefinition
//! resources, kinds that appear later are picked up, and the steady state writes nothing.

#[path = "../common/mod.rs"]
mod common;

mod children;
mod definitions;
mod quiet;

use std::path::PathBuf;
use std::time::Duration;

use common::{
    CM, Stencil, TestNamespace, child, client, condition, definition, start_stencil, unique_group, wait_established,
    wait_for, widgets,
};
use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(60);

/// A test's world: a namespace, a definitions directory and a running Stencil.
struct World {
    client: Client,
    ns: TestNamespace,
    dir: tempfile::TempDir,
    group: String,
    stencil: Stencil,
}

impl World {
    async fn new(children: &str, extra: &str) -> World {
        let group = unique_group();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("widgets.yaml"), definition(&group, children, extra)).unwrap();
        World::start(group, dir).await
    }

    async fn start(group: String, dir: tempfile::TempDir) -> World {
        let client = client().await;
        let ns = TestNamespace::new(&client, "ctl").await;
        let stencil = start_stencil(&[dir.path().to_path_buf()], false).await;
        wait_established(&client, &format!("widgets.{group}")).await;
        World {
            client,
            ns,
            dir,
            group,
            stencil,
        }
    }

    fn file(&self) -> PathBuf {
        self.dir.path().join("widgets.yaml")
    }

    fn widgets(&self) -> Api<DynamicObject> {
        widgets(&self.client, &self.group, &self.ns.name)
    }

    fn configmaps(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), &self.ns.name)
    }

    async fn create_widget(&self, name: &str, spec: Value) {
        let obj: DynamicObject =
            serde_json::from_value(json!({"apiVersion": format!("{}/v1", self.group), "kind": "Widget",
            "metadata": {"name": name}, "spec": spec}))
            .unwrap();
        common::create_when_served(&self.widgets(), &obj).await;
    }

    /// Waits until ConfigMap `name` exists and `check` holds for its data.
    async fn wait_cm(&self, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> ConfigMap {
        let api = self.configmaps();
        wait_for(&format!("ConfigMap {name}: {what}"), TIMEOUT, || async {
            let cm = api.get_opt(name).await.ok()??;
            let data = serde_json::to_value(cm.data.clone().unwrap_or_default()).unwrap();
            check(&data).then_some(cm)
        })
        .await
    }

    /// Creates parent `name` (its children need Stencil's finalizer) and waits until it
    /// is Ready and carries the finalizer.
    async fn finalized_parent(&self, name: &str) {
        self.create_widget(name, json!({"size": 1})).await;
        self.wait_condition(name, "Ready", "True").await;
        let parent = self.widgets().get(name).await.unwrap();
        assert!(parent.finalizers().iter().any(|f| f == "stencil.dev/finalizer"));
    }

    async fn wait_condition(&self, widget: &str, type_: &str, status: &str) -> Value {
        self.wait_condition_at(widget, type_, status, 1).await
    }

    /// Waits for a condition written for at least `generation`.
    async fn wait_condition_at(&self, widget: &str, type_: &str, status: &str, generation: i64) -> Value {
        let api = self.widgets();
        wait_for(
            &format!("{widget} {type_}={status} at generation {generation}"),
            TIMEOUT,
            || async {
                let w = api.get(widget).await.ok()?;
                condition(&w.data, type_)
                    .filter(|c| c["status"] == status && c["observedGeneration"].as_i64() >= Some(generation))
            },
        )
        .await
    }
}

/// Extra spec that makes parents carry the finalizer.
const ORPHAN: &str = "  finalize:\n    deletionPolicy: Orphan\n";

fn size_is(v: &'static str) -> impl Fn(&Value) -> bool {
    move |d| d["size"] == v
}
