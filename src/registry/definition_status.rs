//! OperatorDefinition status: the [`Report`]s about a definition, merged by one task per
//! process and written with server-side apply of the status subresource, so no report
//! can lose another. File definitions are only logged.

use std::collections::HashMap;

use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::report::Report;
use crate::conditions::with_times;
use crate::definition::OperatorDefinition;
use crate::labels;
use crate::leader::Leadership;
use crate::source::Origin;

/// Where reports go: the one status task of the process.
#[derive(Clone)]
pub struct Reports(UnboundedSender<(Origin, Report)>);

impl Reports {
    /// Sends a report; it is lost only when the process is shutting down.
    pub fn send(&self, origin: &Origin, report: Report) {
        let _ = self.0.send((origin.clone(), report));
    }
}

/// Starts the status task; it ends when every [`Reports`] is dropped. Each report is
/// logged; it is written only while this process does the leader's work, and those that
/// arrive before are held (the last of each kind per definition) and written once it
/// does.
pub fn start(client: Client, leadership: Leadership) -> (Reports, tokio::task::JoinHandle<()>) {
    let (tx, rx) = unbounded_channel();
    (Reports(tx), tokio::spawn(write_all(client, rx, leadership)))
}

async fn write_all(client: Client, mut rx: UnboundedReceiver<(Origin, Report)>, leadership: Leadership) {
    let mut writer = Writer {
        api: Api::all(client),
        written: HashMap::new(),
    };
    let mut held: Vec<(Origin, Report)> = Vec::new();
    loop {
        let next = if held.is_empty() {
            rx.recv().await
        } else {
            tokio::select! {
                next = rx.recv() => next,
                () = leadership.wait() => {
                    for (origin, report) in std::mem::take(&mut held) {
                        writer.write(origin, report).await;
                    }
                    continue;
                }
            }
        };
        let Some((origin, report)) = next else { return };
        report.log(&origin);
        if leadership.now() {
            writer.write(origin, report).await;
        } else {
            hold(&mut held, origin, report);
        }
    }
}

/// Keeps a report for later: the last of each kind per definition, in arrival order.
fn hold(held: &mut Vec<(Origin, Report)>, origin: Origin, report: Report) {
    let kind = std::mem::discriminant(&report);
    if report == Report::Removed {
        held.retain(|(o, _)| *o != origin);
    } else {
        held.retain(|(o, r)| *o != origin || std::mem::discriminant(r) != kind);
    }
    held.push((origin, report));
}

/// Writes reports on the definitions' status.
struct Writer {
    api: Api<OperatorDefinition>,
    /// The last status written (or read) of each definition.
    written: HashMap<String, Value>,
}

impl Writer {
    async fn write(&mut self, origin: Origin, report: Report) {
        let Origin::Cluster { name } = origin else { return };
        if report == Report::Removed {
            self.written.remove(&name);
            return;
        }
        let live = match self.written.get(&name) {
            Some(v) => v.clone(),
            None => match self.api.get_status(&name).await {
                Ok(od) => serde_json::to_value(od.status.unwrap_or_default()).unwrap_or_else(|_| json!({})),
                Err(e) => {
                    tracing::debug!(definition = %name, error = %e, "cannot read the definition's status");
                    return;
                }
            },
        };
        let mut next = live.clone();
        report.apply(&mut next);
        let next = with_times(&next, Some(&live));
        if next == live {
            self.written.insert(name, live);
            return;
        }
        let body = json!({"apiVersion": "stencil.dev/v1alpha1", "kind": "OperatorDefinition",
            "metadata": {"name": name}, "status": next});
        match self
            .api
            .patch_status(
                &name,
                &PatchParams::apply(labels::FIELD_MANAGER).force(),
                &Patch::Apply(&body),
            )
            .await
        {
            Ok(_) => {
                self.written.insert(name, next);
            }
            Err(e) => {
                tracing::warn!(definition = %name, error = %e, "could not write the definition's status");
                self.written.remove(&name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_that_does_not_lead_holds_the_last_report_of_each_kind_per_definition() {
        let (a, b) = (
            Origin::Cluster { name: "a".into() },
            Origin::Cluster { name: "b".into() },
        );
        let waiting = |m: &str| Report::Waiting {
            reason: "Waiting",
            message: m.into(),
        };
        let mut held = Vec::new();
        hold(&mut held, a.clone(), Report::Compiled);
        hold(&mut held, a.clone(), waiting("first"));
        hold(&mut held, b.clone(), waiting("other"));
        hold(&mut held, a.clone(), waiting("second"));
        assert_eq!(
            held,
            [
                (a.clone(), Report::Compiled),
                (b.clone(), waiting("other")),
                (a.clone(), waiting("second")),
            ]
        );
        hold(&mut held, a.clone(), Report::Removed);
        assert_eq!(held, [(b, waiting("other")), (a, Report::Removed)]);
    }
}
