//! Definitions from local files and directories: every `.yaml`/`.yml` file below a path,
//! compiled, with every error kept.

use std::path::{Path, PathBuf};

use crate::compile::{self, CompiledDefinition, Diagnostic, Diagnostics};

/// A path that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct ReadError {
    /// The path.
    pub path: String,
    /// Why.
    pub source: std::io::Error,
}

/// What loading a set of paths produced.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Definitions that compiled.
    pub definitions: Vec<CompiledDefinition>,
    /// Compile errors, by file.
    pub diagnostics: Vec<Diagnostic>,
    /// How many files were read.
    pub files: usize,
}

/// Every YAML file at or below `path`, sorted so loading is deterministic.
pub fn yaml_files(path: &Path) -> Result<Vec<PathBuf>, ReadError> {
    let err = |source| ReadError {
        path: path.display().to_string(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(err)?;
    if meta.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut found = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(err)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for entry in entries {
        let name = entry.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        // Kubernetes ConfigMap volumes keep their data in hidden `..data` directories.
        if name.starts_with('.') {
            continue;
        }
        if entry.is_dir() {
            found.extend(yaml_files(&entry)?);
        } else if name.ends_with(".yaml") || name.ends_with(".yml") {
            found.push(entry);
        }
    }
    Ok(found)
}

/// Reads and compiles every definition at or below `paths`.
pub fn load(paths: &[PathBuf]) -> Result<Loaded, ReadError> {
    let mut loaded = Loaded::default();
    for path in paths {
        for file in yaml_files(path)? {
            let text = std::fs::read_to_string(&file).map_err(|source| ReadError {
                path: file.display().to_string(),
                source,
            })?;
            let (defs, Diagnostics(mut errors)) = compile::compile_file(&file.display().to_string(), &text);
            loaded.files += 1;
            loaded.definitions.extend(defs);
            loaded.diagnostics.append(&mut errors);
        }
    }
    Ok(loaded)
}
