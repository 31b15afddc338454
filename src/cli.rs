//! Command-line arguments of the `stencil` binary.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// Stencil: a generic Kubernetes operator driven by OperatorDefinitions.
#[derive(Debug, Parser)]
#[command(name = "stencil", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the controller: serve every definition from the cluster and from --definitions.
    Run(RunArgs),
    /// Render the children and status of one parent, offline.
    Render(RenderArgs),
    /// Check definition files; prints `file:line:col: message` per error.
    Validate {
        /// Files or directories of definitions.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Run golden cases (`*.case.yaml` beside `*.expected.yaml`).
    Test {
        /// Directories (or case files) to run.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Rewrite the expected files from the current output.
        #[arg(long)]
        update: bool,
    },
    /// Print CRDs: Stencil's own, or with --definitions the parents' CRDs they declare.
    Crd {
        /// Definition files or directories whose `spec.crd` to print.
        #[arg(long = "definitions")]
        definitions: Vec<PathBuf>,
    },
    /// Print the least-privilege ClusterRole (and Roles) Stencil needs for definitions.
    Rbac(RbacArgs),
    /// Print the JSON Schema of an OperatorDefinition file, for editors.
    Schema,
    /// Start a new definition: a CRD skeleton, a child, an example parent and a golden case.
    New(NewArgs),
    /// Show what a new definition would do to every existing parent (dry run); exit 0 for
    /// no change, 1 for changes, 2 for an error.
    Diff(DiffArgs),
    /// Convert parents to another version of their CRD offline, as the conversion
    /// webhook would; exits 1 when a round trip back would lose a field.
    Convert(ConvertArgs),
    /// Show or steer a definition's rollout on the cluster, as `kubectl rollout` does:
    /// exit 0 on success, 1 on a failed rollout, a refused command or a timeout.
    Rollout {
        /// What to do.
        #[command(subcommand)]
        action: RolloutAction,
    },
    /// Print the Argo CD health checks (`argocd-cm` data) for the definitions' parent kinds.
    Argocd {
        /// Definition files or directories.
        #[arg(long = "definitions", required = true)]
        definitions: Vec<PathBuf>,
    },
}

/// `stencil rollout` actions.
#[derive(Debug, Subcommand)]
pub enum RolloutAction {
    /// Wait until the rollout completes (exit 0) or fails (exit 1), printing each step.
    Status {
        /// The definition.
        #[command(flatten)]
        target: RolloutTarget,
        /// Give up after this long (exit 1); 0 waits for ever.
        #[arg(long, default_value = "0s", value_parser = seconds)]
        timeout: std::time::Duration,
    },
    /// Go to the next step now, whatever its pause; resumes a paused rollout.
    Promote(RolloutTarget),
    /// Hold the rollout at its step.
    Pause(RolloutTarget),
    /// Let a paused rollout go on; its step starts again.
    Resume(RolloutTarget),
    /// Return every parent to the revision before: the current one during a rollout, the
    /// one before it after.
    Undo(RolloutTarget),
}

/// Which definition's rollout.
#[derive(Debug, clap::Args)]
pub struct RolloutTarget {
    /// The definition's name (`metadata.name`).
    pub definition: String,
    /// Stencil's namespace, where it keeps revisions (default: $POD_NAMESPACE, else the
    /// kubeconfig's namespace).
    #[arg(long)]
    pub stencil_namespace: Option<String>,
}

/// Arguments of `stencil new`.
#[derive(Debug, clap::Args)]
pub struct NewArgs {
    /// The parent kind, CamelCase, e.g. `Database`.
    pub kind: String,
    /// The API group, e.g. `example.org`.
    #[arg(long)]
    pub group: String,
    /// The API version.
    #[arg(long, default_value = "v1")]
    pub version: String,
    /// Whether parents are namespaced.
    #[arg(long, value_enum, default_value_t = Scope::Namespaced)]
    pub scope: Scope,
    /// Where to write the files; none of them may exist.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
}

/// A parent kind's scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scope {
    /// Parents live in a namespace.
    #[value(name = "Namespaced")]
    Namespaced,
    /// Parents are cluster-scoped.
    #[value(name = "Cluster")]
    Cluster,
}

/// Arguments of `stencil render`.
#[derive(Debug, clap::Args)]
pub struct RenderArgs {
    /// The definition file.
    #[arg(long)]
    pub definition: PathBuf,
    /// The definition's name, when the file holds several.
    #[arg(long)]
    pub name: Option<String>,
    /// The parent object (YAML).
    #[arg(long, required_unless_present = "from_cluster", conflicts_with = "from_cluster")]
    pub parent: Option<PathBuf>,
    /// Observed children (YAML stream); each carries the `stencil.dev/child` label.
    #[arg(long, conflicts_with = "from_cluster")]
    pub observed: Vec<PathBuf>,
    /// Objects the lookups read (YAML stream).
    #[arg(long, conflicts_with = "from_cluster")]
    pub lookups: Vec<PathBuf>,
    /// Read the parent `KIND/NAME`, its children and its lookups from the cluster in the
    /// kubeconfig instead of from files.
    #[arg(long, value_name = "KIND/NAME")]
    pub from_cluster: Option<String>,
    /// The parent's namespace, with --from-cluster.
    #[arg(short = 'n', long, requires = "from_cluster")]
    pub namespace: Option<String>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Yaml)]
    pub output: Format,
}

/// Arguments of `stencil convert`.
#[derive(Debug, clap::Args)]
pub struct ConvertArgs {
    /// The definition file.
    #[arg(long)]
    pub definition: PathBuf,
    /// The definition's name, when the file holds several.
    #[arg(long)]
    pub name: Option<String>,
    /// The version to convert to, e.g. `v1alpha1`.
    #[arg(long)]
    pub to: String,
    /// A file of parent objects (a YAML stream; `-` reads stdin).
    pub objects: PathBuf,
    /// Output format of the converted objects.
    #[arg(short, long, value_enum, default_value_t = Format::Yaml)]
    pub output: Format,
}

/// Arguments of `stencil diff`.
#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// The new definition file.
    #[arg(long)]
    pub definition: PathBuf,
    /// The definition's name, when the file holds several.
    #[arg(long)]
    pub name: Option<String>,
    /// Only parents in these namespaces (repeatable); all namespaces by default.
    #[arg(long = "namespace", short = 'n')]
    pub namespaces: Vec<String>,
    /// Only parents this label selector selects.
    #[arg(long, short = 'l')]
    pub selector: Option<String>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = DiffFormat::Text)]
    pub output: DiffFormat,
}

/// Output formats of `stencil diff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DiffFormat {
    /// A section per parent with changes, then a summary line.
    Text,
    /// `{"parents": [...], "summary": {...}}`.
    Json,
}

/// Output formats of `stencil render`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// The desired children as a YAML stream.
    Yaml,
    /// `{"children": [...], "status": {...}, "waiting": [...]}`.
    Json,
}

/// Arguments of `stencil run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Files or directories of definitions, watched and reloaded on change (repeatable).
    #[arg(long = "definitions")]
    pub definitions: Vec<PathBuf>,
    /// Serve only parents (and watch only namespaced objects) in these namespaces
    /// (repeatable; default: every namespace).
    #[arg(long = "namespace")]
    pub namespaces: Vec<String>,
    /// Parents reconciled at once per definition.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub concurrency: u16,
    /// Ignore OperatorDefinition resources; serve only --definitions.
    #[arg(long)]
    pub no_cluster_definitions: bool,
    /// Serve only the OperatorDefinition resources this label selector matches
    /// (`team=payments`), so several Stencil installations can share a cluster.
    #[arg(long)]
    pub definition_selector: Option<String>,
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub metrics_addr: std::net::SocketAddr,
    /// Reconcile only while holding a Lease; other replicas wait as warm standbys.
    #[arg(long)]
    pub leader_elect: bool,
    /// Split the parents between the replicas: each holds a membership Lease and
    /// reconciles only the parents labelled with its name (`stencil.dev/shard`), which
    /// the leader assigns. Implies --leader-elect; the ring is named after the leader
    /// Lease, and each member after its identity ($POD_NAME).
    #[arg(long)]
    pub sharding: bool,
    /// Namespace of the leader Lease (default: $POD_NAMESPACE, else `default`).
    #[arg(long)]
    pub leader_election_namespace: Option<String>,
    /// Name of the leader Lease.
    #[arg(long, default_value = "stencil")]
    pub leader_election_id: String,
    /// How long the Lease is valid without renewal.
    #[arg(long, default_value = "15s", value_parser = seconds)]
    pub lease_duration: std::time::Duration,
    /// How long the leader keeps writing without a renewal; shorter than the Lease
    /// duration, so it has stopped before a standby may take over.
    #[arg(long, default_value = "10s", value_parser = seconds)]
    pub renew_deadline: std::time::Duration,
    /// How often the leader renews the Lease.
    #[arg(long, default_value = "2s", value_parser = seconds)]
    pub retry_period: std::time::Duration,
    /// How long a watch's first list may take before the definition reports it.
    #[arg(long, default_value = "10s", value_parser = seconds)]
    pub sync_timeout: std::time::Duration,
    /// Who stores parents anew when a definition's storage version changes: `auto` asks
    /// the cluster (a StorageVersionMigration) where it serves and runs one, and rewrites
    /// each object otherwise; `rewrite` always rewrites.
    #[arg(long, value_enum, default_value = "auto")]
    pub storage_migration: stencil::migrate::Method,
    /// Where the conversion webhook listens (served only with --webhook-service or
    /// --webhook-url).
    #[arg(long, default_value = "0.0.0.0:9443")]
    pub webhook_addr: std::net::SocketAddr,
    /// The Service through which the API server reaches the webhook, as NAMESPACE/NAME.
    #[arg(long, value_name = "NAMESPACE/NAME", conflicts_with = "webhook_url", value_parser = service_ref)]
    pub webhook_service: Option<(String, String)>,
    /// The webhook's base URL for a Stencil outside the cluster, e.g. `https://127.0.0.1:9443`.
    #[arg(long, value_name = "URL", value_parser = https_url)]
    pub webhook_url: Option<String>,
    /// A directory with `tls.crt`, `tls.key` and optionally `ca.crt` (cert-manager's),
    /// reloaded when they change; without it Stencil generates a certificate.
    #[arg(long, value_name = "DIR")]
    pub webhook_cert_dir: Option<PathBuf>,
    /// The Secret, in Stencil's namespace ($POD_NAMESPACE, else `default`), that keeps the
    /// generated certificate.
    #[arg(long, default_value = "stencil-webhook-cert")]
    pub webhook_secret: String,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// Log formats of `stencil run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Parses a Service reference written `NAMESPACE/NAME`.
fn service_ref(text: &str) -> Result<(String, String), String> {
    match text.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((ns.to_string(), name.to_string()))
        }
        _ => Err(format!("`{text}` is not NAMESPACE/NAME")),
    }
}

/// Accepts an `https://` URL, without its trailing slash.
fn https_url(text: &str) -> Result<String, String> {
    if text.starts_with("https://") && text.len() > "https://".len() {
        Ok(text.trim_end_matches('/').to_string())
    } else {
        Err(format!(
            "`{text}` is not an https:// URL; the API server calls webhooks over TLS only"
        ))
    }
}

/// Parses whole seconds written `15s` or `15`.
fn seconds(text: &str) -> Result<std::time::Duration, String> {
    let digits = text.strip_suffix('s').unwrap_or(text);
    digits
        .parse::<u64>()
        .ok()
        .filter(|s| *s > 0)
        .map(std::time::Duration::from_secs)
        .ok_or_else(|| format!("`{text}` is not a positive number of seconds, e.g. 15s"))
}

/// Arguments of `stencil rbac`.
#[derive(Debug, clap::Args)]
pub struct RbacArgs {
    /// Definition files or directories (repeatable).
    #[arg(long = "definitions", required = true)]
    pub definitions: Vec<PathBuf>,
    /// Confine namespaced kinds to Roles in these namespaces (repeatable).
    #[arg(long = "namespace")]
    pub namespaces: Vec<String>,
    /// Include Leases for leader election.
    #[arg(long)]
    pub leader_elect: bool,
    /// Include Leases for `stencil run --sharding`: leader election, and deleting the
    /// Lease of a member that stopped renewing it.
    #[arg(long)]
    pub sharding: bool,
    /// Leave out OperatorDefinition access (for `stencil run --no-cluster-definitions`).
    #[arg(long)]
    pub no_cluster_definitions: bool,
    /// Name of the generated roles.
    #[arg(long, default_value = "stencil")]
    pub name: String,
    /// Also bind the roles to this ServiceAccount, written `namespace/name`.
    #[arg(long)]
    pub service_account: Option<String>,
    /// Stencil's own namespace, where it keeps each definition's revisions (default: the
    /// --service-account's namespace, else `default`).
    #[arg(long)]
    pub stencil_namespace: Option<String>,
    /// `manifests` (ClusterRole and Roles) or `values` (rules for the Helm chart's
    /// `rbac.clusterRules` and `rbac.namespacedRules`).
    #[arg(long, value_enum, default_value_t = RbacFormat::Manifests)]
    pub format: RbacFormat,
}

/// Output formats of `stencil rbac`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RbacFormat {
    /// Kubernetes manifests.
    Manifests,
    /// Helm values for charts/stencil.
    Values,
}
