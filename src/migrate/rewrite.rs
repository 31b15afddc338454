//! Stencil's own storage migration: every object written once more (a no-op update the
//! API server stores at the new version), page by page. It resumes without starting
//! over: the resourceVersion at which the API server began storing at the new version is
//! kept on the CRD ([`crate::labels::STORAGE_SWITCHED_AT`]), and an object written after
//! it (by this migration before a restart, or by anyone) is stored at the new version
//! already, so it is skipped. resourceVersions are compared as etcd revisions, as the
//! cluster's own storage-version migrator does.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::ApiResource;

use crate::labels::STORAGE_SWITCHED_AT as SWITCHED_AT;

/// Objects listed per page.
const PAGE: u32 = 250;

/// What to rewrite.
pub(super) struct Target<'a> {
    /// The CRDs, to keep [`SWITCHED_AT`] on `crd`.
    pub crds: &'a Api<CustomResourceDefinition>,
    /// The CRD's name.
    pub crd: &'a str,
    /// Where an earlier run of this migration began, if one did.
    pub switched_at: Option<u64>,
    /// The parent resource at the storage version.
    pub resource: ApiResource,
    /// The storage switch the rewrite carries out.
    pub switch: &'a super::Switch,
}

/// The revision an earlier rewrite of `switch` recorded on the CRD, if any: a record
/// of another switch (even to the same version) is not this one's.
pub(super) fn switched_at(annotations: &BTreeMap<String, String>, switch: &super::Switch) -> Option<u64> {
    let (at, revision) = annotations.get(SWITCHED_AT)?.rsplit_once(':')?;
    (at == switch.id).then(|| revision.parse().ok())?
}

/// Whether an object at `resource_version` was written after `since`, so it is stored
/// at the new version already. An unparsable resourceVersion is rewritten.
fn written_since(resource_version: Option<&str>, since: u64) -> bool {
    resource_version
        .and_then(|rv| rv.parse::<u64>().ok())
        .is_some_and(|rv| rv > since)
}

/// Rewrites every object written before the switch; calls `report` with the objects
/// looked at so far and the total (when the API server gives it) after each page, and
/// returns how many it rewrote.
pub(super) async fn run(
    client: &kube::Client,
    target: Target<'_>,
    report: impl Fn(u64, Option<u64>),
) -> Result<u64, kube::Error> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &target.resource);
    let since = match target.switched_at {
        Some(since) => since,
        None => {
            let now = api.list_metadata(&ListParams::default().limit(1)).await?;
            let since = now.metadata.resource_version.unwrap_or_default().parse().unwrap_or(0);
            annotate(&target, Some(format!("{}:{since}", target.switch.id))).await?;
            since
        }
    };
    let (mut looked_at, mut rewritten, mut total) = (0u64, 0u64, None);
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let page = api.list(&params).await?;
        if total.is_none() {
            let remaining = page.metadata.remaining_item_count.and_then(|r| u64::try_from(r).ok());
            total = Some(page.items.len() as u64 + remaining.unwrap_or(0));
        }
        for obj in &page.items {
            looked_at += 1;
            if written_since(obj.metadata.resource_version.as_deref(), since) {
                continue;
            }
            let name = obj.metadata.name.clone().unwrap_or_default();
            let scoped = crate::discovery::api(client, obj.metadata.namespace.as_deref(), &target.resource);
            match scoped.replace(&name, &PostParams::default(), obj).await {
                Ok(_) => rewritten += 1,
                // A conflict means someone wrote it since the list: it is stored anew.
                Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        report(looked_at, total);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    annotate(&target, None).await?;
    Ok(rewritten)
}

/// Sets (or, with `None`, removes) [`SWITCHED_AT`] on the CRD.
async fn annotate(target: &Target<'_>, value: Option<String>) -> Result<(), kube::Error> {
    let patch = serde_json::json!({"metadata": {"annotations": {SWITCHED_AT: value}}});
    target
        .crds
        .patch(target.crd, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_written_after_the_switch_is_skipped_and_the_record_names_its_version() {
        assert!(written_since(Some("120"), 100));
        assert!(!written_since(Some("100"), 100));
        assert!(!written_since(Some("99"), 100));
        assert!(
            !written_since(Some("opaque"), 100),
            "what cannot be compared is rewritten"
        );
        assert!(!written_since(None, 100));
        let switch = super::super::Switch::new(&["v1".to_string()], "v2", 2);
        let record = BTreeMap::from([(SWITCHED_AT.to_string(), format!("{}:4711", switch.id))]);
        assert_eq!(switched_at(&record, &switch), Some(4711));
        let again = super::super::Switch::new(&["v3".to_string()], "v2", 6);
        assert_eq!(
            switched_at(&record, &again),
            None,
            "a record of an earlier switch to the same version is not resumed"
        );
        let old = BTreeMap::from([(SWITCHED_AT.to_string(), "v2:4711".to_string())]);
        assert_eq!(switched_at(&old, &switch), None, "nor a record that names no switch");
        assert_eq!(switched_at(&BTreeMap::new(), &switch), None);
    }
}
