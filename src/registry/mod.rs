//! Runs one controller per definition. Source events go through a pure state machine
//! ([`state::step`]) whose effects the [`supervisor::Supervisor`] carries out off the
//! loop, so no definition's task can stall another definition's change; every status
//! report goes through the one status task ([`definition_status`]).

pub mod definition_status;
pub mod dependencies;
mod release;
mod report;
mod rollout_driver;
mod state;
mod supervisor;

pub use supervisor::RELEASE_GRACE;

use crate::metrics::StateLabel;
use crate::source::SourceEvent;
use dependencies::Dependencies;
use state::State;
use supervisor::Supervisor;

/// The set of running definitions.
pub struct Registry {
    state: State,
    supervisor: Supervisor,
    deps: Dependencies,
}

impl Registry {
    /// An empty registry.
    pub fn new(deps: Dependencies) -> Self {
        Registry {
            state: State::default(),
            supervisor: Supervisor::new(deps.clone()),
            deps,
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
            self.deps
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
