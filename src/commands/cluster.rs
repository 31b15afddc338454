//! The subcommands that read the cluster in the kubeconfig and never write to it:
//! `stencil diff` and `stencil render --from-cluster`.

use std::io::IsTerminal as _;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use futures::StreamExt as _;
use serde_json::Value;

use super::FAILED;
use crate::cli::{DiffArgs, DiffFormat};
use stencil::crd::CrdVerdict;
use stencil::live;

/// Runs a future on a runtime of its own: the offline commands that read the cluster
/// are the only async ones.
pub(super) fn block_on<F: std::future::Future>(future: F) -> Result<F::Output> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    Ok(runtime.block_on(future))
}

/// Whether `target`'s kind (`Database`, `database` or `databases`) names the parent kind.
fn names_parent_kind(def: &stencil::compile::CompiledDefinition, kind: &str) -> bool {
    let own = &def.parent.kind;
    kind.eq_ignore_ascii_case(own)
        || def
            .spec
            .crd
            .as_ref()
            .is_some_and(|c| c.names.plural == kind || c.names.short_names.iter().any(|s| s == kind))
        || kind.eq_ignore_ascii_case(&super::scaffold::plural(own))
}

/// `stencil render --from-cluster`: the parent, its children (by the parent-UID label)
/// and its lookups, read from the cluster and rendered as the controller would.
pub(super) async fn from_cluster(
    def: &stencil::compile::CompiledDefinition,
    target: &str,
    namespace: Option<&str>,
) -> Result<stencil::render::RenderOutput> {
    let (kind, name) = target
        .split_once('/')
        .with_context(|| format!("--from-cluster `{target}` must be written KIND/NAME"))?;
    if !names_parent_kind(def, kind) {
        bail!(
            "--from-cluster names kind `{kind}`, but definition {} reconciles {}",
            def.name,
            def.parent.kind
        );
    }
    let client = kube::Client::try_default().await.context("connecting to the cluster")?;
    let kinds = live::Kinds::resolve(&client, def).await?;
    // As kubectl does: a namespaced parent without -n is in the kubeconfig's namespace.
    let namespace = namespace.unwrap_or(client.default_namespace()).to_string();
    let parent = kinds
        .parents(&client, Some(&namespace))
        .get_opt(name)
        .await
        .with_context(|| format!("reading {} {name}", def.parent.kind))?
        .with_context(|| format!("{} {name} does not exist", def.parent.kind))?;
    let parent = live::to_value(parent, &kinds.parent.resource);
    let uid = parent
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let mut children = kinds
        .children(&client, &format!("{}={uid}", stencil::labels::PARENT_UID))
        .await?;
    let children = children.remove(&uid).unwrap_or_default();
    let snapshot = live::Snapshot::read(&client, def, &kinds, parent, children).await??;
    Ok(snapshot.render(def, &kinds.scopes)?)
}

/// Parents compared at once by `stencil diff`.
const DIFF_CONCURRENCY: usize = 16;

/// `stencil diff`, with kubectl diff's exit codes: 0 no change, 1 changes, 2 an error.
pub fn diff(args: &DiffArgs) -> ExitCode {
    match block_on(diff_parents(args)).and_then(|r| r) {
        Ok((crd, diffs, first_step)) => {
            let summary = live::diff::Summary::of(&diffs);
            match args.output {
                DiffFormat::Json => {
                    let report =
                        serde_json::json!({"crd": crd, "firstStep": first_step, "parents": diffs, "summary": summary});
                    println!("{report:#}");
                }
                DiffFormat::Text => {
                    if let Some(c) = &crd {
                        println!("{}", c.line());
                    }
                    if let Some(step) = &first_step {
                        println!("{}", step.text());
                    }
                    print!("{}", live::diff::text(&diffs));
                }
            }
            let crd_changes = crd.as_ref().is_some_and(|c| c.verdict != CrdVerdict::Unchanged);
            if summary.errors > 0 {
                ExitCode::from(DIFF_ERROR)
            } else if summary.changes() || crd_changes {
                ExitCode::from(FAILED)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(DIFF_ERROR)
        }
    }
}

/// Exit code of `stencil diff` when it could not compare.
const DIFF_ERROR: u8 = 2;

/// What `stencil run` would do to the definition's CRD.
#[derive(serde::Serialize)]
struct CrdDiff {
    name: String,
    #[serde(serialize_with = "verdict_word")]
    verdict: CrdVerdict,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    breaking: Vec<String>,
    /// Versions objects are still stored at, which `stencil run` would migrate.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    migration: Vec<String>,
}

fn verdict_word<S: serde::Serializer>(v: &CrdVerdict, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(match v {
        CrdVerdict::Unchanged => "unchanged",
        CrdVerdict::Create => "create",
        CrdVerdict::Update => "update",
        CrdVerdict::Breaking(_) => "breaking",
    })
}

impl CrdDiff {
    fn line(&self) -> String {
        let verdict = self.verdict_line();
        if self.migration.is_empty() {
            return verdict;
        }
        format!(
            "{verdict}\n  objects stored at {} would be migrated to the storage version",
            self.migration.join(", ")
        )
    }

    fn verdict_line(&self) -> String {
        match &self.verdict {
            CrdVerdict::Unchanged => format!("CRD {}: unchanged", self.name),
            CrdVerdict::Create => format!("CRD {}: would be created", self.name),
            CrdVerdict::Update => format!("CRD {}: would be updated; nothing stored can be lost", self.name),
            CrdVerdict::Breaking(changes) => format!(
                "CRD {}: BREAKING, `stencil run` refuses it unless the definition has {}: \"true\":\n  {}",
                self.name,
                stencil::labels::ALLOW_BREAKING_CHANGES,
                changes.join("\n  ")
            ),
        }
    }
}

/// The CRD's verdict, when the definition installs one.
async fn crd_diff(client: &kube::Client, def: &stencil::compile::CompiledDefinition) -> Result<Option<CrdDiff>> {
    let Some(name) = stencil::crd::crd_name(def) else {
        return Ok(None);
    };
    let api: kube::Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        kube::Api::all(client.clone());
    let live = api
        .get_opt(&name)
        .await
        .with_context(|| format!("reading CRD {name}"))?;
    if let Some(live) = &live
        && !stencil::crd::is_ours(live)
    {
        bail!(
            "CRD {name} exists and was not installed by Stencil: `stencil run` would leave it as it is and report it; annotate it with {}: \"true\" to hand it over",
            stencil::labels::ADOPT_CRD
        );
    }
    let webhook = live.as_ref().and_then(stencil::crd::Webhook::of_live);
    let verdict = stencil::crd::verdict(def, live.as_ref(), webhook.as_ref())?;
    let migration = live
        .as_ref()
        .map(|l| stencil::migrate::pending(def, l))
        .unwrap_or_default();
    Ok(verdict.map(|(_, verdict)| CrdDiff {
        name,
        migration,
        breaking: match &verdict {
            CrdVerdict::Breaking(c) => c.clone(),
            _ => Vec::new(),
        },
        verdict,
    }))
}

/// The parents the first step of a canary rollout of the definition would move.
#[derive(serde::Serialize)]
struct FirstStep {
    /// The revision the edit would be.
    revision: String,
    /// The first step's share, in percent.
    percent: u8,
    /// The parents it would move, as `Kind namespace/name`.
    parents: Vec<String>,
    /// Every parent compared.
    of: usize,
}

impl FirstStep {
    /// With a Canary strategy, which of `parents` the first step moves.
    fn of(def: &stencil::compile::CompiledDefinition, parents: &[Value]) -> Option<FirstStep> {
        let percent = def.spec.rollout.effective_steps().first()?.percent;
        let revision = stencil::rollout::revision_name(&def.name, &stencil::rollout::revision_hash(&def.spec));
        let moved = parents
            .iter()
            .filter(|p| {
                let uid = p.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default();
                stencil::rollout::chosen(&revision, uid, percent)
            })
            .map(|p| {
                let text = |path: &str| p.pointer(path).and_then(Value::as_str).unwrap_or_default();
                match text("/metadata/namespace") {
                    "" => format!("{} {}", text("/kind"), text("/metadata/name")),
                    ns => format!("{} {ns}/{}", text("/kind"), text("/metadata/name")),
                }
            })
            .collect();
        Some(FirstStep {
            revision,
            percent,
            parents: moved,
            of: parents.len(),
        })
    }

    fn text(&self) -> String {
        let mut text = format!(
            "rollout: Canary; the first step ({} %) would move {} of {} parents to revision {} (parents another rollout moved go too):",
            self.percent,
            self.parents.len(),
            self.of,
            self.revision
        );
        for p in &self.parents {
            text.push_str(&format!("\n  {p}"));
        }
        text
    }
}

type Compared = (Option<CrdDiff>, Vec<live::diff::ParentDiff>, Option<FirstStep>);

async fn diff_parents(args: &DiffArgs) -> Result<Compared> {
    let (_, def) = super::load_one(&args.definition, args.name.as_deref())?;
    let def = &def;
    let client = kube::Client::try_default().await.context("connecting to the cluster")?;
    let crd = crd_diff(&client, def).await?;
    if crd.as_ref().is_some_and(|c| c.verdict == CrdVerdict::Create) {
        // A new kind has no parents yet.
        return Ok((crd, Vec::new(), None));
    }
    let kinds = live::Kinds::resolve(&client, def).await?;
    let mut params = kube::api::ListParams::default();
    if let Some(selector) = &args.selector {
        params = params.labels(selector);
    }
    let mut parents = Vec::new();
    let namespaces: Vec<Option<&str>> = if args.namespaces.is_empty() {
        vec![None]
    } else {
        args.namespaces.iter().map(|n| Some(n.as_str())).collect()
    };
    for ns in namespaces {
        let list = kinds
            .parents(&client, ns)
            .list(&params)
            .await
            .with_context(|| format!("listing {} parents", def.parent.kind))?;
        parents.extend(
            list.items
                .into_iter()
                .map(|p| live::to_value(p, &kinds.parent.resource)),
        );
    }
    let first_step = FirstStep::of(def, &parents);
    let selector = format!("{}={}", stencil::labels::MANAGED_BY, stencil::labels::MANAGED_BY_VALUE);
    let children = kinds.children(&client, &selector).await?;
    let progress = if std::io::stderr().is_terminal() {
        indicatif::ProgressBar::new(parents.len() as u64)
    } else {
        indicatif::ProgressBar::hidden()
    };
    let compared = futures::stream::iter(parents)
        .map(|parent| {
            let uid = parent
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let own = children.get(uid).cloned().unwrap_or_default();
            let (client, kinds, progress) = (&client, &kinds, &progress);
            async move {
                let diff = live::diff::parent(client, def, kinds, parent, own).await;
                progress.inc(1);
                diff
            }
        })
        .buffer_unordered(DIFF_CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    progress.finish_and_clear();
    let mut diffs = compared.into_iter().collect::<Result<Vec<_>, _>>()?;
    diffs.sort_by(|a, b| a.parent.cmp(&b.parent));
    Ok((crd, diffs, first_step))
}
