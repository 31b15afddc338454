//! Argo CD health for parents: the Lua health check (the chart's
//! `files/argocd-health.lua`) and the `argocd-cm` entries that attach it to each parent
//! kind, as `stencil argocd` prints them. Argo CD shows a custom kind without a health
//! check as Healthy whatever its conditions say, so every parent kind needs one.

use std::collections::BTreeMap;

use serde_json::Value;

use stencil::compile::CompiledDefinition;

/// The Lua health check: Stalled is Degraded, Ready is Healthy, a Conflict is Degraded,
/// anything else Progressing.
pub const HEALTH_LUA: &str = include_str!("../../../charts/stencil/files/argocd-health.lua");

/// The `argocd-cm` data key for a kind's health check: `resource.customizations.health.<group>_<Kind>`
/// (core kinds have an empty group).
pub fn health_key(group: &str, kind: &str) -> String {
    format!("resource.customizations.health.{group}_{kind}")
}

/// The `argocd-cm` data entries for every parent kind of `defs`, without repeats.
pub fn customizations(defs: &[CompiledDefinition]) -> BTreeMap<String, Value> {
    defs.iter()
        .map(|d| {
            (
                health_key(&d.parent.group, &d.parent.kind),
                Value::String(HEALTH_LUA.to_string()),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests;
