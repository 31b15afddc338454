//! Where definitions come from. Today: local files and directories.

pub mod files;
