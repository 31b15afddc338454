//! Runs one controller per definition. Source events go through a pure state machine
//! ([`state::step`]) whose effects the [`supervisor::Supervisor`] carries out off the
//! loop, so no definition's task can stall another definition's change; every status
//! report goes through the one status task ([`status`]).

mod release;
pub mod report;
mod rollout;
pub mod shell;
pub mod state;
pub mod status;
pub mod supervisor;

use crate::metrics::StateLabel;
use crate::source::SourceEvent;
use shell::Shell;
use state::State;
use supervisor::Supervisor;

/// The set of running definitions.
pub struct Registry {
    state: State,
    supervisor: Supervisor,
    shell: Shell,
}

impl Registry {
    /// An empty registry.
    pub fn new(shell: Shell) -> Self {
        Registry {
            state: State::default(),
            supervisor: Supervisor::new(shell.clone()),
            shell,
        }
    }

    /// Takes one source event; returns without waiting on any controller.
    pub fn handle(&mut self, event: SourceEvent) {
        for effect in state::step(&mut self.state, event) {
            self.supervisor.execute(effect);
        }
        let counts = self.state.counts();
        for (state, n) in [
            ("running", counts.running),
            ("conflict", counts.conflict),
            ("invalid", counts.invalid),
        ] {
            self.shell
                .metrics
                .definitions
                .get_or_create(&StateLabel { state: state.into() })
                .set(n);
        }
    }

    /// Stops every controller (waiting a bounded time), leaving parents and their
    /// finalizers in place for the next Stencil process.
    pub async fn shutdown(self) {
        self.supervisor.shutdown().await;
    }
}
