//! Children follow their parent: drift is reverted, a deleted child comes back, a deleted
//! parent leaves none behind, a render error deletes nothing, update and deletion
//! policies hold, and a lookup's change re-renders its readers.

use super::*;

#[tokio::test]
async fn children_follow_their_parent_and_the_parent_reports_ready() {
    let w = World::new(&child("cm", CM), "").await;
    w.create_widget("a", json!({"size": 1})).await;
    let cm = w.wait_cm("a-cm", "size 1", size_is("1")).await;
    let owner = &cm.owner_references()[0];
    assert_eq!((owner.kind.as_str(), owner.controller), ("Widget", Some(true)));
    let ready = w.wait_condition("a", "Ready", "True").await;
    assert_eq!(ready["observedGeneration"], 1);
    let parent = w.widgets().get("a").await.unwrap();
    assert!(
        parent.finalizers().is_empty(),
        "owned children need no finalizer: the garbage collector removes them"
    );

    w.widgets()
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await
        .unwrap();
    w.wait_cm("a-cm", "size 2 after the parent changed", size_is("2")).await;
    let ready = w.wait_condition_at("a", "Ready", "True", 2).await;
    assert_eq!(ready["observedGeneration"], 2);
}

#[tokio::test]
async fn drift_is_reverted_with_a_warning_and_foreign_fields_are_kept() {
    let w = World::new(&child("cm", CM), "").await;
    w.create_widget("d", json!({"size": 1})).await;
    w.wait_cm("d-cm", "size 1", size_is("1")).await;
    let edit = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d-cm"}, "data": {"size": "9", "extra": "mine"}});
    w.configmaps()
        .patch("d-cm", &PatchParams::apply("intruder").force(), &Patch::Apply(&edit))
        .await
        .unwrap();
    let cm = w.wait_cm("d-cm", "size reverted to 1", size_is("1")).await;
    assert_eq!(
        cm.data.unwrap()["extra"],
        "mine",
        "a field Stencil does not own is kept"
    );
    let events: Api<Event> = Api::namespaced(w.client.clone(), &w.ns.name);
    wait_for("a Conflict event naming the other manager", TIMEOUT, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("Conflict") && e.message.as_deref().unwrap_or_default().contains("intruder")
            })
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_child_deleted_by_hand_is_recreated() {
    let w = World::new(&child("cm", CM), "").await;
    w.create_widget("r", json!({"size": 1})).await;
    let first = w.wait_cm("r-cm", "created", size_is("1")).await;
    w.configmaps().delete("r-cm", &DeleteParams::default()).await.unwrap();
    let api = w.configmaps();
    wait_for("r-cm to come back with a new uid", TIMEOUT, || async {
        let cm = api.get_opt("r-cm").await.ok()??;
        (cm.uid() != first.uid()).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_deleted_parent_leaves_no_children_in_any_namespace() {
    let client = client().await;
    let other = TestNamespace::new(&client, "other").await;
    let cross = CM
        .replace("metadata:\n", &format!("metadata:\n  namespace: {}\n", other.name))
        .replace("-cm", "-far");
    let children = format!("{}{}", child("cm", CM), child("far", &cross));
    let w = World::new(&children, &format!("  allowedNamespaces: [{}]\n", other.name)).await;
    w.create_widget("g", json!({"size": 1})).await;
    w.wait_cm("g-cm", "created", size_is("1")).await;
    let far: Api<ConfigMap> = Api::namespaced(client.clone(), &other.name);
    wait_for("the cross-namespace child", TIMEOUT, || async {
        far.get_opt("g-far").await.ok()?
    })
    .await;
    w.widgets().delete("g", &DeleteParams::default()).await.unwrap();
    let (widgets, near) = (w.widgets(), w.configmaps());
    wait_for("the parent and both children to be gone", TIMEOUT, || async {
        let gone = matches!(widgets.get_opt("g").await, Ok(None))
            && matches!(near.get_opt("g-cm").await, Ok(None))
            && matches!(far.get_opt("g-far").await, Ok(None));
        gone.then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_render_error_deletes_nothing_and_says_why() {
    let w = World::new(&child("cm", CM), "").await;
    w.create_widget("e", json!({"size": 1})).await;
    w.wait_cm("e-cm", "created", size_is("1")).await;
    w.widgets()
        .patch(
            "e",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": null}})),
        )
        .await
        .unwrap();
    let stalled = w.wait_condition("e", "Stalled", "True").await;
    assert!(
        stalled["message"].as_str().unwrap().contains("spec.size is required"),
        "{stalled}"
    );
    assert_eq!(w.configmaps().get("e-cm").await.unwrap().data.unwrap()["size"], "1");
}

#[tokio::test]
async fn update_policies_on_create_and_recreate() {
    let secret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ parent.metadata.name }}-secret\nstringData:\n  password: {{ random_password(16) }}\n  size: {{ parent.spec.size | quote }}";
    let job = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {{ parent.metadata.name }}-job\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: run\n          image: busybox\n          args: [\"size={{ parent.spec.size }}\"]";
    let children = format!(
        "{}      updatePolicy: OnCreate\n{}      updatePolicy: Recreate\n",
        child("secret", secret),
        child("job", job)
    );
    let w = World::new(&children, "").await;
    w.create_widget("p", json!({"size": 1})).await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(w.client.clone(), &w.ns.name);
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(w.client.clone(), &w.ns.name);
    let first_secret = wait_for("the secret", TIMEOUT, || async {
        secrets.get_opt("p-secret").await.ok()?
    })
    .await;
    let first_job = wait_for("the job", TIMEOUT, || async { jobs.get_opt("p-job").await.ok()? }).await;
    w.widgets()
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await
        .unwrap();
    // A Job's pod template is immutable: under Recreate the Job is deleted and created anew.
    let second_job = wait_for("the job to be recreated with size 2", TIMEOUT, || async {
        let j = jobs.get_opt("p-job").await.ok()??;
        let args = j.spec.as_ref()?.template.spec.as_ref()?.containers[0].args.clone()?;
        (j.uid() != first_job.uid() && args == vec!["size=2".to_string()]).then_some(j)
    })
    .await;
    assert_ne!(second_job.uid(), first_job.uid());
    let secret = secrets.get("p-secret").await.unwrap();
    assert_eq!(secret.uid(), first_secret.uid(), "OnCreate never replaces");
    assert_eq!(secret.data, first_secret.data, "OnCreate never updates");
}

/// A claim whose access mode follows the parent: the one field a user edits that the API
/// server refuses to change, on the kind whose deletion loses data.
const CLAIM: &str = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: {{ parent.metadata.name }}-data\nspec:\n  accessModes: [{{ parent.spec.mode }}]\n  resources:\n    requests:\n      storage: 1Gi";

#[tokio::test]
async fn an_immutable_change_to_a_claim_deletes_nothing_and_the_parent_says_so() {
    // Ready once it exists: the rig has no provisioner to bind it.
    let entry = format!("{}      readyWhen: '$.spec.accessModes'\n", child("data", CLAIM));
    let w = World::new(&entry, "").await;
    w.create_widget("p", json!({"mode": "ReadWriteOnce"})).await;
    let claims: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> = Api::namespaced(w.client.clone(), &w.ns.name);
    let first = wait_for("the claim", TIMEOUT, || async { claims.get_opt("p-data").await.ok()? }).await;
    w.wait_condition("p", "Ready", "True").await;
    w.stencil.take_writes();
    w.widgets()
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"mode": "ReadWriteMany"}})),
        )
        .await
        .unwrap();
    let ready = w.wait_condition_at("p", "Ready", "False", 2).await;
    assert_eq!(ready["reason"], "Immutable", "{ready}");
    let message = ready["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("PersistentVolumeClaim") && message.contains("p-data") && message.contains("immutable"),
        "the parent names the object and the field: {message}"
    );
    let claim = claims.get("p-data").await.unwrap();
    assert_eq!(claim.uid(), first.uid(), "the claim is the same object");
    assert!(claim.metadata.deletion_timestamp.is_none(), "and is not being deleted");
    let deletes: Vec<String> = w
        .stencil
        .take_writes()
        .into_iter()
        .filter(|r| r.starts_with("DELETE"))
        .collect();
    assert!(deletes.is_empty(), "no DELETE was sent: {deletes:?}");
    let events: Api<Event> = Api::namespaced(w.client.clone(), &w.ns.name);
    let said = wait_for("one Immutable event", TIMEOUT, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        let n: i32 = list
            .items
            .iter()
            .filter(|e| e.reason.as_deref() == Some("Immutable"))
            .map(|e| e.count.unwrap_or(1).max(1))
            .sum();
        (n > 0).then_some(n)
    })
    .await;
    assert_eq!(said, 1, "the refusal is said once");
}

#[tokio::test]
async fn the_orphan_policy_keeps_children_and_strips_ownership() {
    let w = World::new(&child("cm", CM), ORPHAN).await;
    w.create_widget("o", json!({"size": 1})).await;
    w.wait_cm("o-cm", "created", size_is("1")).await;
    w.widgets().delete("o", &DeleteParams::default()).await.unwrap();
    let api = w.widgets();
    wait_for("the parent to be gone", TIMEOUT, || async {
        matches!(api.get_opt("o").await, Ok(None)).then_some(())
    })
    .await;
    let cm = w.configmaps().get("o-cm").await.expect("the orphaned child stays");
    assert!(cm.owner_references().is_empty(), "{:?}", cm.owner_references());
    assert!(!cm.labels().contains_key("stencil.dev/parent-uid"));
}

#[tokio::test]
async fn a_lookup_change_re_renders_the_parents_that_read_it() {
    let lookups = "  lookups:\n    - name: settings\n      apiVersion: v1\n      kind: ConfigMap\n      nameTemplate: '{{ parent.spec.settings }}'\n";
    let reader = CM.replace("size: {{", "tier: {{ lookups.settings.data.tier | quote }}\n  size: {{");
    let w = World::new(&child("cm", &reader), lookups).await;
    w.create_widget("k", json!({"size": 1, "settings": "shared-settings"}))
        .await;
    // Without its lookup the child waits; nothing is an error.
    w.wait_condition("k", "Ready", "False").await;
    let settings = |tier: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared-settings"}, "data": {"tier": tier}});
    let params = PatchParams::apply("test");
    w.configmaps()
        .patch("shared-settings", &params, &Patch::Apply(settings("gold")))
        .await
        .unwrap();
    w.wait_cm("k-cm", "tier gold", |d| d["tier"] == "gold").await;
    w.configmaps()
        .patch("shared-settings", &params, &Patch::Apply(settings("silver")))
        .await
        .unwrap();
    w.wait_cm("k-cm", "tier silver after the lookup changed", |d| {
        d["tier"] == "silver"
    })
    .await;
}
