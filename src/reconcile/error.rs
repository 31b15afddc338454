//! Why a reconcile failed, and what a failure says about the API server and RBAC.

/// Why a reconcile failed; it is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The API server refused or failed a request.
    #[error("{action} {object}: {source}")]
    Kube {
        /// What Stencil was doing.
        action: &'static str,
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
    #[error("the render of {0} did not finish: {1}")]
    RenderAborted(String, String),
}

impl ReconcileError {
    /// One error for all that failed, or none.
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
            let rule = status
                .details
                .as_ref()
                .map(|d| {
                    let verb = match *action {
                        "delete" | "prune" => "delete",
                        "read" => "get",
                        _ => "patch",
                    };
                    crate::rbac::missing_rule(&d.group, &d.kind, verb)
                })
                .unwrap_or_default();
            format!(
                "forbidden to {action} {object}: {}; add the rule {rule}",
                status.message
            )
        })
    }
}
