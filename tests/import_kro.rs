//! `stencil import kro` over kro's own examples and end-to-end suites, from kro's Go module
//! at the version the bench builds (`go mod download`, never committed): every
//! ResourceGraphDefinition translates into a definition that compiles, or is refused
//! naming the feature at its line. The counts are printed for the record.

mod common;

use std::path::{Path, PathBuf};

/// Every YAML file under `dir` that holds a ResourceGraphDefinition, but the end-to-end
/// suites' assertions (`*assert*.yaml`), which are partial objects to compare with.
fn rgd_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rgd_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml")
            && !path.file_name().is_some_and(|n| n.to_string_lossy().contains("assert"))
            && std::fs::read_to_string(&path).is_ok_and(|t| t.contains("kind: ResourceGraphDefinition"))
        {
            found.push(path);
        }
    }
}

#[test]
fn kros_examples_and_end_to_end_suites_translate_or_are_refused_by_feature() {
    let module = common::kro::module();
    let mut files = Vec::new();
    rgd_files(&module.join("examples"), &mut files);
    rgd_files(&module.join("test/e2e"), &mut files);
    files.sort();
    assert!(files.len() > 50, "kro's suites hold RGDs: {}", files.len());
    let (mut translated, mut refused, mut other) = (0, 0, 0);
    let mut features: std::collections::BTreeMap<String, usize> = Default::default();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let name = file.strip_prefix(&module).unwrap().display().to_string();
        match stencil::import_kro::import(&name, &text) {
            Ok(translations) => {
                for t in &translations {
                    let (_, diagnostics) = stencil::compile::compile_file(&t.name, &t.text);
                    assert!(diagnostics.0.is_empty(), "{name}: {diagnostics:?}");
                }
                translated += translations.len();
            }
            Err(errors) => {
                refused += 1;
                for e in &errors {
                    match e {
                        stencil::import_kro::ImportError::Refused { line, feature, .. } => {
                            assert!(*line > 0 && !feature.is_empty(), "{e}");
                            let key = feature
                                .rsplit(']')
                                .next()
                                .unwrap_or(feature)
                                .trim_start_matches('.')
                                .to_string();
                            *features.entry(key).or_default() += 1;
                        }
                        stencil::import_kro::ImportError::Unreadable { message, .. }
                            if message.starts_with("no ResourceGraphDefinition") =>
                        {
                            other += 1;
                            refused -= 1;
                        }
                        stencil::import_kro::ImportError::Unreadable { line, .. } => {
                            assert!(*line > 0, "{e}");
                            *features.entry("YAML".to_string()).or_default() += 1;
                        }
                    }
                    println!("refused: {e}");
                }
            }
        }
    }
    println!(
        "kro's suites: {} files, {translated} RGDs translated, {refused} files refused, {other} without a kro.run/v1alpha1 RGD",
        files.len()
    );
    println!("refusals by feature: {features:?}");
}
