//! The finalize step of a parent being deleted, purely: its finalize children, and
//! whether `finalize.until` (or, without it, every finalize child's readiness) lets the
//! teardown start.

use minijinja::value::{Serde, Value as JinjaValue};
use serde_json::{Value, json};

use super::{DesiredChild, ParentInfo, RenderFailure, RenderInput, Waiting, context, render_entries};
use crate::compile::CompiledDefinition;
use crate::readiness::Readiness;

/// The finalize step of a parent being deleted: its finalize children, and whether the
/// teardown of the other children may start.
#[derive(Debug, Clone, PartialEq)]
pub struct FinalizeOutput {
    /// The finalize children to apply, in dependency order.
    pub children: Vec<DesiredChild>,
    /// Finalize children held back by their dependencies.
    pub waiting: Vec<Waiting>,
    /// `None` when the step is done (`finalize.until` holds, or without it, every
    /// finalize child is ready); otherwise what it waits for.
    pub pending: Option<String>,
}

impl FinalizeOutput {
    /// `{"children": [...], "waiting": [...], "done": bool, "pending": "..."}`, as
    /// `stencil render` prints for a parent that carries a deletionTimestamp.
    pub fn to_json(&self) -> Value {
        let mut out = json!({
            "children": self.children.iter().map(|c| c.object.clone()).collect::<Vec<_>>(),
            "waiting": self.waiting,
            "done": self.pending.is_none(),
        });
        if let Some(p) = &self.pending {
            out["pending"] = json!(p);
        }
        out
    }
}

/// Renders the finalize step of a parent being deleted.
///
/// # Errors
///
/// A finalize child's template or rule fails: the failure lists every error with its place.
pub fn render_finalize(def: &CompiledDefinition, input: RenderInput<'_>) -> Result<FinalizeOutput, RenderFailure> {
    let info = ParentInfo::new(def, input.parent).serving(input.served);
    let context = context(def, &input);
    let jinja_ctx = JinjaValue::from(Serde(&context));
    let entries = render_entries(&info, def.finalize_order(), (&context, &jinja_ctx), &input)?;
    let pending = match def.until() {
        Some(rule) => match rule.holds(&context) {
            Ok(true) => None,
            Ok(false) => Some(format!("finalize.until `{}` does not hold", rule.source())),
            Err(e) => Some(format!("finalize.until `{}` failed: {e}", rule.source())),
        },
        None => {
            let not_ready: Vec<String> = entries
                .ready
                .iter()
                .filter_map(|(name, r)| match r {
                    Readiness::NotReady(why) => Some(format!("{name} ({why})")),
                    Readiness::Ready => None,
                })
                .collect();
            (!not_ready.is_empty()).then(|| format!("finalize children not ready: {}", not_ready.join(", ")))
        }
    };
    Ok(FinalizeOutput {
        children: entries.desired,
        waiting: entries.waiting,
        pending,
    })
}
