//! Deleting one child, guarded: only the object that was judged (its uid), and, for a
//! deletion judged from the object's content, only the version that was read. Prune,
//! teardown and a Recreate delete through it.

use kube::api::{Api, DeleteParams, DynamicObject, Preconditions};
use kube::runtime::events::EventType;
use serde_json::Value;

use super::Context;
use super::context::describe;

/// Deletes a child with a UID precondition, so an object recreated meanwhile is kept;
/// `as_read` adds its resourceVersion, for a deletion judged from the object's content,
/// which a lagging store may show as it was. True when a deletion was asked for; false
/// when the object was gone already, or is another object (or, `as_read`, another
/// version) now.
pub(super) async fn child(
    ctx: &Context,
    parent: &DynamicObject,
    api: &Api<DynamicObject>,
    live: &Value,
    reason: &str,
    as_read: bool,
) -> Result<bool, kube::Error> {
    let field = |pointer: &str| live.pointer(pointer).and_then(Value::as_str).map(str::to_string);
    let name = field("/metadata/name").unwrap_or_default();
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: field("/metadata/uid"),
            resource_version: as_read.then(|| field("/metadata/resourceVersion")).flatten(),
        }),
        ..DeleteParams::background()
    };
    match api.delete(&name, &params).await {
        Ok(_) => {
            ctx.event(parent, EventType::Normal, reason, format!("{} deleted", describe(live)))
                .await;
            Ok(true)
        }
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}
