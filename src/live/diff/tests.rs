//! The diff's summary and its text report.

use super::*;

#[test]
fn the_summary_counts_and_says_it_in_one_line() {
    let d = ParentDiff {
        parent: "Widget ns/a".into(),
        changes: vec![
            Change::Created {
                object: "ConfigMap ns/a".into(),
            },
            Change::Updated {
                object: "ConfigMap ns/b".into(),
                diff: "-x\n+y\n".into(),
            },
            Change::Pruned {
                object: "ConfigMap ns/c".into(),
            },
        ],
        ..ParentDiff::default()
    };
    let s = Summary::of(&[d.clone(), ParentDiff::default()]);
    assert_eq!(
        s.line(),
        "2 parents: 1 children created, 1 updated, 0 recreated, 1 pruned"
    );
    assert!(s.changes());
    assert!(!Summary::of(&[ParentDiff::default()]).changes());
    let report = text(&[d]);
    assert!(report.contains("  + ConfigMap ns/a (created)\n"), "{report}");
    assert!(report.contains("      +y\n"), "{report}");
}

#[test]
fn a_refused_immutable_change_is_a_change_and_says_nothing_is_written() {
    let d = ParentDiff {
        parent: "Widget ns/a".into(),
        changes: vec![Change::Refused {
            object: "PersistentVolumeClaim ns/data".into(),
            why: "spec: Forbidden: spec is immutable after creation".into(),
        }],
        ..ParentDiff::default()
    };
    let s = Summary::of(std::slice::from_ref(&d));
    assert!(s.changes(), "the parent would say Immutable");
    assert!(s.line().ends_with(", 1 refused as immutable"), "{}", s.line());
    let report = text(&[d]);
    assert!(
        report.contains("  x PersistentVolumeClaim ns/data (refused, nothing written: spec: Forbidden"),
        "{report}"
    );
}
