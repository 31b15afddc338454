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

/// The files of a golden case (`stencil test`), which sit beside definitions.
const GOLDEN_SUFFIXES: [&str; 2] = [".case.yaml", ".expected.yaml"];

/// Every YAML file at or below `path`, sorted so loading is deterministic. In a directory,
/// golden cases (`*.case.yaml`, `*.expected.yaml`) are not definitions and are left out,
/// so the directory `stencil new` writes loads as it is.
///
/// # Errors
///
/// `path` cannot be read.
pub fn yaml_files(path: &Path) -> Result<Vec<PathBuf>, ReadError> {
    files_below(path, &|name| {
        (name.ends_with(".yaml") || name.ends_with(".yml")) && !GOLDEN_SUFFIXES.iter().any(|s| name.ends_with(s))
    })
}

/// `path` itself when it is a file; otherwise every file below it whose name `keep`
/// accepts, sorted, leaving out hidden entries.
///
/// # Errors
///
/// `path`, or a directory below it, cannot be read.
pub fn files_below(path: &Path, keep: &dyn Fn(&str) -> bool) -> Result<Vec<PathBuf>, ReadError> {
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
            found.extend(files_below(&entry, keep)?);
        } else if keep(name) {
            found.push(entry);
        }
    }
    Ok(found)
}

/// Compiles `file`, found at or below `path`. A file found in a directory may hold other
/// objects beside definitions (the example parent `stencil new` writes): they are left
/// out. A file named on its own must hold only definitions.
fn compile_found(path: &Path, file: &Path, text: &str) -> (Vec<CompiledDefinition>, Diagnostics) {
    let (defs, Diagnostics(mut errors)) = compile::compile_file(&file.display().to_string(), text);
    if path != file {
        errors.retain(|d| !matches!(d.error, compile::CompileError::NotADefinition { .. }));
    }
    (defs, Diagnostics(errors))
}

/// Reads and compiles every definition at or below `paths`.
///
/// # Errors
///
/// A path or a file cannot be read; a definition that does not compile is a diagnostic, not
/// an error.
pub fn load(paths: &[PathBuf]) -> Result<Loaded, ReadError> {
    let mut loaded = Loaded::default();
    for path in paths {
        for file in yaml_files(path)? {
            let text = std::fs::read_to_string(&file).map_err(|source| ReadError {
                path: file.display().to_string(),
                source,
            })?;
            let (defs, Diagnostics(mut errors)) = compile_found(path, &file, &text);
            loaded.files += 1;
            loaded.definitions.extend(defs);
            loaded.diagnostics.append(&mut errors);
        }
    }
    Ok(loaded)
}

/// What a rescan found: good definitions by origin, and the files with errors.
#[derive(Debug, Default)]
struct Scan {
    good: std::collections::BTreeMap<super::Origin, CompiledDefinition>,
    broken: std::collections::BTreeMap<String, Diagnostics>,
    /// Files that exist but gave no text: empty (an editor or `>` truncates a file before
    /// it writes the new text, and a rescan may fall in between) or unreadable. Their
    /// definitions keep running; deleting the file removes them.
    blank: std::collections::BTreeSet<String>,
}

fn scan(paths: &[PathBuf]) -> Scan {
    let mut result = Scan::default();
    for path in paths {
        let files = match yaml_files(path) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read definitions");
                continue;
            }
        };
        for file in files {
            let name = file.display().to_string();
            let text = match std::fs::read_to_string(&file) {
                Ok(t) if t.trim().is_empty() => {
                    result.blank.insert(name);
                    continue;
                }
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!(file = %name, error = %e, "cannot read definition file; its definitions keep running");
                    result.blank.insert(name);
                    continue;
                }
            };
            let (defs, diags) = compile_found(path, &file, &text);
            for def in defs {
                let origin = super::Origin::File {
                    path: name.clone(),
                    name: def.name.clone(),
                };
                result.good.insert(origin, def);
            }
            if !diags.0.is_empty() {
                result.broken.insert(name, diags);
            }
        }
    }
    result
}

/// The rescan state: what was last reported, so only changes are sent.
#[derive(Default)]
struct Known {
    defs: std::collections::BTreeMap<super::Origin, String>,
    /// The errors last reported for each broken file; a rescan caused by another file's
    /// change does not report them again.
    broken: std::collections::BTreeMap<String, String>,
}

impl Known {
    /// Sends the differences between the last scan and this one.
    fn update(&mut self, scan: Scan, tx: &tokio::sync::mpsc::UnboundedSender<super::SourceEvent>) {
        use super::SourceEvent;
        let reported = std::mem::take(&mut self.broken);
        for (file, diags) in &scan.broken {
            let text = diags.to_string();
            self.broken.insert(file.clone(), text.clone());
            if reported.get(file) == Some(&text) {
                continue;
            }
            let mut named = false;
            for d in &diags.0 {
                if let Some(name) = &d.definition {
                    named = true;
                    let origin = super::Origin::File {
                        path: file.clone(),
                        name: name.clone(),
                    };
                    let _ = tx.send(SourceEvent::Invalid(origin, Diagnostics(vec![d.clone()])));
                }
            }
            if !named {
                let _ = tx.send(SourceEvent::FileInvalid(file.clone(), diags.clone()));
            }
        }
        let gone: Vec<super::Origin> = self
            .defs
            .keys()
            .filter(|o| !scan.good.contains_key(*o))
            // A file that no longer parses, or reads empty, keeps its last good definitions
            // running.
            .filter(|o| match o {
                super::Origin::File { path, .. } => {
                    let kept = scan.broken.contains_key(path) || scan.blank.contains(path);
                    !kept || !std::path::Path::new(path).exists()
                }
                super::Origin::Cluster { .. } => true,
            })
            .cloned()
            .collect();
        for file in &scan.blank {
            let kept = self
                .defs
                .keys()
                .filter(|o| matches!(o, super::Origin::File { path, .. } if path == file))
                .count();
            if kept > 0 {
                tracing::warn!(file = %file, "the file reads empty; its {kept} definition(s) keep running until it has definitions again or is deleted");
            }
        }
        for origin in gone {
            self.defs.remove(&origin);
            let _ = tx.send(SourceEvent::Remove(origin));
        }
        for (origin, def) in scan.good {
            // The annotations Stencil reads count as much as the spec.
            let fingerprint = format!("{:?} {} {}", def.spec, def.allow_breaking_changes, def.paused);
            if self.defs.get(&origin) != Some(&fingerprint) {
                self.defs.insert(origin.clone(), fingerprint);
                let _ = tx.send(SourceEvent::Upsert(origin, Box::new(def)));
            }
        }
    }
}

/// How long file events settle before a rescan.
pub const DEBOUNCE: std::time::Duration = std::time::Duration::from_millis(200);

/// A running file watch; dropping it stops the watch.
pub type FileWatch =
    notify_debouncer_full::Debouncer<notify::RecommendedWatcher, notify_debouncer_full::RecommendedCache>;

/// Loads the definitions under `paths`, sends them, and keeps sending changes as files
/// are created, edited or deleted (including a ConfigMap volume's `..data` swap).
///
/// # Errors
///
/// The file watcher cannot watch one of `paths`.
pub fn watch(
    paths: Vec<PathBuf>,
    tx: tokio::sync::mpsc::UnboundedSender<super::SourceEvent>,
) -> Result<FileWatch, notify::Error> {
    use notify::RecursiveMode;
    let mut known = Known::default();
    known.update(scan(&paths), &tx);
    let rescan_paths = paths.clone();
    let mut debouncer = notify_debouncer_full::new_debouncer(
        DEBOUNCE,
        None,
        move |result: notify_debouncer_full::DebounceEventResult| {
            if let Err(errors) = result {
                for e in errors {
                    tracing::warn!(error = %e, "file watch error");
                }
            }
            known.update(scan(&rescan_paths), &tx);
        },
    )?;
    for path in &paths {
        let (target, mode) = if path.is_dir() {
            (path.clone(), RecursiveMode::Recursive)
        } else {
            (
                path.parent()
                    .map(Path::to_path_buf)
                    .unwrap_or_else(|| PathBuf::from(".")),
                RecursiveMode::NonRecursive,
            )
        };
        debouncer.watch(&target, mode)?;
    }
    Ok(debouncer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_leaves_out_golden_cases_and_other_objects_but_a_named_file_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let def = "apiVersion: stencil.dev/v1alpha1\nkind: OperatorDefinition\nmetadata:\n  name: caches.example.com\nspec:\n  parent:\n    apiVersion: example.com/v1\n    kind: Cache\n  children:\n    - name: cm\n      template: |\n        apiVersion: v1\n        kind: ConfigMap\n        metadata:\n          name: x\n";
        std::fs::write(dir.path().join("caches.yaml"), def).unwrap();
        let example = "apiVersion: example.com/v1\nkind: Cache\nmetadata:\n  name: example\nspec:\n  message: hi\n";
        std::fs::write(dir.path().join("example.yaml"), example).unwrap();
        std::fs::create_dir(dir.path().join("tests")).unwrap();
        std::fs::write(dir.path().join("tests/a.case.yaml"), "definition: ../caches.yaml\n").unwrap();
        std::fs::write(dir.path().join("tests/a.expected.yaml"), "children: []\n").unwrap();

        let loaded = load(&[dir.path().to_path_buf()]).unwrap();
        assert_eq!(loaded.definitions.len(), 1);
        assert!(loaded.diagnostics.is_empty(), "{:?}", loaded.diagnostics);
        assert_eq!(loaded.files, 2);

        let named = load(&[dir.path().join("example.yaml")]).unwrap();
        let error = named.diagnostics[0].to_string();
        assert!(
            error.contains("example.yaml:2:1") && error.contains("found example.com/v1 Cache"),
            "{error}"
        );
    }

    #[test]
    fn a_file_caught_empty_mid_write_keeps_its_definitions_until_it_is_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("caches.yaml");
        let def = "apiVersion: stencil.dev/v1alpha1\nkind: OperatorDefinition\nmetadata:\n  name: caches.example.com\nspec:\n  parent:\n    apiVersion: example.com/v1\n    kind: Cache\n  children:\n    - name: cm\n      template: |\n        apiVersion: v1\n        kind: ConfigMap\n        metadata:\n          name: x\n";
        std::fs::write(&file, def).unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut known = Known::default();
        let paths = vec![dir.path().to_path_buf()];
        known.update(scan(&paths), &tx);
        assert!(matches!(rx.try_recv(), Ok(crate::source::SourceEvent::Upsert(..))));

        // Truncated, the new text not written yet.
        std::fs::write(&file, "").unwrap();
        known.update(scan(&paths), &tx);
        assert!(rx.try_recv().is_err(), "an empty file removed its definitions");
        // The same text back: nothing changed.
        std::fs::write(&file, def).unwrap();
        known.update(scan(&paths), &tx);
        assert!(rx.try_recv().is_err(), "the same definition was sent again");

        std::fs::remove_file(&file).unwrap();
        known.update(scan(&paths), &tx);
        assert!(matches!(rx.try_recv(), Ok(crate::source::SourceEvent::Remove(..))));
    }

    #[test]
    fn a_broken_file_is_reported_once_until_its_errors_change() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("bad.yaml");
        std::fs::write(&file, "apiVersion: [\n").unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut known = Known::default();
        let paths = vec![dir.path().to_path_buf()];
        known.update(scan(&paths), &tx);
        known.update(scan(&paths), &tx);
        let mut events = Vec::new();
        while let Ok(e) = rx.try_recv() {
            events.push(e);
        }
        assert_eq!(events.len(), 1, "an unchanged broken file is reported again");
        std::fs::write(&file, "kind: [\n").unwrap();
        known.update(scan(&paths), &tx);
        assert!(rx.try_recv().is_ok(), "a changed error is reported");
    }
}
