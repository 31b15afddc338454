//! Command-line arguments of the `stencil` binary.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

pub mod reference;
mod run;

use run::seconds;
pub use run::{LogFormat, RunArgs};

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
    Run(Box<RunArgs>),
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
    /// Print CRDs: Stencil's own, with --definitions the parents' CRDs they declare, or
    /// with --compat the controller objects of another operator framework.
    Crd {
        /// Definition files or directories whose `spec.crd` to print.
        #[arg(long = "definitions", conflicts_with = "compat")]
        definitions: Vec<PathBuf>,
        /// Print the CRDs of this framework's controller objects instead.
        #[arg(long, value_enum)]
        compat: Option<Compat>,
    },
    /// Print the least-privilege ClusterRole (and Roles) Stencil needs for definitions.
    Rbac(RbacArgs),
    /// Print the JSON Schema of an OperatorDefinition file, for editors; or rewrite
    /// definitions' CRD schemas between OpenAPI and the compact form.
    Schema {
        /// What to print without a rewrite: the editor's JSON Schema, or the book's
        /// reference page made from it.
        #[arg(long, value_enum, default_value = "json")]
        format: SchemaFormat,
        /// A rewrite; without one, the editor's JSON Schema is printed.
        #[command(subcommand)]
        rewrite: Option<SchemaRewrite>,
    },
    /// Translate another operator framework's definitions into OperatorDefinitions.
    Import {
        /// The framework.
        #[command(subcommand)]
        from: ImportFrom,
    },
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
    /// Print the book's command-line page (docs/src/reference/cli.md), for `make chart`.
    #[command(hide = true)]
    CommandsPage,
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
/// Another operator framework whose controller objects Stencil reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Compat {
    /// metacontroller's CompositeController and DecoratorController
    /// (`metacontroller.k8s.io/v1alpha1`).
    Metacontroller,
}

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

/// Arguments of `stencil rbac`.
#[derive(Debug, clap::Args)]
pub struct RbacArgs {
    /// Definition files or directories (repeatable).
    #[arg(long = "definitions", required_unless_present = "controllers")]
    pub definitions: Vec<PathBuf>,
    /// Files of metacontroller CompositeController and DecoratorController objects, for
    /// `stencil run --compat metacontroller` (repeatable).
    #[arg(long = "controllers")]
    pub controllers: Vec<PathBuf>,
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

/// What `stencil schema` prints.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum SchemaFormat {
    /// The JSON Schema of a definition file.
    Json,
    /// The OperatorDefinition reference page, in Markdown.
    Markdown,
}

/// The rewrites of `stencil schema`, each printing the definitions it read.
#[derive(Debug, Subcommand)]
pub enum SchemaRewrite {
    /// Write each version's OpenAPI schema in the compact form where that loses nothing;
    /// says on stderr which versions stay as they are, and why.
    Compact {
        /// Definition files or directories.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Write each compact schema out as the OpenAPI it compiles to.
    Expand {
        /// Definition files or directories.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
}

/// What `stencil import` translates.
#[derive(Subcommand, Debug)]
pub enum ImportFrom {
    /// kro's ResourceGraphDefinitions: one OperatorDefinition per RGD, with a comment at
    /// each choice the translation made. An RGD that uses something Stencil cannot express
    /// is refused with its file, line and the feature's name; then every refusal is
    /// printed, nothing is written, and the exit code is 1.
    Kro {
        /// Files holding ResourceGraphDefinitions (other documents are passed over).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Write `<name>.yaml` per definition into this directory instead of printing
        /// them as one stream.
        #[arg(short = 'o', long = "output")]
        output: Option<PathBuf>,
    },
}
