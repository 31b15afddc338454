//! The book's command-line page (`docs/src/reference/cli.md`), written from the same clap
//! definitions the binary parses, so a flag cannot be documented wrong or left out: a test
//! fails when the page is stale, and `make chart` writes it again.

use clap::{Arg, Command, CommandFactory};

use super::Cli;

/// What the page says before the commands: what every command shares.
const PREAMBLE: &str = "\
# Command line and flags

Every command finds the cluster as kubectl does (`KUBECONFIG`, `~/.kube/config`, or the
in-cluster service account); the offline ones (`validate`, `render`, `test`, `crd`,
`schema`, `new`, `convert`, `argocd`) need none. Every command exits 0 on success and 1
on a finding (an invalid definition, a failed golden case) or an error, with the error
on standard error; `diff`, `convert` and `rollout` say their own codes below.

`stencil run` also reads `RUST_LOG` (the log filter; default `info,kube=warn`;
`stencil=debug` logs every render with the number of observed, desired and waiting
children), and `POD_NAME` and `POD_NAMESPACE` (its identity in Leases and Events, and
where it keeps revisions and its certificate; the chart sets them). What it does with its
definitions is in [How `stencil run` serves definitions](../concepts/runtime.md); the
chart's values map to its flags ([Helm values](helm-values.md)).

This page is written from the command's own definitions by `make chart`; a test fails
when it is stale.
";

/// The whole page.
pub fn page() -> String {
    let mut root = Cli::command();
    root.build();
    let mut out = String::from(PREAMBLE);
    for command in documented(&root) {
        section(command, "stencil", 2, &mut out);
    }
    out
}

/// One command's section, then its subcommands' one level down.
fn section(command: &Command, parent: &str, level: usize, out: &mut String) {
    let name = format!("{parent} {}", command.get_name());
    let about = command.get_long_about().or(command.get_about());
    out.push_str(&format!("\n{} `{name}`\n\n", "#".repeat(level)));
    if let Some(about) = about {
        out.push_str(&format!("{}\n\n", sentence(&about.to_string())));
    }
    let usage = command.clone().render_usage().to_string();
    out.push_str(&format!("```text\n{}\n```\n", usage.trim()));
    let args: Vec<&Arg> = command
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !matches!(a.get_id().as_str(), "help" | "version"))
        .collect();
    if !args.is_empty() {
        out.push_str("\n| argument | default | meaning |\n|---|---|---|\n");
        for arg in args {
            out.push_str(&row(arg));
        }
    }
    for sub in documented(command) {
        section(sub, &name, level + 1, out);
    }
}

/// The subcommands worth a section: not hidden, and not clap's own `help`.
fn documented(command: &Command) -> impl Iterator<Item = &Command> {
    command
        .get_subcommands()
        .filter(|c| !c.is_hide_set() && c.get_name() != "help")
}

/// A table row: the argument as it is typed, its default and its help.
fn row(arg: &Arg) -> String {
    let value = arg
        .get_value_names()
        .map(|names| names.iter().map(|n| format!("<{n}>")).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| format!("<{}>", arg.get_id().as_str().to_uppercase()));
    let takes_value = arg.get_action().takes_values();
    let flag = match (arg.get_short(), arg.get_long()) {
        (Some(short), Some(long)) => format!("-{short}, --{long}"),
        (None, Some(long)) => format!("--{long}"),
        (Some(short), None) => format!("-{short}"),
        (None, None) => String::new(),
    };
    let spelled = match (flag.is_empty(), takes_value) {
        (true, _) => value,
        (false, true) => format!("{flag} {value}"),
        (false, false) => flag,
    };
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .filter(|_| takes_value)
        .map(|v| format!("`{}`", v.to_string_lossy()))
        .collect();
    let mut meaning = arg
        .get_long_help()
        .or(arg.get_help())
        .map(|h| sentence(&h.to_string()))
        .unwrap_or_default();
    let choices: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| format!("`{}`", v.get_name()))
        .collect();
    if !choices.is_empty() && takes_value {
        meaning.push_str(&format!(" One of {}.", choices.join(", ")));
    }
    if arg.is_required_set() {
        meaning.push_str(" Required.");
    }
    format!("| `{spelled}` | {} | {} |\n", defaults.join(", "), meaning.trim())
}

/// Help text as a sentence of a table cell: ended with a full stop (clap drops it from a
/// one-line doc comment).
fn sentence(text: &str) -> String {
    let text = one_line(text);
    match text.ends_with(['.', ':']) {
        true => text,
        false => format!("{text}."),
    }
}

/// Help text as one table cell: paragraphs joined, pipes escaped.
fn one_line(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_and_flag_is_on_the_page() {
        let page = page();
        for needle in [
            "## `stencil run`",
            "### `stencil rollout status`",
            "`--definitions <",
            "`--concurrency <",
        ] {
            assert!(page.contains(needle), "{needle} missing from the page");
        }
        assert!(!page.contains("--help"), "help flags are left out");
        assert!(!page.contains("`stencil help"), "help subcommands are left out");
    }

    #[test]
    fn the_books_command_line_page_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/src/reference/cli.md");
        let shipped = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            shipped == page(),
            "docs/src/reference/cli.md is stale: run `make chart`"
        );
    }
}
