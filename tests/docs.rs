//! The documentation's promises, checked without a cluster: every YAML snippet of the
//! README and the book that is a definition compiles (`stencil validate`), every parent
//! renders against its definition (`stencil render`), every relative link and anchor
//! resolves, and every label and annotation key Stencil writes is on the book's page of
//! them. A snippet that is deliberately partial says so with `<!-- snippet: partial -->`
//! on the line before its fence; an unmarked fragment of a definition fails and says how
//! to mark it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};
use serde_json::Value;

/// The marker of a snippet that is deliberately not a whole definition or parent.
const PARTIAL: &str = "<!-- snippet: partial -->";

/// The fields of a definition's spec: a snippet with one of them at its top level is a
/// fragment of a definition.
const SPEC_FIELDS: &[&str] = &[
    "parent", "crd", "children", "lookups", "status", "finalize", "decorate", "helpers",
];

/// A YAML block of one Markdown file.
struct Snippet {
    file: PathBuf,
    line: usize,
    text: String,
    partial: bool,
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The files under `dir` whose names end in `ext`, recursively.
fn files_under(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(files_under(&path, ext));
        } else if path.extension().is_some_and(|e| e == ext) {
            found.push(path);
        }
    }
    found
}

/// The Markdown the checks read: the README, the changelog, the benchmarks' page and the
/// book.
fn markdown_files() -> Vec<PathBuf> {
    let mut files = vec![
        root().join("README.md"),
        root().join("CHANGELOG.md"),
        root().join("benches/README.md"),
    ];
    files.extend(files_under(&root().join("docs"), "md"));
    files.sort();
    files
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset].matches('\n').count() + 1
}

/// A snippet's text with mdBook's `{{#include PATH}}` lines replaced by the file they name.
fn expand_includes(file: &Path, text: &str) -> String {
    text.lines()
        .map(|line| {
            match line
                .trim()
                .strip_prefix("{{#include ")
                .and_then(|l| l.strip_suffix("}}"))
            {
                Some(path) => std::fs::read_to_string(file.parent().unwrap().join(path.trim()))
                    .unwrap_or_else(|e| panic!("{}: {{{{#include {path}}}}}: {e}", file.display())),
                None => format!("{line}\n"),
            }
        })
        .collect()
}

/// The YAML blocks of one Markdown file.
fn snippets(file: &Path) -> Vec<Snippet> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut found = Vec::new();
    let mut current: Option<Snippet> = None;
    for (event, range) in Parser::new(&text).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info)))
                if info.split([',', ' ']).next() == Some("yaml") =>
            {
                let before = text[..range.start].trim_end().lines().last().unwrap_or("");
                current = Some(Snippet {
                    file: file.to_path_buf(),
                    line: line_of(&text, range.start),
                    text: String::new(),
                    partial: before.trim() == PARTIAL,
                });
            }
            Event::Text(t) => current.iter_mut().for_each(|s| s.text.push_str(&t)),
            Event::End(TagEnd::CodeBlock) => found.extend(current.take().map(|s| Snippet {
                text: expand_includes(file, &s.text),
                ..s
            })),
            _ => {}
        }
    }
    found
}

fn documents(text: &str) -> Result<Vec<Value>, String> {
    stencil::yaml::documents::<Value>(text).map_err(|e| e.to_string())
}

/// Runs the stencil binary; its output is the error when it fails.
fn stencil(args: &[&std::ffi::OsStr]) -> Result<(), String> {
    let out = Command::new(env!("CARGO_BIN_EXE_stencil")).args(args).output().unwrap();
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

fn kind_of(object: &Value) -> String {
    let field = |f: &str| object[f].as_str().unwrap_or("").to_string();
    format!("{}/{}", field("apiVersion"), field("kind"))
}

/// A definition's parent kind, `apiVersion/Kind` of each version its CRD serves.
fn parent_kinds(definition: &Value) -> Vec<String> {
    let Some(parent) = definition.pointer("/spec/parent") else {
        return Vec::new();
    };
    let mut kinds = vec![kind_of(parent)];
    let group = parent["apiVersion"]
        .as_str()
        .unwrap_or("")
        .split('/')
        .next()
        .unwrap_or("");
    let versions = definition.pointer("/spec/crd/versions").and_then(Value::as_array);
    for version in versions.into_iter().flatten() {
        let name = version["name"].as_str().unwrap_or("");
        kinds.push(format!("{group}/{name}/{}", parent["kind"].as_str().unwrap_or("")));
    }
    kinds
}

/// The definition each parent kind renders with: the bundled operators', then each whole
/// definition snippet's, each written to a file of its own in `dir`.
fn known_definitions(all: &[Snippet], dir: &Path) -> BTreeMap<String, PathBuf> {
    let operators = files_under(&root().join("operators"), "yaml");
    let texts = operators
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .chain(all.iter().filter(|s| !s.partial).map(|s| s.text.clone()));
    let mut known = BTreeMap::new();
    for (i, text) in texts.enumerate() {
        for (j, doc) in documents(&text).unwrap_or_default().into_iter().enumerate() {
            if doc["kind"] == "OperatorDefinition" {
                let path = dir.join(format!("definition-{i}-{j}.yaml"));
                std::fs::write(&path, serde_json::to_string(&doc).unwrap()).unwrap();
                known.extend(parent_kinds(&doc).into_iter().map(|k| (k, path.clone())));
            }
        }
    }
    known
}

/// What is wrong with one snippet, if anything.
fn check(s: &Snippet, index: usize, known: &BTreeMap<String, PathBuf>, dir: &Path) -> Result<(), String> {
    let docs = documents(&s.text)?;
    let file = dir.join(format!("snippet-{index}.yaml"));
    std::fs::write(&file, &s.text).unwrap();
    if docs.iter().any(|d| d["kind"] == "OperatorDefinition") {
        stencil(&["validate".as_ref(), file.as_os_str()])?;
    }
    for (j, doc) in docs.iter().enumerate() {
        let parent = dir.join(format!("snippet-{index}-{j}.yaml"));
        if let Some(definition) = known.get(&kind_of(doc)).filter(|_| doc["kind"] != "OperatorDefinition") {
            std::fs::write(&parent, serde_json::to_string(doc).unwrap()).unwrap();
            let args = ["render", "--definition", "--parent"].map(std::ffi::OsStr::new);
            stencil(&[args[0], args[1], definition.as_os_str(), args[2], parent.as_os_str()])?;
        } else if let Some(field) = doc
            .as_object()
            .and_then(|o| SPEC_FIELDS.iter().find(|f| o.contains_key(**f)))
        {
            return Err(format!(
                "a fragment of a definition (`{field}:`) that is not a whole one: complete it, \
                 or mark it with `{PARTIAL}` on the line before the fence"
            ));
        }
    }
    Ok(())
}

#[test]
fn every_definition_and_parent_in_the_docs_is_valid() {
    let all: Vec<Snippet> = markdown_files().iter().flat_map(|f| snippets(f)).collect();
    let dir = tempfile::tempdir().unwrap();
    let known = known_definitions(&all, dir.path());
    let failures: Vec<String> = all
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.partial)
        .filter_map(|(i, s)| {
            let error = check(s, i, &known, dir.path()).err()?;
            let error = error.replace(&format!("{}/", dir.path().display()), "");
            Some(format!("{}:{}: {error}", s.file.display(), s.line))
        })
        .collect();
    assert!(all.len() > 20, "only {} YAML snippets found", all.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A heading's anchor as GitHub and mdBook make it.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file's headings, and its relative links with their lines.
fn headings_and_links(file: &Path) -> (Vec<String>, Vec<(usize, String)>) {
    let text = std::fs::read_to_string(file).unwrap();
    let (mut anchors, mut links, mut heading) = (Vec::new(), Vec::new(), None::<String>);
    for (event, range) in Parser::new(&text).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(t) | Event::Code(t) => heading.iter_mut().for_each(|h| h.push_str(&t)),
            Event::End(TagEnd::Heading(_)) => anchors.extend(heading.take().map(|h| anchor(&h))),
            Event::Start(Tag::Link { dest_url, .. }) if !dest_url.contains(':') => {
                links.push((line_of(&text, range.start), dest_url.to_string()));
            }
            _ => {}
        }
    }
    (anchors, links)
}

/// What is wrong with a relative link of `file`, if anything.
fn broken(file: &Path, link: &str) -> Option<String> {
    let (path, fragment) = link.split_once('#').unwrap_or((link, ""));
    let target = match path {
        "" => file.to_path_buf(),
        path => file.parent().unwrap().join(path),
    };
    if !target.exists() {
        return Some("no such file".into());
    }
    let is_markdown = target.extension().is_some_and(|e| e == "md");
    let anchors = if is_markdown {
        headings_and_links(&target).0
    } else {
        Vec::new()
    };
    (!fragment.is_empty() && is_markdown && !anchors.iter().any(|a| a == fragment))
        .then(|| format!("no heading `#{fragment}` in {}", target.display()))
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut failures = Vec::new();
    for file in markdown_files() {
        for (line, link) in headings_and_links(&file).1 {
            if let Some(error) = broken(&file, &link) {
                failures.push(format!("{}:{line}: {link}: {error}", file.display()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every `"stencil.dev/KEY"` string of Stencil's sources, API versions aside.
fn keys_written() -> Vec<String> {
    let mut sources = files_under(&root().join("src"), "rs");
    sources.extend(files_under(&root().join("crates"), "rs"));
    let mut keys: Vec<String> = sources
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            let keys: Vec<String> = text
                .split("\"stencil.dev/")
                .skip(1)
                .filter_map(|rest| rest.split('"').next().map(str::to_string))
                .collect();
            keys
        })
        .filter(|k| !k.is_empty() && !k.starts_with("v1"))
        .map(|k| format!("stencil.dev/{k}"))
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

#[test]
fn every_label_and_annotation_stencil_writes_is_on_the_labels_page() {
    let page = std::fs::read_to_string(root().join("docs/src/reference/labels.md")).unwrap();
    let keys = keys_written();
    assert!(keys.len() > 15, "only {keys:?} found");
    let missing: Vec<&String> = keys.iter().filter(|k| !page.contains(&format!("`{k}`"))).collect();
    assert!(
        missing.is_empty(),
        "docs/src/reference/labels.md does not describe {missing:?}"
    );
}
