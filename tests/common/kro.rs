//! kro at the version the bench builds (`KRO_VERSION` of `tests/testenv/versions.env`):
//! its Go module, for its examples, and its build, for its controller and CRDs.

use std::path::PathBuf;
use std::process::Command;

/// `KRO_VERSION`, e.g. `v0.9.4`.
pub fn version() -> String {
    let versions = std::fs::read_to_string("tests/testenv/versions.env").unwrap();
    versions
        .lines()
        .find_map(|l| l.strip_prefix("KRO_VERSION="))
        .expect("versions.env names KRO_VERSION")
        .trim()
        .to_string()
}

/// kro's Go module directory (`go mod download`; the module cache, never the repository).
pub fn module() -> PathBuf {
    let out = Command::new("go")
        .args([
            "mod",
            "download",
            "-json",
            &format!("github.com/kubernetes-sigs/kro@{}", version()),
        ])
        .output()
        .expect("go runs");
    assert!(
        out.status.success(),
        "go mod download: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    PathBuf::from(json["Dir"].as_str().expect("the module's directory"))
}

/// kro's build (its `kro` binary and `crds/`), made by `tests/testenv/build.sh kro`.
pub fn build() -> PathBuf {
    let cache = std::env::var("STENCIL_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/stencil"));
    let build = cache.join(format!("bin/kro-{}", version()));
    assert!(
        build.join(".complete").exists(),
        "kro is built by `tests/testenv/build.sh kro` (make integration does)"
    );
    build
}
