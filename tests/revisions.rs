//! A definition's revisions against the rig: a `ControllerRevision` per accepted edit in
//! Stencil's namespace, the history cut at `revisionHistoryLimit`, an edit back to an
//! earlier version renumbered instead of copied, the revisions named on the definition's
//! status, and a restart that writes none.

mod common;

use std::time::Duration;

use common::{CM, TestNamespace, child, client, definition, start_stencil_options, unique_group, wait_for};
use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use stencil::definition::{OperatorDefinition, RolloutPhase};

const TIMEOUT: Duration = Duration::from_secs(60);

/// The revisions kept in `ns`, as (name, number), oldest first.
async fn kept(api: &Api<ControllerRevision>, definition: &str) -> Vec<(String, i64)> {
    let selector = format!("stencil.dev/definition={definition}");
    let mut all: Vec<(String, i64)> = api
        .list(&ListParams::default().labels(&selector))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|r| (r.name_any(), r.revision.unwrap_or_default()))
        .collect();
    all.sort_by_key(|(_, n)| *n);
    all
}

#[tokio::test]
async fn each_edit_is_a_revision_the_history_is_cut_and_a_restart_writes_none() {
    let client = client().await;
    common::install_crd(&client, &stencil::crd::operator_definition_crd()).await;
    let home = TestNamespace::new(&client, "home").await;
    let group = unique_group();
    let name = format!("widgets.{group}");
    let defs: Api<OperatorDefinition> = Api::all(client.clone());
    let revisions: Api<ControllerRevision> = Api::namespaced(client.clone(), &home.name);
    let apply = |size: &str| {
        let template = CM.replace(
            "{{ parent.spec.size | required('spec.size is required') | quote }}",
            size,
        );
        let text = definition(&group, &child("cm", &template), "  revisionHistoryLimit: 2\n");
        let resource: OperatorDefinition = stencil::yaml::document(&text).unwrap();
        let defs = defs.clone();
        let name = name.clone();
        async move {
            defs.patch(&name, &PatchParams::apply("test").force(), &Patch::Apply(&resource))
                .await
                .unwrap();
        }
    };
    let options = || stencil::runtime::Options {
        definitions: Vec::new(),
        cluster_definitions: true,
        concurrency: 4,
        home: Some(home.name.clone()),
        ..Default::default()
    };
    apply("\"1\"").await;
    let stencil = start_stencil_options(options()).await;
    let wait_revisions = |count: usize, newest: i64| {
        let (revisions, name) = (revisions.clone(), name.clone());
        async move {
            wait_for(
                &format!("{count} revisions, the newest numbered {newest}"),
                TIMEOUT,
                || async {
                    let all = kept(&revisions, &name).await;
                    (all.len() == count && all.last()?.1 == newest).then_some(all)
                },
            )
            .await
        }
    };
    let first = wait_revisions(1, 1).await;
    let (one, _) = &first[0];
    assert!(one.starts_with(&format!("{name}-")), "{one}");
    let status = wait_for("the revisions on the definition's status", TIMEOUT, || async {
        let rollout = defs.get_status(&name).await.ok()?.status?.rollout?;
        (rollout.current_revision == *one).then_some(rollout)
    })
    .await;
    assert_eq!(status.updated_revision, *one);
    assert_eq!(status.phase, RolloutPhase::Complete);

    apply("\"2\"").await;
    let second = wait_revisions(2, 2).await;
    apply("\"3\"").await;
    let third = wait_revisions(2, 3).await;
    assert_eq!(third[0], second[1], "the oldest went at the limit of 2");
    assert!(!third.iter().any(|(n, _)| n == one));

    // Back to the second version: its revision is the newest again, not a copy.
    apply("\"2\"").await;
    let back = wait_revisions(2, 4).await;
    assert_eq!(back[1].0, second[1].0);
    wait_for("the status naming the revision again", TIMEOUT, || async {
        let rollout = defs.get_status(&name).await.ok()?.status?.rollout?;
        (rollout.current_revision == back[1].0).then_some(())
    })
    .await;

    drop(stencil);
    let again = start_stencil_options(options()).await;
    wait_for("the restarted Stencil to list the revisions", TIMEOUT, || async {
        let reads = again.reads.lock().unwrap();
        reads.iter().any(|r| r.contains("/controllerrevisions")).then_some(())
    })
    .await;
    // A create or prune would follow the list's answer within milliseconds.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let written: Vec<String> = again
        .take_writes()
        .into_iter()
        .filter(|w| w.contains("/controllerrevisions"))
        .collect();
    assert_eq!(
        written,
        Vec::<String>::new(),
        "a restart keeps the revisions as they are"
    );
    assert_eq!(kept(&revisions, &name).await, back);
}
