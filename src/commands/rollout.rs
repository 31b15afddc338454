//! `stencil rollout status|promote|pause|resume|undo DEFINITION`: a definition's rollout
//! on a live cluster, as `kubectl rollout` shows and steers a Deployment's. The state is
//! the one the running Stencil keeps on the definition's newest revision; a command saves
//! its change there (only over the state it read), and Stencil takes it up within
//! seconds.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use kube::api::ListParams;
use kube::{Client, ResourceExt as _};

use super::FAILED;
use super::cluster::block_on;
use crate::cli::{RolloutAction, RolloutTarget};
use stencil::definition::{OperatorDefinition, RolloutPhase, RolloutStatus};
use stencil::revisions::{Kept, Revision, Revisions};
use stencil::rollout::{Command, UNDONE, on_updated};

/// Runs one `stencil rollout` action.
pub fn run(action: &RolloutAction) -> Result<ExitCode> {
    block_on(async {
        match action {
            RolloutAction::Status { target, timeout } => status(target, *timeout).await,
            RolloutAction::Promote(target) => steer(target, Steer::Promote).await,
            RolloutAction::Pause(target) => steer(target, Steer::Pause).await,
            RolloutAction::Resume(target) => steer(target, Steer::Resume).await,
            RolloutAction::Undo(target) => steer(target, Steer::Undo).await,
        }
    })?
}

/// The definition's revisions in Stencil's namespace, and the newest one.
struct Found {
    client: Client,
    revisions: Revisions,
    all: Vec<Revision>,
    newest: Revision,
}

async fn find(target: &RolloutTarget) -> Result<Found> {
    let client = Client::try_default().await.context("connecting to the cluster")?;
    let namespace = target
        .stencil_namespace
        .clone()
        .or_else(|| std::env::var("POD_NAMESPACE").ok())
        .unwrap_or_else(|| client.default_namespace().to_string());
    let revisions = Revisions::new(&client, &namespace, &target.definition);
    let all = revisions.list().await?;
    let Some(newest) = all.last().cloned() else {
        bail!(
            "no revision of definition \"{}\" in namespace {namespace}: is Stencil serving it, and is that its namespace (--stencil-namespace)?",
            target.definition
        );
    };
    Ok(Found {
        client,
        revisions,
        all,
        newest,
    })
}

/// `status`: waits until the rollout completes (exit 0) or has failed (exit 1), printing
/// each step as `kubectl rollout status` does; a zero `timeout` waits for ever.
async fn status(target: &RolloutTarget, timeout: Duration) -> Result<ExitCode> {
    let started = Instant::now();
    let mut said = String::new();
    loop {
        let found = find(target).await?;
        let Some(state) = found.newest.rollout.clone() else {
            bail!("revision {} has no rollout state yet", found.newest.name);
        };
        let name = &target.definition;
        let line = match state.phase {
            RolloutPhase::Complete => {
                println!(
                    "definition \"{name}\" successfully rolled out (revision {})",
                    state.current_revision
                );
                return Ok(ExitCode::SUCCESS);
            }
            RolloutPhase::RolledBack if state.message.as_deref().is_some_and(|m| m.starts_with(UNDONE)) => {
                println!(
                    "definition \"{name}\" rolled back: every parent renders revision {}",
                    state.current_revision
                );
                return Ok(ExitCode::SUCCESS);
            }
            RolloutPhase::RolledBack => {
                eprintln!(
                    "error: the rollout of definition \"{name}\" to revision {} failed: {}; every parent renders revision {}",
                    state.updated_revision,
                    state.message.as_deref().unwrap_or("rolled back"),
                    state.current_revision
                );
                return Ok(ExitCode::from(FAILED));
            }
            RolloutPhase::Progressing => {
                let (moved, all) = parents(&found, name, &state).await;
                format!(
                    "Waiting for definition \"{name}\" rollout to finish: step {}, {moved} of {all} parents on revision {}...",
                    state.step + 1,
                    state.updated_revision
                )
            }
            RolloutPhase::Paused => format!(
                "definition \"{name}\" rollout is paused at {} % on revision {}: {}",
                state.percent,
                state.updated_revision,
                state
                    .message
                    .as_deref()
                    .unwrap_or("resume it with `stencil rollout resume`")
            ),
        };
        if line != said {
            println!("{line}");
            said = line;
        }
        if !timeout.is_zero() && started.elapsed() >= timeout {
            eprintln!("error: timed out waiting for the condition");
            return Ok(ExitCode::from(FAILED));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// How many parents are on the updated revision, of all of them; (0, 0) when the parent
/// kind cannot be listed.
async fn parents(found: &Found, definition: &str, state: &RolloutStatus) -> (usize, usize) {
    let resource = OperatorDefinition::new(definition, found.newest.spec.clone());
    let Ok(def) = stencil::compile::compile_resource(&resource) else {
        return (0, 0);
    };
    let Ok(kinds) = stencil::live::Kinds::resolve(&found.client, &def).await else {
        return (0, 0);
    };
    let Ok(list) = kinds
        .parents(&found.client, None)
        .list_metadata(&ListParams::default())
        .await
    else {
        return (0, 0);
    };
    let moved = list
        .items
        .iter()
        .filter(|p| on_updated(state, &p.uid().unwrap_or_default()))
        .count();
    (moved, list.items.len())
}

/// What `promote`, `pause`, `resume` and `undo` ask.
#[derive(Clone, Copy)]
enum Steer {
    Promote,
    Pause,
    Resume,
    Undo,
}

async fn steer(target: &RolloutTarget, steer: Steer) -> Result<ExitCode> {
    let found = find(target).await?;
    let Some((state, version)) = found.revisions.saved(&found.newest.name).await? else {
        bail!("revision {} has no rollout state yet", found.newest.name);
    };
    let (command, done) = match steer {
        Steer::Promote => (Command::Promote, "promoted"),
        Steer::Pause => (Command::Pause, "paused"),
        Steer::Resume => (Command::Resume, "resumed"),
        Steer::Undo => {
            let kept = Kept {
                rollout: state.clone(),
                revisions: found.all.clone(),
            };
            let previous = kept.before_current();
            (Command::Undo { previous }, "rolled back")
        }
    };
    let now = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let next = match stencil::rollout::command(&found.newest.spec.rollout, &state, &command, &now) {
        Ok(next) => next,
        Err(e) => {
            eprintln!("error: definition \"{}\": {e}", target.definition);
            return Ok(ExitCode::from(FAILED));
        }
    };
    found
        .revisions
        .save(&found.newest.name, &next, Some(&version))
        .await
        .context("saving the rollout (run the command again if Stencil moved it meanwhile)")?;
    println!("definition \"{}\" {done}", target.definition);
    Ok(ExitCode::SUCCESS)
}
