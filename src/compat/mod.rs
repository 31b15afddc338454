//! Serving another operator framework's controller objects beside definitions, with
//! `--compat`: metacontroller's CompositeControllers (`metacontroller`).

pub mod metacontroller;
