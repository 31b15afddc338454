//! Why a reconcile failed, and what a failure says about the API server and RBAC.

/// Why a reconcile failed; it is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The API server refused or failed a request.
    #[error("{action} {object}: {}", api_message(source))]
    Kube {
        /// What Stencil was doing.
        action: Operation,
        /// The object, as `Kind namespace/name`.
        object: String,
        /// The server's answer.
        #[source]
        source: kube::Error,
    },
    /// A rendered child has a kind this controller does not watch (`apiVersion/kind`).
    #[error("child kind {0} is not watched")]
    UnknownKind(String),
    /// Children are still being deleted; not an error, a wait.
    #[error("waiting for {0}")]
    Waiting(String),
    /// Several requests failed; each was tried.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Several(Vec<ReconcileError>),
    /// The render task died (a bug in Stencil, never the template's fault).
    #[error("the render of {parent} did not finish: {source}")]
    RenderAborted {
        /// The parent whose render died.
        parent: String,
        source: tokio::task::JoinError,
    },
}

/// What the API server said, in its own words: its message, reason and code, not a dump
/// of the response.
pub fn api_message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) if status.reason.is_empty() => format!("{} ({})", status.message, status.code),
        kube::Error::Api(status) => format!("{} ({}, {})", status.message, status.reason, status.code),
        other => other.to_string(),
    }
}

/// What Stencil was doing when a request failed: said in the error, and the RBAC verb a
/// refusal of it means is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// Reading one object before the first write.
    Read,
    /// Server-side applying a child.
    Apply,
    /// Taking over an object (`adopt: IfUnowned`).
    Adopt,
    /// Deleting a child (a teardown, or a Recreate).
    Delete,
    /// Deleting a child no longer rendered.
    Prune,
    /// Listing a parent's children.
    ListChildren,
    /// Removing the parent's ownerReference from a child that is kept.
    Orphan,
    /// Removing Stencil's finalizer.
    Release,
    /// Adding Stencil's finalizer (a patch of the parent).
    UpdateFinalizers,
    /// Writing the parent's status.
    WriteStatus,
    /// Handing a draining parent over to another member (removing its shard labels).
    Handover,
}

impl Operation {
    /// The RBAC verb the request needs.
    pub fn verb(self) -> &'static str {
        match self {
            Operation::Read => "get",
            Operation::ListChildren => "list",
            Operation::Delete | Operation::Prune => "delete",
            Operation::Apply
            | Operation::Adopt
            | Operation::Orphan
            | Operation::Release
            | Operation::UpdateFinalizers
            | Operation::WriteStatus
            | Operation::Handover => "patch",
        }
    }
}

impl std::fmt::Display for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Operation::Read => "read",
            Operation::Apply => "apply",
            Operation::Adopt => "adopt",
            Operation::Delete => "delete",
            Operation::Prune => "prune",
            Operation::ListChildren => "list the children of",
            Operation::Orphan => "orphan",
            Operation::Release => "release",
            Operation::UpdateFinalizers => "update finalizers of",
            Operation::WriteStatus => "write status of",
            Operation::Handover => "hand over",
        })
    }
}

impl ReconcileError {
    /// One error for all that failed, or none.
    ///
    /// # Errors
    ///
    /// The one error when only one failed, else [`ReconcileError::Several`].
    pub fn all(mut errors: Vec<ReconcileError>) -> Result<(), ReconcileError> {
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.remove(0)),
            _ => Err(ReconcileError::Several(errors)),
        }
    }

    /// True when the request never got an answer from the API server (it is down or
    /// unreachable), as opposed to an answer that refused it.
    pub fn unreachable(&self) -> bool {
        match self {
            ReconcileError::Kube { source, .. } => !matches!(source, kube::Error::Api(_)),
            ReconcileError::Several(all) => all.iter().all(ReconcileError::unreachable),
            _ => false,
        }
    }

    /// True when trying again may well succeed: no answer, a conflict with a concurrent
    /// write (409), throttling (429) or a server error (5xx). A rollout does not count
    /// such a pass against its revision.
    pub fn transient(&self) -> bool {
        match self {
            ReconcileError::Kube {
                source: kube::Error::Api(status),
                ..
            } => matches!(status.code, 409 | 429 | 500..=599),
            ReconcileError::Several(all) => all.iter().all(ReconcileError::transient),
            other => other.unreachable(),
        }
    }

    /// For a request the API server refused (403): what was refused and how to allow it.
    pub fn forbidden(&self) -> Option<String> {
        if let ReconcileError::Several(all) = self {
            return all.iter().find_map(ReconcileError::forbidden);
        }
        let ReconcileError::Kube {
            action,
            object,
            source: kube::Error::Api(status),
        } = self
        else {
            return None;
        };
        (status.code == 403).then(|| {
            // Not every 403 is a missing rule.
            if status.message.contains("being terminated") {
                return format!(
                    "cannot {action} {object}: {}; nothing to grant, the namespace is being deleted",
                    status.message
                );
            }
            if status.message.contains("blockOwnerDeletion") {
                return format!(
                    "cannot {action} {object}: {}; grant `update` on the parent kind's `finalizers` subresource (`stencil rbac` does)",
                    status.message
                );
            }
            if status.message.contains("attempting to grant RBAC permissions not currently held") {
                let binding = status.details.as_ref().is_some_and(|d| d.kind.ends_with("bindings"));
                let allow = if binding {
                    "`bind` on the role it references"
                } else {
                    "`escalate` on roles or clusterroles"
                };
                return format!(
                    "cannot {action} {object}: the API server refused it as privilege escalation, since Stencil may only grant permissions it holds itself: {}; write the role's rules literally so `stencil rbac` grants them to Stencil, or have an admin grant {allow}",
                    status.message
                );
            }
            let rule = status
                .details
                .as_ref()
                .map(|d| crate::gvk::missing_rule(&d.group, &d.kind, action.verb()))
                .unwrap_or_default();
            format!(
                "forbidden to {action} {object}: {}; add the rule {rule}",
                status.message
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(code: u16, reason: &str, message: &str) -> ReconcileError {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": code, "reason": reason, "message": message,
            "details": {"group": "rbac.authorization.k8s.io", "kind": "clusterroles"}}))
        .unwrap();
        ReconcileError::Kube {
            action: Operation::Apply,
            object: "ClusterRole reader".into(),
            source: kube::Error::Api(Box::new(status)),
        }
    }

    #[test]
    fn an_api_error_is_said_in_words_not_dumped() {
        let e = refused(403, "Forbidden", "clusterroles.rbac.authorization.k8s.io is forbidden");
        assert_eq!(
            e.to_string(),
            "apply ClusterRole reader: clusterroles.rbac.authorization.k8s.io is forbidden (Forbidden, 403)"
        );
    }

    #[test]
    fn a_403_names_what_is_actually_needed() {
        let rule = refused(403, "Forbidden", "clusterroles is forbidden")
            .forbidden()
            .unwrap();
        assert!(rule.contains("add the rule"), "{rule}");
        let terminating = refused(
            403,
            "Forbidden",
            "unable to create new content in namespace shop because it is being terminated",
        )
        .forbidden()
        .unwrap();
        assert!(
            terminating.contains("nothing to grant") && !terminating.contains("add the rule"),
            "{terminating}"
        );
        let owner = refused(
            403,
            "Forbidden",
            "cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on",
        )
        .forbidden()
        .unwrap();
        assert!(owner.contains("`finalizers` subresource"), "{owner}");
        let escalation = refused(
            403,
            "Forbidden",
            "clusterroles.rbac.authorization.k8s.io \"r\" is forbidden: user \"system:serviceaccount:s:stencil\" (groups=[]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}",
        )
        .forbidden()
        .unwrap();
        assert!(
            escalation.contains("privilege escalation") && escalation.contains("`escalate` on roles"),
            "{escalation}"
        );
    }

    #[test]
    fn a_conflict_throttling_or_server_error_is_transient_a_refusal_is_not() {
        for code in [409, 429, 500, 503] {
            assert!(refused(code, "x", "m").transient(), "{code}");
        }
        for code in [400, 403, 404, 422] {
            assert!(!refused(code, "x", "m").transient(), "{code}");
        }
        assert!(!ReconcileError::Waiting("a child".into()).transient());
    }
}
