//! The conversion table follows what the live CRD carries.

use super::*;

const WEBSITE: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/operators/website.yaml"));
const CRD: &str = "websites.examples.stencil.dev";

fn compile(text: &str) -> Box<CompiledDefinition> {
    let (mut defs, diags) = crate::compile::compile_file("website.yaml", text);
    assert!(diags.0.is_empty(), "{diags}");
    Box::new(defs.remove(0))
}

/// The website, and its edit that renames `domains` to `hosts` (a breaking change).
fn versions() -> (Box<CompiledDefinition>, Box<CompiledDefinition>) {
    (compile(WEBSITE), compile(&WEBSITE.replace("domains", "hosts")))
}

fn live(def: &CompiledDefinition) -> Option<CustomResourceDefinition> {
    crate::crd::parent_crd(def, None).unwrap()
}

fn origin() -> Origin {
    Origin::File {
        path: "website.yaml".into(),
        name: CRD.into(),
    }
}

/// Whether the definition converting the CRD declares `field` in a schema.
fn converts_with(table: &Conversions, field: &str) -> bool {
    match table.get(CRD) {
        Lookup::Found(def) => serde_json::to_string(&def.spec.crd).unwrap().contains(field),
        other => panic!("nothing converts: {other:?}"),
    }
}

#[test]
fn a_refused_edit_converts_nothing_until_the_crd_carries_it() {
    let (old, new) = versions();
    let table = Conversions::new();
    table.observe(&SourceEvent::Upsert(origin(), old.clone()));
    assert!(matches!(table.get(CRD), Lookup::Pending), "not read yet");
    assert!(table.names().borrow().contains(CRD), "its CRD is read");
    table.observe_crd(CRD, live(&old));
    assert!(converts_with(&table, "domains"));
    table.observe(&SourceEvent::Upsert(origin(), new.clone()));
    assert!(
        converts_with(&table, "domains"),
        "the CRD still carries the old version"
    );
    table.observe(&SourceEvent::Invalid(origin(), Default::default()));
    assert!(converts_with(&table, "domains"));
    table.observe_crd(CRD, live(&new));
    assert!(converts_with(&table, "hosts"), "installed, it converts");
}

#[test]
fn a_removed_definition_converts_while_its_crd_carries_it() {
    let (old, _) = versions();
    let table = Conversions::new();
    table.observe(&SourceEvent::Upsert(origin(), old.clone()));
    table.observe_crd(CRD, live(&old));
    table.observe(&SourceEvent::Remove(origin()));
    assert!(converts_with(&table, "domains"));
    table.observe_crd(CRD, None);
    assert!(matches!(table.get(CRD), Lookup::Refused(_)));
    assert!(table.names().borrow().is_empty(), "nothing left to read");
}

#[test]
fn a_crd_that_carries_no_known_definition_is_refused_until_one_is_recalled() {
    let (old, new) = versions();
    let table = Conversions::new();
    table.observe(&SourceEvent::Upsert(origin(), new));
    table.observe_crd(CRD, live(&old));
    assert!(
        matches!(table.get(CRD), Lookup::Pending),
        "until revisions are looked at"
    );
    let unknown = table.unknown(CRD).expect("the CRD is unknown");
    assert_eq!(unknown.metadata.name.as_deref(), Some(CRD));
    table.recall(CRD, None);
    let Lookup::Refused(why) = table.get(CRD) else {
        panic!("converted with a schema the CRD does not have")
    };
    assert!(why.contains("carries versions that no definition"), "{why}");
    table.recall(CRD, Some(*compile(&WEBSITE.replace("domains", "hosts"))));
    assert!(matches!(table.get(CRD), Lookup::Refused(_)), "not what it carries");
    table.recall(CRD, Some(*old));
    assert!(converts_with(&table, "domains"));
    assert!(table.unknown(CRD).is_none());
}

#[test]
fn a_crd_a_review_asks_for_is_followed_while_it_exists() {
    let (old, _) = versions();
    let table = Conversions::new();
    assert!(matches!(table.get(CRD), Lookup::Refused(_)));
    table.ask(CRD);
    assert!(matches!(table.get(CRD), Lookup::Pending));
    assert!(table.names().borrow().contains(CRD));
    table.observe_crd(CRD, live(&old));
    table.recall(CRD, Some(*old));
    assert!(converts_with(&table, "domains"), "a kept revision converts it");
    table.observe_crd(CRD, None);
    assert!(table.names().borrow().is_empty(), "gone with its CRD");
}
