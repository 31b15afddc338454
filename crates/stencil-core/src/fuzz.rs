//! Time-budgeted fuzzing of the YAML parser, the compiler and render: whatever the input,
//! they return a result or an error and never panic. `STENCIL_FUZZ_SECONDS` sets each
//! target's budget: a few seconds in `make test`, minutes in `make test-faults`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::Value;

use crate::compile::{compile_file, scopes};
use crate::render::{RenderInput, render};

const OPERATORS: [(&str, &str); 6] = [
    ("database.yaml", include_str!("../../../operators/database.yaml")),
    ("website.yaml", include_str!("../../../operators/website.yaml")),
    ("tenant.yaml", include_str!("../../../operators/tenant.yaml")),
    (
        "namespace-defaults.yaml",
        include_str!("../../../operators/namespace-defaults.yaml"),
    ),
    (
        "secret-propagation.yaml",
        include_str!("../../../operators/secret-propagation.yaml"),
    ),
    (
        "service-per-pod.yaml",
        include_str!("../../../operators/service-per-pod.yaml"),
    ),
];
const EXAMPLES: [&str; 6] = [
    include_str!("../../../examples/database.yaml"),
    include_str!("../../../examples/website.yaml"),
    include_str!("../../../examples/tenant.yaml"),
    include_str!("../../../examples/namespace-defaults.yaml"),
    include_str!("../../../examples/secret-propagation.yaml"),
    include_str!("../../../examples/service-per-pod.yaml"),
];

/// Fragments that matter to YAML, minijinja and JSONPath, spliced into good definitions.
const FRAGMENTS: &[&str] = &[
    "{{",
    "}}",
    "{%",
    "%}",
    "{#",
    ":",
    ": ",
    "- ",
    "\n",
    "\n  ",
    "  ",
    "[",
    "]",
    "{",
    "}",
    "'",
    "\"",
    "|",
    ">",
    "&a ",
    "*a",
    "<<: *a",
    "!!str ",
    "$.",
    "[?",
    "@.",
    "..",
    "==",
    "null",
    "~",
    "yes",
    "0x1F",
    "1e999",
    "\t",
    "{% for i in range(99999) %}",
    "{% endfor %}",
    "{{ parent }}",
    "{{ children }}",
    "\u{feff}",
    "\\",
];

const CASES_PER_RUN: u32 = 64;

fn budget() -> Duration {
    let seconds = std::env::var("STENCIL_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    Duration::from_secs(seconds)
}

/// Runs `test` on inputs from `strategy` until the budget is spent; a panic or a failed
/// assertion fails with the smallest input proptest finds.
fn fuzz<S: Strategy>(strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S::Value: std::fmt::Debug,
{
    let started = Instant::now();
    let mut cases = 0;
    while started.elapsed() < budget() {
        cases += CASES_PER_RUN;
        let mut runner = TestRunner::new(Config {
            cases: CASES_PER_RUN,
            failure_persistence: None,
            ..Config::default()
        });
        if let Err(e) = runner.run(&strategy, &test) {
            panic!("{e}");
        }
    }
    eprintln!("{cases} cases in {:.1?}", started.elapsed());
}

/// One edit of a text: delete a span, insert a fragment, or repeat a line.
#[derive(Debug, Clone)]
enum Edit {
    Delete(usize, usize),
    Insert(usize, &'static str),
    RepeatLine(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 1usize..40).prop_map(|(at, len)| Edit::Delete(at, len)),
        (any::<usize>(), proptest::sample::select(FRAGMENTS)).prop_map(|(at, f)| Edit::Insert(at, f)),
        any::<usize>().prop_map(Edit::RepeatLine),
    ]
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut s = text.to_string();
    let boundary = |s: &str, at: usize| {
        let mut at = at % (s.len() + 1);
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        at
    };
    for e in edits {
        match *e {
            Edit::Delete(at, len) => {
                let from = boundary(&s, at);
                let to = boundary(&s, from.saturating_add(len).min(s.len()));
                s.replace_range(from..to.max(from), "");
            }
            Edit::Insert(at, fragment) => {
                let at = boundary(&s, at);
                s.insert_str(at, fragment);
            }
            Edit::RepeatLine(n) => {
                let lines: Vec<&str> = s.lines().collect();
                if !lines.is_empty() {
                    let i = n % lines.len();
                    let mut out: Vec<&str> = lines[..=i].to_vec();
                    out.extend(&lines[i..]);
                    s = out.join("\n");
                }
            }
        }
    }
    s
}

/// The example parents of the bundled operators.
fn examples() -> Vec<Value> {
    EXAMPLES
        .iter()
        .flat_map(|e| crate::yaml::documents::<Value>(e).expect("examples parse"))
        .collect()
}

/// Renders every definition that compiled against `parent`; an error is fine, a panic
/// is not.
fn render_all(file: &str, text: &str, parent: &Value) {
    let (defs, _) = compile_file(file, text);
    let scopes = scopes(&defs);
    let (observed, lookups) = (BTreeMap::new(), BTreeMap::new());
    for def in &defs {
        let _ = render(
            def,
            RenderInput {
                parent,
                observed: &observed,
                lookups: &lookups,
                scopes: &scopes,
                served: &[],
            },
        );
    }
}

#[test]
fn arbitrary_text_never_panics_the_parser_or_the_compiler() {
    fuzz(".{0,600}", |text| {
        let _ = crate::yaml::documents::<Value>(&text);
        let _ = compile_file("fuzz.yaml", &text);
        Ok(())
    });
}

#[test]
fn edited_bundled_definitions_never_panic_the_compiler_or_render() {
    let examples = examples();
    fuzz(
        (0..OPERATORS.len(), proptest::collection::vec(edit(), 1..6)),
        |(which, edits)| {
            let (file, text) = OPERATORS[which];
            let edited = apply(text, &edits);
            for parent in &examples {
                render_all(file, &edited, parent);
            }
            Ok(())
        },
    );
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::btree_map("[a-zA-Z]{1,8}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

#[test]
fn arbitrary_parents_never_panic_render_of_the_bundled_operators() {
    let examples = examples();
    fuzz(
        (0..examples.len(), json_value(), json_value()),
        |(which, spec, metadata_extra)| {
            let mut parent = examples[which].clone();
            parent["spec"] = spec;
            parent["metadata"]["labels"] = metadata_extra;
            for (file, text) in OPERATORS {
                render_all(file, text, &parent);
            }
            Ok(())
        },
    );
}
