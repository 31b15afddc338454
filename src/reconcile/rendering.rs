//! Rendering one parent off the async threads: its lookups read from the lookup watches
//! (recording what it reads, so a change wakes it), the pure render on the blocking pool,
//! and a failed render reported without touching anything else.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::ResourceExt as _;
use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use serde_json::Value;

use super::context::{describe, describe_object};
use super::readers::LookupSelection;
use super::{Context, ReconcileError, status_write};
use crate::compile::CompiledDefinition;
use crate::gvk::Gvk;
use crate::labels;
use crate::object_key::ObjectKey;
use crate::object_key::to_json;
use crate::render::{self, RenderInput};

/// The parent as JSON, and what `render` made of it.
type Rendered<T> = (Value, Result<T, render::RenderFailure>);

/// A pure render of one parent: [`render::render`] or [`render::render_finalize`].
type RenderFn<T> = fn(&CompiledDefinition, RenderInput<'_>) -> Result<T, render::RenderFailure>;

/// The status of a pass that wrote children, each written child observed as the API
/// server answered the write: the status says now what the children's watch events would
/// make the next pass say, so children that are ready once they exist make their parent
/// Ready in the pass that creates them. `rendered` (the status from before the writes)
/// stands when the second render fails.
pub(super) async fn status_after_writes(
    ctx: &Arc<Context>,
    parent: &Arc<DynamicObject>,
    observed: &[Arc<DynamicObject>],
    answers: Vec<DynamicObject>,
    rendered: Value,
) -> Value {
    let written: std::collections::HashSet<ObjectKey> = answers.iter().filter_map(ObjectKey::of_object).collect();
    let mut now: Vec<Arc<DynamicObject>> = observed
        .iter()
        .filter(|o| ObjectKey::of_object(o).is_none_or(|k| !written.contains(&k)))
        .cloned()
        .collect();
    now.extend(answers.into_iter().map(|mut answer| {
        // As the store keeps objects.
        answer.metadata.managed_fields = None;
        Arc::new(answer)
    }));
    match render_off_thread(ctx, parent, &now, render::render).await {
        Ok((_, Ok(out))) => out.status,
        _ => rendered,
    }
}

/// Reads the lookups and renders on the blocking pool: a template may spend its whole
/// fuel, which must not hold up the async threads that serve every other parent.
pub(super) async fn render_off_thread<T: Send + 'static>(
    ctx: &Arc<Context>,
    parent: &Arc<DynamicObject>,
    observed_objects: &[Arc<DynamicObject>],
    render: RenderFn<T>,
) -> Result<Rendered<T>, ReconcileError> {
    let mut observed: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for o in observed_objects {
        if let Some(child) = o.labels().get(labels::CHILD) {
            observed.entry(child.clone()).or_default().push(to_json(o));
        }
    }
    let (job_ctx, job_parent) = (ctx.clone(), parent.clone());
    tokio::task::spawn_blocking(move || {
        let parent_json = to_json(&job_parent);
        let rendered = fetch_lookups(&job_ctx, &job_parent, &parent_json).and_then(|lookups| {
            let input = RenderInput {
                parent: &parent_json,
                observed: &observed,
                lookups: &lookups,
                scopes: &job_ctx.scopes,
                served: &job_ctx.served,
            };
            render(&job_ctx.def_for(&job_parent), input)
        });
        (parent_json, rendered)
    })
    .await
    .map_err(|source| ReconcileError::RenderAborted {
        parent: describe_object(parent),
        source,
    })
}

/// A render that failed: the parent's status says why, an Error event is published, and
/// nothing else in the cluster changes.
pub(super) async fn render_failed(
    ctx: &Context,
    parent: &DynamicObject,
    parent_json: &Value,
    failure: render::RenderFailure,
) -> Result<Action, ReconcileError> {
    tracing::warn!(definition = %ctx.def.name, parent = %describe(parent_json), error = %failure, "render failed");
    ctx.event(parent, EventType::Warning, "Error", failure.to_string())
        .await;
    let status = render::failure_status(parent_json, &failure, &ctx.def_for(parent).latched_conditions());
    status_write::write(ctx, parent, &status).await?;
    Ok(Action::requeue(ctx.resync()))
}

/// The lookups of a parent from the lookup watches; records what the parent reads.
fn fetch_lookups(
    ctx: &Context,
    parent: &DynamicObject,
    parent_json: &Value,
) -> Result<BTreeMap<String, Value>, render::RenderFailure> {
    let requests = render::lookup_requests(&ctx.def_for(parent), parent_json, &ctx.scopes)?;
    let mut found = Vec::new();
    let mut reads = Vec::new();
    let mut selections = Vec::new();
    for r in &requests {
        let Ok(gvk) = Gvk::parse(&r.api_version, &r.kind) else {
            continue;
        };
        let w = ctx.lookup_watch(&gvk);
        match &r.target {
            render::Target::Name(name) => {
                reads.push(ObjectKey::new(&gvk, r.namespace.as_deref(), name));
                let Some(w) = w else {
                    continue;
                };
                let mut oref = kube::runtime::reflector::ObjectRef::new_with(name, w.resolved.resource.clone());
                if let Some(ns) = &r.namespace {
                    oref = oref.within(ns);
                }
                if let Some(obj) = w.get(&oref) {
                    found.push(to_json(&obj));
                }
            }
            render::Target::Selector(matcher) => {
                let selection = LookupSelection {
                    gvk: gvk.clone(),
                    namespace: r.namespace.clone(),
                    matcher: matcher.clone(),
                };
                // Members are read too, so one that leaves the selection (relabelled or
                // deleted) wakes the parent although it no longer matches.
                let members = w.map(|w| w.scan_metadata(|m| selection.matches(m).then(|| w.key_of(m))));
                for obj in members
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|k| w.and_then(|w| w.get(k)))
                {
                    if let Some(key) = ObjectKey::of_object(&obj) {
                        reads.push(key);
                    }
                    found.push(to_json(&obj));
                }
                selections.push(selection);
            }
        }
    }
    let me = ctx.parent_key(parent);
    ctx.ledger().reads(&me, reads, selections);
    Ok(render::match_lookups(&requests, &found))
}
