//! CustomResourceDefinitions on the cluster: what the core builds and judges purely
//! ([`stencil_core::crd`], re-exported here), and installing a definition's parent CRD
//! unless the update could lose data ([`install`]).

mod install;

pub use install::{InstallError, Installer, install};
pub use stencil_core::crd::*;
