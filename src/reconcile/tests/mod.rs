//! What the controller decides to send, against a mock API service ([`mock`]): every
//! request one reconcile makes is recorded and answered, so a test says exactly which
//! writes a state of the world causes, and that a converged one causes none. [`world`]
//! holds a definition's controller over that service; the other modules are the cases, by
//! what they cover.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::*;
use crate::gvk::Gvk;
use crate::labels;
use ledger::Tracked;
use mock::Seen;
use world::*;

mod echoes;
mod failures;
mod fresh;
mod mock;
mod ownership;
mod passes;
mod sharded;
mod teardown;
mod world;
