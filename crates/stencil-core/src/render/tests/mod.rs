//! Render tests: one per rule of the renderer, by what the rule is about, plus a
//! property test that render is deterministic and never panics on arbitrary parents. This
//! module holds what the cases share: a Widget definition around their children, a
//! parent, and the inputs a render reads.

use std::collections::BTreeMap;

use crate::fixtures::{ParentKind, bare_definition};
use serde_json::{Value, json};

use super::*;
use crate::compile::compile_file;

pub(super) use crate::fixtures::{CONFIGMAP as CM, child};

mod children;
mod finalize;
mod helpers;
mod lookups;
mod properties;
mod readiness;
mod rules;
mod sandbox;

/// The parent kind of every case.
const WIDGET: ParentKind<'static> = ParentKind {
    group: "example.com",
    kind: "Widget",
    plural: "widgets",
};

/// A Widget definition with `children` and `extra` spec fields, compiled.
pub(super) fn compile(children: &str, extra: &str) -> CompiledDefinition {
    let (mut defs, diags) = compile_file("w.yaml", &bare_definition(WIDGET, children, extra));
    assert!(diags.0.is_empty(), "{diags}");
    defs.remove(0)
}

pub(super) fn parent() -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w1", "namespace": "team", "uid": "uid-1", "generation": 7},
        "spec": {"size": 3, "items": ["a", "b"]}})
}

pub(super) struct Inputs {
    observed: BTreeMap<String, Vec<Value>>,
    lookups: BTreeMap<String, Value>,
    scopes: Scopes,
}

impl Inputs {
    pub(super) fn new() -> Self {
        Inputs {
            observed: BTreeMap::new(),
            lookups: BTreeMap::new(),
            scopes: Scopes::default(),
        }
    }
    pub(super) fn observe(mut self, child: &str, obj: Value) -> Self {
        self.observed.entry(child.into()).or_default().push(obj);
        self
    }
    fn input<'a>(&'a self, parent: &'a Value) -> RenderInput<'a> {
        RenderInput {
            parent,
            observed: &self.observed,
            lookups: &self.lookups,
            scopes: &self.scopes,
            served: &[],
        }
    }
    pub(super) fn run(&self, def: &CompiledDefinition, parent: &Value) -> Result<RenderOutput, RenderFailure> {
        render(def, self.input(parent))
    }
}

pub(super) fn condition<'a>(status: &'a Value, t: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == t)
        .unwrap_or_else(|| panic!("no condition {t} in {status}"))
}
