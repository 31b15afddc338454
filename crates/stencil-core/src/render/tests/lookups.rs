//! What a render reads beyond its parent: lookups by name and by selector, the namespaces
//! a parent may read, and a child read before it exists.

use super::*;

fn namespace(name: &str, team: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"team": team}}})
}

#[test]
fn a_missing_lookup_holds_every_child_back_and_a_present_one_is_readable() {
    let lookups = "  lookups:\n    - name: settings\n      apiVersion: v1\n      kind: ConfigMap\n      nameTemplate: '{{ parent.metadata.name }}-settings'\n";
    let def = compile(
        &child(
            "cm",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  tier: {{ lookups.settings.data.tier }}",
        ),
        lookups,
    );
    let scopes = Scopes::default();
    let requests = lookup_requests(&def, &parent(), &scopes).unwrap();
    assert_eq!(requests[0].target, Target::Name("w1-settings".into()));
    assert_eq!(requests[0].namespace.as_deref(), Some("team"));

    let out = Inputs::new().run(&def, &parent()).unwrap();
    assert!(out.children.is_empty());
    assert_eq!(out.waiting[0].on, vec!["lookups.settings".to_string()]);

    let settings = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w1-settings", "namespace": "team"}, "data": {"tier": "gold"}});
    let mut inputs = Inputs::new();
    inputs.lookups = match_lookups(&requests, &[settings]);
    let out = inputs.run(&def, &parent()).unwrap();
    assert_eq!(out.children[0].object["data"]["tier"], "gold");
}

#[test]
fn a_lookup_outside_the_parent_namespace_is_refused() {
    let lookups = "  lookups:\n    - name: s\n      apiVersion: v1\n      kind: Secret\n      nameTemplate: s\n      namespaceTemplate: kube-system\n";
    let def = compile(&child("cm", CM), lookups);
    let err = lookup_requests(&def, &parent(), &Scopes::default()).unwrap_err();
    assert!(err.to_string().contains("spec.allowedNamespaces"), "{err}");
}

#[test]
fn a_selector_lookup_is_a_sorted_list_of_matches_with_templated_values() {
    let lookups = "  allowedNamespaces: [\"*\"]\n  lookups:\n    - name: nss\n      apiVersion: v1\n      kind: Namespace\n      selector: {matchLabels: {team: \"{{ parent.spec.items[0] }}\"}}\n";
    let def = compile(
        &child(
            "cm",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  names: {{ lookups.nss | map(attribute='metadata.name') | join(',') | quote }}",
        ),
        lookups,
    );
    let requests = lookup_requests(&def, &parent(), &Scopes::default()).unwrap();
    let Target::Selector(m) = &requests[0].target else {
        panic!("{requests:?}")
    };
    assert_eq!(m.query(), "team=a", "the value was rendered over the parent");
    assert_eq!(requests[0].namespace, None, "Namespace is cluster-scoped");
    let found = [namespace("zeta", "a"), namespace("alpha", "a"), namespace("beta", "b")];
    let mut inputs = Inputs::new();
    inputs.lookups = match_lookups(&requests, &found);
    let out = inputs.run(&def, &parent()).unwrap();
    assert_eq!(out.children[0].object["data"]["names"], "alpha,zeta");
}

#[test]
fn an_empty_selector_lookup_never_holds_the_parent_back() {
    let lookups = "  lookups:\n    - name: peers\n      apiVersion: v1\n      kind: ConfigMap\n      selector: {matchLabels: {peer: \"yes\"}}\n";
    let def = compile(
        &child(
            "cm",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  peers: {{ lookups.peers | length | quote }}",
        ),
        lookups,
    );
    let requests = lookup_requests(&def, &parent(), &Scopes::default()).unwrap();
    assert_eq!(
        requests[0].namespace.as_deref(),
        Some("team"),
        "the parent's namespace by default"
    );
    let mut inputs = Inputs::new();
    inputs.lookups = match_lookups(&requests, &[]);
    let out = inputs.run(&def, &parent()).unwrap();
    assert!(out.waiting.is_empty(), "{:?}", out.waiting);
    assert_eq!(out.children[0].object["data"]["peers"], "0");
}

#[test]
fn every_namespace_is_refused_to_a_confined_namespaced_parent() {
    let lookups = "  lookups:\n    - name: all\n      apiVersion: v1\n      kind: ConfigMap\n      selector: {}\n      namespaceTemplate: \"*\"\n";
    let def = compile(&child("cm", CM), lookups);
    let err = lookup_requests(&def, &parent(), &Scopes::default()).unwrap_err();
    assert!(err.to_string().contains("allowedNamespaces"), "{err}");
}

#[test]
fn reading_through_a_child_that_does_not_exist_yet_waits_for_it() {
    let app = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  host: {{ children.db.data.host }}";
    let guarded = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: guarded\ndata:\n  host: {{ children.db.data.host if children.db is defined else 'none' }}";
    let def = compile(
        &format!("{}{}{}", child("app", app), child("guarded", guarded), child("db", CM)),
        "",
    );
    assert_eq!(def.reads(0), ["db"]);
    assert!(
        def.hints()[0].contains("children[app].template reads children.db without `dependsOn: [db]`"),
        "{:?}",
        def.hints()
    );
    let out = Inputs::new().run(&def, &parent()).unwrap();
    assert_eq!(
        out.waiting,
        vec![Waiting {
            child: "app".into(),
            on: vec!["db".into()]
        }]
    );
    let names: Vec<&Value> = out.children.iter().map(|c| &c.object["metadata"]["name"]).collect();
    assert_eq!(
        names,
        ["guarded", "w1-cm"],
        "the others render; a guarded read does not wait"
    );
    let db = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w1-cm", "namespace": "team"}, "data": {"host": "db.team"}});
    let out = Inputs::new().observe("db", db).run(&def, &parent()).unwrap();
    assert!(out.waiting.is_empty());
    assert_eq!(out.children[0].object["data"]["host"], "db.team");
}

#[test]
fn a_failure_that_is_not_a_missing_child_still_fails_the_render() {
    let app = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  host: {{ children.db.data.host }}{{ required(parent.spec.nothing, 'set it') }}";
    let def = compile(&format!("{}{}", child("app", app), child("db", CM)), "");
    let db = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w1-cm", "namespace": "team"}, "data": {"host": "h"}});
    assert!(Inputs::new().observe("db", db).run(&def, &parent()).is_err());
}
