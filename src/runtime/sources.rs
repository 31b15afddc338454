//! Where definitions come from while Stencil runs: the files and the OperatorDefinition
//! resources, teed so that the webhook's table and the sharder's kinds follow them at
//! once, and the registry takes the same events once this process may write.

use std::sync::Arc;

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::{Options, RuntimeError};
use crate::http::Health;
use crate::sharding::Kinds;
use crate::source::{SourceEvent, cluster, files};
use crate::tasks::Owned;
use crate::webhook::Conversions;

/// The running sources; they stop when this is dropped.
pub(super) struct Sources {
    /// The events for the registry.
    pub(super) events: UnboundedReceiver<SourceEvent>,
    /// Held, so that the events end only when this does, even with no source running.
    _sender: UnboundedSender<SourceEvent>,
    _tee: Owned<()>,
    _files: Option<files::FileWatch>,
    _cluster: Option<Owned<()>>,
}

impl Sources {
    /// Starts the sources `options` name.
    pub(super) fn start(
        options: &Options,
        client: &kube::Client,
        health: &Arc<Health>,
        conversions: Conversions,
        kinds: Arc<Kinds>,
    ) -> Result<Sources, RuntimeError> {
        let (tx, mut sources) = unbounded_channel();
        let (forward, events) = unbounded_channel();
        let tee = Owned::spawn(async move {
            while let Some(event) = sources.recv().await {
                conversions.observe(&event);
                kinds.observe(&event);
                if forward.send(event).is_err() {
                    break;
                }
            }
        });
        let files = if options.definitions.is_empty() {
            None
        } else {
            let watch = files::watch(options.definitions.clone(), tx.clone())?;
            health.files_synced();
            Some(watch)
        };
        let cluster = options.cluster_definitions.then(|| {
            let synced = health.clone();
            let selector = options.definition_selector.clone();
            Owned::spawn(cluster::watch(client.clone(), selector, tx.clone(), move || {
                synced.cluster_synced()
            }))
        });
        Ok(Sources {
            events,
            _sender: tx,
            _tee: tee,
            _files: files,
            _cluster: cluster,
        })
    }

    /// What arrived while a standby waited: only the last word on each definition counts,
    /// so a definition removed and added again meanwhile is not stopped.
    pub(super) fn queued(&mut self) -> Vec<SourceEvent> {
        let mut queued = Vec::new();
        while let Ok(event) = self.events.try_recv() {
            queued.push(event);
        }
        crate::source::latest(queued)
    }
}
