//! Bad input and foreign objects: a parent that breaks its schema or template, a child
//! aimed outside its parent's namespace, bad definitions, and a hand-made object racing a
//! create; each affects nothing else.

use super::*;

#[tokio::test]
async fn a_parent_that_breaks_its_schema_or_its_template_affects_no_other() {
    let client = client().await;
    let group = unique_group();
    let ns = TestNamespace::new(&client, "badparent").await;
    let strict = definition(&group, &child("cm", CM), "").replace(
        stencil_core::fixtures::OPEN_SPEC,
        "spec: {type: object, properties: {size: {type: integer, minimum: 0}}}",
    );
    let _stencil = serve(&client, &group, strict).await;
    let api = widgets(&client, &group, &ns.name);
    common::create_when_served(&api, &widget(&group, "good", json!({"size": 1}))).await;

    let rejected = api
        .create(&Default::default(), &widget(&group, "bad", json!({"size": "big"})))
        .await;
    match rejected {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 422, "{s:?}");
            assert!(s.message.contains("spec.size"), "{}", s.message);
        }
        other => panic!("a parent violating its schema was accepted: {other:?}"),
    }
    // The template's `required` fails for a parent without spec.size.
    api.create(&Default::default(), &widget(&group, "empty", json!({})))
        .await
        .unwrap();
    let stalled = wait_for("the empty parent to be Stalled", TIMEOUT, || async {
        let p = api.get("empty").await.ok()?;
        condition(&p.data, "Stalled").filter(|c| c["status"] == "True")
    })
    .await;
    assert!(
        stalled["message"].as_str().unwrap().contains("spec.size is required"),
        "{stalled}"
    );
    wait_for("the good parent Ready regardless", TIMEOUT, || async {
        let p = api.get("good").await.ok()?;
        condition(&p.data, "Ready").filter(|c| c["status"] == "True")
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    assert!(matches!(cms.get_opt("empty-cm").await, Ok(None)));
    assert_invariants(&client, &api, &[ns.name.as_str()]).await;
}

#[tokio::test]
async fn a_child_outside_the_parent_namespace_is_refused_and_nothing_is_written_there() {
    let client = client().await;
    let group = unique_group();
    let ns = TestNamespace::new(&client, "iso").await;
    let other = TestNamespace::new(&client, "iso-other").await;
    let _stencil = serve(
        &client,
        &group,
        definition(&group, &child("far", &far_cm(&other.name)), ""),
    )
    .await;
    let api = widgets(&client, &group, &ns.name);
    common::create_when_served(&api, &widget(&group, "i", json!({"size": 1}))).await;
    let stalled = wait_for("the parent to be Stalled", TIMEOUT, || async {
        let p = api.get("i").await.ok()?;
        condition(&p.data, "Stalled").filter(|c| c["status"] == "True")
    })
    .await;
    assert!(
        stalled["message"].as_str().unwrap().contains("spec.allowedNamespaces"),
        "{stalled}"
    );
    let far: Api<ConfigMap> = Api::namespaced(client.clone(), &other.name);
    assert!(matches!(far.get_opt("i-far").await, Ok(None)));
}

/// One good definition beside every kind of bad one: the good one serves, each bad one is
/// reported with its file and line, and `stencil validate` exits non-zero naming them all.
#[tokio::test]
async fn bad_definitions_are_reported_with_their_location_and_the_good_one_serves() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "baddefs").await;
    let dir = tempfile::tempdir().unwrap();
    let good = unique_group();
    std::fs::write(defs(&dir).join("good.yaml"), definition(&good, &child("cm", CM), "")).unwrap();
    let bad = |name: &str, text: String| std::fs::write(defs(&dir).join(name), text).unwrap();
    let base = |children: &str, extra: &str| definition(&unique_group(), children, extra);
    bad(
        "malformed.yaml",
        base(&child("cm", CM), "").replace("  parent:\n", "  parent: [\n"),
    );
    bad("unknown-field.yaml", base(&child("cm", CM), "  colour: blue\n"));
    bad("syntax.yaml", base(&child("cm", &CM.replace("}}-cm", "-cm")), ""));
    let runaway_group = unique_group();
    let spin = "{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}";
    bad(
        "runaway.yaml",
        definition(&runaway_group, &child("cm", &format!("{CM}\n  loop: \"{spin}\"")), ""),
    );
    bad(
        "jsonpath.yaml",
        base(&format!("{}      readyWhen: '$.status[?@.x =='\n", child("cm", CM)), ""),
    );
    bad(
        "cycle.yaml",
        base(
            &format!(
                "{}      dependsOn: [b]\n{}      dependsOn: [a]\n",
                child("a", CM),
                child("b", &CM.replace("-cm", "-b"))
            ),
            "",
        ),
    );
    let unknown_kind = "apiVersion: nowhere.stencil.dev/v1\nkind: Gizmo\nmetadata:\n  name: {{ parent.metadata.name }}";
    bad("unknown-kind.yaml", base(&child("gizmo", unknown_kind), ""));
    // A second definition of the good parent kind, under another name.
    bad(
        "second.yaml",
        definition(&good, &child("cm", CM), "").replace(
            &format!("name: widgets.{good}"),
            &format!("name: second.widgets.{good}"),
        ),
    );

    let validate = std::process::Command::new(env!("CARGO_BIN_EXE_stencil"))
        .arg("validate")
        .arg(defs(&dir))
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&validate.stderr).to_string() + &String::from_utf8_lossy(&validate.stdout);
    assert!(!validate.status.success(), "validate passed bad definitions:\n{report}");
    for file in [
        "malformed.yaml:",
        "unknown-field.yaml:",
        "syntax.yaml:",
        "jsonpath.yaml:",
        "cycle.yaml:",
    ] {
        assert!(report.contains(file), "validate does not name {file}:\n{report}");
    }

    let stencil = spawn_stencil(
        &run_args(&defs(&dir)),
        &common::kubeconfig_path(),
        dir.path().join("stencil.log"),
    );
    wait_established(&client, &format!("widgets.{good}")).await;
    let api = widgets(&client, &good, &ns.name);
    common::create_when_served(&api, &widget(&good, "ok", json!({"size": 1}))).await;
    wait_for("the good definition to serve", TIMEOUT, || async {
        let p = api.get("ok").await.ok()?;
        condition(&p.data, "Ready").filter(|c| c["status"] == "True")
    })
    .await;
    let logs = wait_for("every bad definition in the log", TIMEOUT, || async {
        let logs = stencil.logs();
        let all = [
            "malformed.yaml:",
            "unknown-field.yaml:",
            "syntax.yaml:",
            "jsonpath.yaml:",
            "cycle.yaml:",
            "Gizmo",
            "second.widgets",
        ]
        .iter()
        .all(|s| logs.contains(s));
        all.then_some(logs)
    })
    .await;
    assert!(logs.contains("cycle"), "{logs}");
    let (code, _) = stencil.get("/healthz").await.expect("the process keeps serving");
    assert_eq!(code, 200);

    // A runaway template compiles; rendering it for a parent runs out of fuel, which the
    // parent reports with the template's position.
    let runaway = widgets(&client, &runaway_group, &ns.name);
    wait_established(&client, &format!("widgets.{runaway_group}")).await;
    common::create_when_served(&runaway, &widget(&runaway_group, "spin", json!({"size": 1}))).await;
    let stalled = wait_for("the runaway parent to be Stalled", TIMEOUT, || async {
        let p = runaway.get("spin").await.ok()?;
        condition(&p.data, "Stalled").filter(|c| c["status"] == "True")
    })
    .await;
    let message = stalled["message"].as_str().unwrap();
    assert!(
        message.contains("fuel") && message.contains("runaway.yaml:"),
        "{message}"
    );
}

#[tokio::test]
async fn a_create_racing_a_hand_made_object_of_the_same_name_never_takes_it() {
    let client = client().await;
    let group = unique_group();
    let ns = TestNamespace::new(&client, "race").await;
    let _served = serve(&client, &group, definition(&group, &child("cm", CM), "")).await;
    let api = widgets(&client, &group, &ns.name);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let n = 20;
    // Each parent and a hand-made object of its child's name are created at once, so
    // some hand-made objects land between Stencil's read and its create.
    let races = (0..n).map(|i| {
        let (api, cms, group) = (api.clone(), cms.clone(), group.clone());
        async move {
            let hand: ConfigMap = serde_json::from_value(json!({"metadata": {"name": format!("w{i}-cm"),
                "labels": {"test.stencil.dev/hand": "yes"}}, "data": {"size": "made by hand"}}))
            .unwrap();
            let params = kube::api::PostParams::default();
            let parent = widget(&group, &format!("w{i}"), json!({"size": 1}));
            let (made, _) = tokio::join!(cms.create(&params, &hand), common::create_when_served(&api, &parent));
            made.ok()
        }
    });
    let made: Vec<ConfigMap> = futures::future::join_all(races).await.into_iter().flatten().collect();
    wait_for("every parent to settle: Ready, or in Conflict", TIMEOUT, || async {
        let list = api.list(&ListParams::default()).await.ok()?;
        let settled = list.items.iter().filter(|p| {
            condition(&p.data, "Ready").is_some_and(|c| c["status"] == "True" || c["reason"] == "Conflict")
        });
        (settled.count() == n).then_some(())
    })
    .await;
    let check = |when: &'static str| {
        let (cms, made) = (cms.clone(), made.clone());
        async move {
            for before in &made {
                let name = before.metadata.name.clone().unwrap();
                let now = cms.get(&name).await.unwrap_or_else(|e| panic!("{name} {when}: {e}"));
                assert_eq!(now.metadata.uid, before.metadata.uid, "{name} {when}: the same object");
                assert_eq!(now.data, before.data, "{name} {when}: not written");
                assert!(
                    !now.labels().keys().any(|k| k.starts_with("stencil.dev/")) && now.owner_references().is_empty(),
                    "{name} {when}: Stencil's marks on a hand-made object: {:?}",
                    now.metadata
                );
            }
        }
    };
    check("after the race").await;
    for i in 0..n {
        api.delete(&format!("w{i}"), &DeleteParams::default()).await.unwrap();
    }
    wait_for("every parent to go", TIMEOUT, || async {
        api.list(&ListParams::default())
            .await
            .ok()?
            .items
            .is_empty()
            .then_some(())
    })
    .await;
    check("after the parents went").await;
    assert!(!made.is_empty(), "positive control: the hand-made objects exist");
}
