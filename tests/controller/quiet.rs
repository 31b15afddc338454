//! A converged world stays quiet: no write in the steady state, none after a restart.

use super::*;

#[tokio::test]
async fn the_steady_state_makes_no_write_requests() {
    // The quota's quantities come back canonical (`1000m` as `1`, `1024Mi` as `1Gi`).
    let quota = "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: {{ parent.metadata.name }}-quota\nspec:\n  hard: {cpu: 1000m, memory: 1024Mi}";
    let children = format!("{}{}", child("cm", CM), child("quota", quota));
    let w = World::new(&children, "  resyncSeconds: 10\n").await;
    w.create_widget("s", json!({"size": 1})).await;
    w.wait_condition("s", "Ready", "True").await;
    // Let in-flight work (events, the status write) land, then start counting.
    let api = w.widgets();
    wait_for("a quiet second", TIMEOUT, || async {
        let before = w.stencil.take_writes().len();
        tokio::time::sleep(Duration::from_secs(1)).await;
        (before == 0 && w.stencil.take_writes().is_empty()).then_some(())
    })
    .await;
    // A parent change that needs no child change, then a full resync period.
    api.patch(
        "s",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"touched": "yes"}}})),
    )
    .await
    .unwrap();
    let reconciles = w.stencil.reconciles();
    tokio::time::sleep(Duration::from_secs(12)).await;
    // Positive control: the window held reconciles (the annotation and a resync), so
    // the absence of writes means they found nothing to do.
    assert!(
        w.stencil.reconciles() > reconciles,
        "no reconcile ran in the window, so it proves nothing"
    );
    assert_eq!(
        w.stencil.take_writes(),
        Vec::<String>::new(),
        "no writes once converged"
    );
}

#[tokio::test]
async fn a_restart_with_everything_in_place_makes_no_writes() {
    let mut w = World::new(&child("cm", CM), "").await;
    w.create_widget("z", json!({"size": 1})).await;
    w.wait_cm("z-cm", "created", size_is("1")).await;
    w.wait_condition("z", "Ready", "True").await;
    // A new process lists children whose list items carry no apiVersion or kind; it must
    // still recognise them and leave everything as it is.
    w.stencil = start_stencil(&[w.dir.path().to_path_buf()], false).await;
    let api = w.widgets();
    let ready_since = w.wait_condition("z", "Ready", "True").await["lastTransitionTime"].clone();
    // The new process's own first reconcile, not the old one's status, is what counts.
    wait_for("the new process's first reconcile", TIMEOUT, || async {
        (w.stencil.reconciles() >= 1).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        w.stencil.take_writes(),
        Vec::<String>::new(),
        "a restart writes nothing"
    );
    let ready = condition(&api.get("z").await.unwrap().data, "Ready").unwrap();
    assert_eq!(
        (ready["status"].clone(), ready["lastTransitionTime"].clone()),
        (json!("True"), ready_since)
    );
}
