//! Every label and annotation Stencil writes on the objects it manages lives here, under
//! the `stencil.dev/` prefix, so the controller, the renderer and the RBAC generator agree
//! on one set of keys.

/// The API group of Stencil's own resources and the prefix of its label keys.
pub const GROUP: &str = "stencil.dev";

/// Server-side apply field manager for everything Stencil writes.
pub const FIELD_MANAGER: &str = "stencil";

/// Names the OperatorDefinition that produced a child.
pub const DEFINITION: &str = "stencil.dev/definition";

/// The UID of the parent a child belongs to; the controller selects children with it.
pub const PARENT_UID: &str = "stencil.dev/parent-uid";

/// Annotation on a CRD that Stencil did not install: `"true"` lets a definition's
/// `spec.crd` manage it from then on (a migration from a hand-made or Helm-made CRD).
pub const ADOPT_CRD: &str = "stencil.dev/adopt";

/// Annotation on a parent CRD Stencil installed: every child kind (`apiVersion/Kind`,
/// comma-separated) the definition has ever written, so the children of a template
/// removed while Stencil was down are still found and pruned after a restart.
pub const CHILD_KINDS: &str = "stencil.dev/child-kinds";

/// Annotation on a parent CRD while Stencil rewrites its objects to a new storage
/// version: `<switch>:<resourceVersion>`, the storage switch (see [`STORAGE_SWITCH`]) and
/// the list's resourceVersion when the rewrite began, so a restarted rewrite of the same
/// switch skips what is stored anew already.
pub const STORAGE_SWITCHED_AT: &str = "stencil.dev/storage-switched-at";

/// Annotation on a `StorageVersionMigration` Stencil creates: the storage switch it
/// migrates (`<version>-<hash>` of the versions moved from, the version moved to and the
/// CRD's generation), so one left from another switch is never taken for this one.
pub const STORAGE_SWITCH: &str = "stencil.dev/storage-switch";

/// The parent's name, for children that cannot carry an ownerReference.
pub const PARENT_NAME: &str = "stencil.dev/parent-name";

/// The parent's namespace, for children that cannot carry an ownerReference.
pub const PARENT_NAMESPACE: &str = "stencil.dev/parent-namespace";

/// The child entry (`spec.children[].name`) whose template produced an object.
pub const CHILD: &str = "stencil.dev/child";

/// The well-known label that names the tool managing an object.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// The value of [`MANAGED_BY`] on Stencil's children.
pub const MANAGED_BY_VALUE: &str = "stencil";

/// Assigns a parent, and its children, to one member of a sharded ring.
pub const SHARD: &str = "stencil.dev/shard";

/// Added by the sharder to ask a parent's member to let it go before another takes it.
pub const DRAIN: &str = "stencil.dev/drain";

/// Annotation on a parent that moved between members: the member it left. Its children
/// still carry that member's shard label, so the new member finds them through the API
/// server once, then removes the annotation.
pub const MOVED_FROM: &str = "stencil.dev/moved-from";

/// On each membership Lease: the ring (the Helm release) the member belongs to.
pub const RING: &str = "stencil.dev/ring";

/// Annotation on a definition's `ControllerRevision`: the hash of the spec it holds.
pub const REVISION_HASH: &str = "stencil.dev/revision-hash";

/// Annotation on a definition's newest `ControllerRevision`: where its rollout stands,
/// as JSON.
pub const ROLLOUT: &str = "stencil.dev/rollout";

/// Annotation that stops every write for a parent, or for every parent of a definition,
/// while it is `"true"`.
pub const PAUSED: &str = "stencil.dev/paused";

/// Longest value Kubernetes accepts for a label.
pub const MAX_LABEL_VALUE: usize = 63;

/// Annotation holding the hash of what Stencil last applied to a child; a live object with
/// the same hash that still contains every applied field needs no write.
pub const APPLIED_HASH: &str = "stencil.dev/applied-hash";

/// Finalizer Stencil puts on parents so their children are cleaned up before they go.
pub const FINALIZER: &str = "stencil.dev/finalizer";

/// Annotation on a definition that lets it force a breaking change of its parent's CRD.
pub const ALLOW_BREAKING_CHANGES: &str = "stencil.dev/allow-breaking-changes";

/// Annotation on an object converted to a version that cannot hold all of it: the
/// storage version's `spec` and `status` as JSON, so converting back loses nothing.
pub const CONVERSION_DATA: &str = "stencil.dev/conversion-data";

/// Whether annotations hold [`PAUSED`] set to `"true"`.
pub fn paused(annotations: Option<&std::collections::BTreeMap<String, String>>) -> bool {
    annotations.and_then(|a| a.get(PAUSED)).is_some_and(|v| v == "true")
}

/// A label value for any string: as is when valid, else a DNS label with a hash suffix.
pub fn label_value(s: &str) -> String {
    let valid = s.len() <= MAX_LABEL_VALUE
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && s.chars().next().is_none_or(|c| c.is_ascii_alphanumeric())
        && s.chars().last().is_none_or(|c| c.is_ascii_alphanumeric());
    if valid {
        s.to_string()
    } else {
        to_dns_label(s, MAX_LABEL_VALUE)
    }
}

/// A DNS-1123 label made from any string (the templates' `dns_label`): lower-case
/// alphanumerics and '-', at most `max` characters; a value that had to be cut ends with a
/// stable hash suffix.
pub fn to_dns_label(text: &str, max: usize) -> String {
    let mut label: String = text
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    label = label.trim_matches('-').to_string();
    if label.len() <= max && !label.is_empty() {
        return label;
    }
    let suffix = &sha256_hex(text)[..8];
    let keep = max - suffix.len() - 1;
    let head = label[..label.len().min(keep)].trim_end_matches('-');
    if head.is_empty() {
        suffix.to_string()
    } else {
        format!("{head}-{suffix}")
    }
}

fn sha256_hex(text: &str) -> String {
    use sha2::{Digest as _, Sha256};
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
