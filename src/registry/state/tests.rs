use super::*;
use crate::compile::compile_file;
use stencil_core::fixtures::{CONFIGMAP, ParentKind, bare_definition, child};

impl State {
    /// Every origin whose controller runs.
    fn running(&self) -> Vec<Origin> {
        self.entries
            .iter()
            .filter(|(_, e)| e.running)
            .map(|(o, _)| o.clone())
            .collect()
    }
}

/// A definition named `<name>.example.org` of the parent `kind` with one ConfigMap child.
fn def(name: &str, kind: &str) -> Box<CompiledDefinition> {
    let parent = ParentKind {
        group: "example.org",
        kind,
        plural: name,
    };
    let text = bare_definition(parent, &child("cm", CONFIGMAP), "");
    let (mut defs, diags) = compile_file("d.yaml", &text);
    assert!(diags.0.is_empty(), "{diags}");
    Box::new(defs.remove(0))
}

fn file(name: &str) -> Origin {
    Origin::File {
        path: "d.yaml".into(),
        name: name.into(),
    }
}

fn invalid() -> crate::compile::Diagnostics {
    compile_file(
        "bad.yaml",
        "apiVersion: stencil.dev/v1alpha1\nkind: OperatorDefinition\nspec: 3\n",
    )
    .1
}

/// Each effect as a short word, for readable expectations.
fn names(effects: &[Effect]) -> Vec<String> {
    effects
        .iter()
        .map(|e| match e {
            Effect::Start { origin, .. } => format!("start {}", origin.name()),
            Effect::Stop(o) => format!("stop {}", o.name()),
            Effect::Release(d) => format!("release {}", d.parent.kind),
            Effect::Report(o, r) => format!(
                "report {} {}",
                o.name(),
                match r {
                    Report::Compiled => "compiled",
                    Report::CompileError { .. } => "compile-error",
                    Report::Conflict { .. } => "conflict",
                    Report::Waiting { .. } => "waiting",
                    Report::Serving { .. } => "serving",
                    Report::Migration(_) | Report::MigrationFailed { .. } => "migration",
                    Report::Rollout(_) | Report::RevisionFailed { .. } => "rollout",
                    Report::Removed => "removed",
                }
            ),
            Effect::FileInvalid(f, _) => format!("file-invalid {f}"),
        })
        .collect()
}

#[test]
fn an_added_definition_starts() {
    let mut s = State::default();
    let e = step(&mut s, SourceEvent::Upsert(file("a"), def("a", "Widget")));
    assert_eq!(names(&e), ["report a compiled", "start a"]);
    assert_eq!(
        s.counts(),
        Counts {
            running: 1,
            conflict: 0,
            invalid: 0
        }
    );
}

#[test]
fn an_edit_restarts_with_every_child_kind_seen() {
    let mut s = State::default();
    step(&mut s, SourceEvent::Upsert(file("a"), def("a", "Widget")));
    let e = step(&mut s, SourceEvent::Upsert(file("a"), def("a", "Widget")));
    assert_eq!(names(&e), ["report a compiled", "start a"]);
    assert!(matches!(&e[1], Effect::Start { kinds_seen, .. } if kinds_seen.len() == 1));
}

#[test]
fn an_invalid_edit_keeps_the_last_good_version_running() {
    let mut s = State::default();
    step(&mut s, SourceEvent::Upsert(file("a"), def("a", "Widget")));
    let e = step(&mut s, SourceEvent::Invalid(file("a"), invalid()));
    assert_eq!(names(&e), ["report a compile-error"]);
    assert!(matches!(
        &e[0],
        Effect::Report(_, Report::CompileError { running: true, .. })
    ));
    assert_eq!(s.running(), [file("a")]);
}

#[test]
fn a_definition_that_never_compiled_counts_as_invalid() {
    let mut s = State::default();
    let e = step(&mut s, SourceEvent::Invalid(file("a"), invalid()));
    assert!(matches!(
        &e[0],
        Effect::Report(_, Report::CompileError { running: false, .. })
    ));
    assert_eq!(s.counts().invalid, 1);
    let e = step(&mut s, SourceEvent::Remove(file("a")));
    assert_eq!(names(&e), ["report a removed"]);
    assert_eq!(s.counts(), Counts::default());
}

#[test]
fn a_second_definition_of_a_kind_waits_in_conflict() {
    let mut s = State::default();
    step(&mut s, SourceEvent::Upsert(file("a"), def("a", "Widget")));
    let e = step(&mut s, SourceEvent::Upsert(file("b"), def("b", "Widget")));
    assert_eq!(names(&e), ["report b compiled", "report b conflict"]);
    assert_eq!(
        s.counts(),
        Counts {
            running: 1,
            conflict: 1,
            invalid: 0
        }
    );
}

#[test]
fn removing_the_holder_hands_the_kind_to_the_waiting_definition_without_release() {
    let mut s = State::default();
    step(&mut s, SourceEvent::Upsert(file("a"), def("a", "Widget")));
    step(&mut s, SourceEvent::Upsert(file("b"), def("b", "Widget")));
    let e = step(&mut s, SourceEvent::Remove(file("a")));
    assert_eq!(names(&e), ["stop a", "start b", "report a removed"]);
    assert_eq!(s.running(), [file("b")]);
}

#[test]
fn removing_the_last_definition_of_a_kind_releases_its_parents() {
    let mut s = State::default();
    step(&mut s, SourceEvent::Upsert(file("a"), def("a", "Widget")));
    let e = step(&mut s, SourceEvent::Remove(file("a")));
    assert_eq!(names(&e), ["stop a", "release Widget", "report a removed"]);
}

#[test]
fn a_parent_kind_change_releases_the_old_kind_before_serving_the_new() {
    let mut s = State::default();
    step(&mut s, SourceEvent::Upsert(file("a"), def("a", "Widget")));
    let e = step(&mut s, SourceEvent::Upsert(file("a"), def("a", "Gadget")));
    assert_eq!(names(&e), ["report a compiled", "stop a", "release Widget", "start a"]);
    assert!(matches!(&e[3], Effect::Start { def, .. } if def.parent.kind == "Gadget"));
}

#[test]
fn a_parent_kind_change_onto_a_taken_kind_is_a_conflict_and_frees_the_old_kind() {
    let mut s = State::default();
    step(&mut s, SourceEvent::Upsert(file("a"), def("a", "Widget")));
    step(&mut s, SourceEvent::Upsert(file("b"), def("b", "Gadget")));
    step(&mut s, SourceEvent::Upsert(file("c"), def("c", "Widget")));
    let e = step(&mut s, SourceEvent::Upsert(file("a"), def("a", "Gadget")));
    assert_eq!(
        names(&e),
        ["report a compiled", "stop a", "start c", "report a conflict"],
        "c was waiting for Widget and takes it; a waits for Gadget"
    );
    assert_eq!(s.running(), [file("b"), file("c")]);
    assert_eq!(s.counts().conflict, 1);
}

#[test]
fn one_kind_never_has_two_running_definitions() {
    let mut s = State::default();
    let kinds = ["Widget", "Gadget"];
    for round in 0..40usize {
        let origin = file(&format!("d{}", round % 5));
        let event = match round % 3 {
            0 | 1 => SourceEvent::Upsert(origin, def("x", kinds[(round / 3) % 2])),
            _ => SourceEvent::Remove(origin),
        };
        step(&mut s, event);
        for kind in kinds {
            let serving = s
                .entries
                .values()
                .filter(|e| e.running && e.good.as_ref().is_some_and(|d| d.parent.kind == kind))
                .count();
            assert!(serving <= 1, "round {round}: {serving} definitions run {kind}");
        }
    }
}

#[test]
fn a_file_error_is_only_reported() {
    let mut s = State::default();
    let e = step(&mut s, SourceEvent::FileInvalid("f.yaml".into(), invalid()));
    assert_eq!(names(&e), ["file-invalid f.yaml"]);
}

fn decorator(name: &str, kind: &str) -> Box<CompiledDefinition> {
    let mut d = def(name, kind);
    d.spec.decorate = Some(crate::definition::Decorate::default());
    d
}

#[test]
fn decorators_of_one_kind_all_run_beside_its_composite_definition() {
    let mut s = State::default();
    step(&mut s, SourceEvent::Upsert(file("c"), def("c", "Widget")));
    let a = step(&mut s, SourceEvent::Upsert(file("a"), decorator("a", "Widget")));
    let b = step(&mut s, SourceEvent::Upsert(file("b"), decorator("b", "Widget")));
    assert_eq!(names(&a), ["report a compiled", "start a"]);
    assert_eq!(names(&b), ["report b compiled", "start b"]);
    assert_eq!(s.counts().running, 3);
    // A removed decorator releases nothing: it never put a finalizer on anything.
    let e = step(&mut s, SourceEvent::Remove(file("a")));
    assert_eq!(names(&e), ["stop a", "report a removed"]);
}

#[test]
fn an_edit_carries_the_version_it_replaces_to_serve_if_its_crd_change_is_refused() {
    let mut s = State::default();
    let first = step(&mut s, SourceEvent::Upsert(file("a"), def("a", "Widget")));
    assert!(matches!(&first[1], Effect::Start { fallback: None, .. }));
    let edit = step(&mut s, SourceEvent::Upsert(file("a"), def("a", "Widget")));
    assert!(matches!(&edit[1], Effect::Start { fallback: Some(d), .. } if d.parent.kind == "Widget"));
    // A new parent kind has nothing to fall back on.
    let moved = step(&mut s, SourceEvent::Upsert(file("a"), def("a", "Gadget")));
    assert!(
        moved
            .iter()
            .any(|e| matches!(e, Effect::Start { fallback: None, def, .. } if def.parent.kind == "Gadget"))
    );
}
