//! What makes a parent reconcile besides its own events: a change to one of its children
//! (found by the `stencil.dev/` labels), to a lookup object it read, or to an object
//! that joins one of its selector lookups.

use std::sync::Arc;

use futures::StreamExt;
use kube::api::ObjectMeta;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc::UnboundedReceiver;

use super::context::{Context, ParentKey};
use crate::labels;
use crate::object_key::ObjectKey;
use crate::watch::WatchLease;

/// What a watched object is to this definition.
#[derive(Clone, Copy)]
pub(super) enum Role {
    /// A child: its labels name its parent.
    Child,
    /// A lookup object: the reader index names its parents.
    Lookup,
}

/// Turns a watch's events into parent references for this definition.
pub(super) fn triggers(
    ctx: &Arc<Context>,
    watch: &WatchLease,
    role: Role,
) -> impl futures::Stream<Item = ParentKey> + Send + 'static {
    let ctx = ctx.clone();
    let gvk = watch.gvk.clone();
    // Every parent's first pass reads the store whole: only changes from now on wake one.
    stream_from(watch.changes()).flat_map(move |meta| {
        let key = ObjectKey::new(
            &gvk,
            meta.namespace.as_deref(),
            meta.name.as_deref().unwrap_or_default(),
        );
        let refs = match role {
            Role::Child => {
                ctx.ledger().unseen.seen(&key, meta.uid.as_deref());
                let mut refs: Vec<ParentKey> = child_parent(&ctx, &meta)
                    .filter(|parent| !ctx.is_echo(parent, &meta))
                    .into_iter()
                    .collect();
                // Parents waiting for another's object to be let go.
                refs.extend(ctx.ledger().waiting_for(&key));
                refs
            }
            Role::Lookup => {
                let mut refs: Vec<ParentKey> = ctx.ledger().readers_of(&key);
                refs.extend(ctx.ledger().selecting(|s| s.gvk == gvk && s.matches(&meta)));
                refs.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
                refs.dedup();
                refs
            }
        };
        for r in &refs {
            ctx.requested(r);
        }
        futures::stream::iter(refs)
    })
}

/// The parent of a child, from its `stencil.dev/` labels, when it belongs to this definition.
pub(super) fn child_parent(ctx: &Context, child: &ObjectMeta) -> Option<ParentKey> {
    let empty = std::collections::BTreeMap::new();
    let l = child.labels.as_ref().unwrap_or(&empty);
    if l.get(labels::DEFINITION).map(String::as_str) != Some(crate::labels::label_value(&ctx.def.name).as_str()) {
        return None;
    }
    // A name too long for a label is hashed in `stencil.dev/parent-name`: the UID says.
    if let Some(r) = l.get(labels::PARENT_UID).and_then(|uid| ctx.parents.long_named(uid)) {
        return Some(r);
    }
    let name = l.get(labels::PARENT_NAME)?;
    let mut r = ObjectRef::new_with(name, ctx.parents.resolved.resource.clone());
    if let Some(ns) = l.get(labels::PARENT_NAMESPACE) {
        r = r.within(ns);
    }
    Some(r)
}

/// A stream of what a channel receives.
pub(super) fn stream_from<T: Send + 'static>(
    mut rx: UnboundedReceiver<T>,
) -> impl futures::Stream<Item = T> + Send + 'static {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}
