//! `stencil import kro`: every ResourceGraphDefinition of the files translated, printed
//! or written one file per definition; any refusal prints every refusal and writes
//! nothing.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use stencil::import_kro::{self, Translation};

use super::FAILED;

/// Translates `files`; writes `<name>.yaml` per definition into `output`, or prints them.
pub fn kro(files: &[PathBuf], output: Option<&Path>) -> Result<ExitCode> {
    let mut translations: Vec<Translation> = Vec::new();
    let mut errors = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        match import_kro::import(&file.display().to_string(), &text) {
            Ok(mut t) => translations.append(&mut t),
            Err(mut e) => errors.append(&mut e),
        }
    }
    if !errors.is_empty() {
        for e in &errors {
            eprintln!("{e}");
        }
        eprintln!("{} refusals in {} files; nothing written", errors.len(), files.len());
        return Ok(ExitCode::from(FAILED));
    }
    match output {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            for t in &translations {
                let path = dir.join(format!("{}.yaml", t.name));
                std::fs::write(&path, &t.text).with_context(|| format!("writing {}", path.display()))?;
                eprintln!("wrote {}", path.display());
            }
        }
        None => {
            let texts: Vec<&str> = translations.iter().map(|t| t.text.as_str()).collect();
            print!("{}", texts.join("---\n"));
        }
    }
    Ok(ExitCode::SUCCESS)
}
