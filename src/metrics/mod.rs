//! Prometheus metrics: controller-runtime's names (labelled by definition, so existing
//! dashboards work) and Stencil's own. One registry per runtime, passed to whoever counts, encoded on /metrics.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// `controller` label, as controller-runtime sets it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabel {
    /// The definition's name.
    pub controller: String,
}

/// `controller` and `result` labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// The definition's name.
    pub controller: String,
    /// `success` or `error`.
    pub result: String,
}

/// `name` label of workqueue metrics, as client-go sets it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabel {
    /// The definition's name.
    pub name: String,
}

/// `state` label of the definitions gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabel {
    /// `running`, `conflict` (waiting for a parent kind another definition holds) or
    /// `invalid` (never compiled).
    pub state: String,
}

/// `member` label of the sharding gauges.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MemberLabel {
    /// The member's name (its Pod's).
    pub member: String,
}

/// Labels of applied children.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApplyLabels {
    /// The definition's name.
    pub definition: String,
    /// The child's kind.
    pub kind: String,
    /// `created`, `updated`, `recreated`, `adopted`, `immutable` (a refused change, nothing written) or `error`.
    pub result: String,
}

/// `result` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    /// What happened.
    pub result: String,
}

/// `method` label of API requests.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabel {
    /// The HTTP method: GET, POST, PATCH, PUT, DELETE.
    pub method: String,
}

/// `definition` and `revision` labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RevisionLabels {
    /// The definition's name.
    pub definition: String,
    /// The revision's name.
    pub revision: String,
}

/// `definition` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DefinitionLabel {
    /// The definition's name.
    pub definition: String,
}

/// Labels of a metacontroller hook.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HookLabels {
    /// The controller object, `CompositeController/NAME` or `DecoratorController/NAME`.
    pub controller: String,
    /// `sync`, `finalize` or `customize`.
    pub hook: String,
}

/// Labels of a metacontroller hook's calls.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HookResultLabels {
    /// The hook.
    #[prometheus(flatten)]
    pub hook: HookLabels,
    /// `success`, `busy` (a 429) or `error`.
    pub result: String,
}

fn seconds() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

/// Every metric Stencil exports.
pub struct Metrics {
    /// Reconciles by result.
    pub reconcile_total: Family<ResultLabels, Counter>,
    /// Reconciles that returned an error.
    pub reconcile_errors_total: Family<ControllerLabel, Counter>,
    /// Reconcile duration.
    pub reconcile_time_seconds: Family<ControllerLabel, Histogram, fn() -> Histogram>,
    /// Reconciles running now (not queued work, which kube's scheduler does not expose).
    pub reconciles_in_flight: Family<DefinitionLabel, Gauge>,
    /// Reconcile requests from watch events.
    pub workqueue_adds_total: Family<QueueLabel, Counter>,
    /// Time from a watch event to the start of the reconcile it caused.
    pub workqueue_queue_duration_seconds: Family<QueueLabel, Histogram, fn() -> Histogram>,
    /// Requeues after errors.
    pub workqueue_retries_total: Family<QueueLabel, Counter>,
    /// 1 while this process holds the leader Lease.
    pub leader_election_master_status: Family<QueueLabel, Gauge>,
    /// Writes through the leader's fence: `sent`, or `refused` after the renew deadline.
    pub fenced_writes_total: Family<ResultLabel, Counter>,
    /// Definitions by state.
    pub definitions: Family<StateLabel, Gauge>,
    /// Kinds watched.
    pub watched_kinds: Gauge,
    /// Ready members of the sharded ring, as the sharder sees them.
    pub shard_members: Gauge,
    /// Parents assigned to each member, as the sharder last counted them.
    pub shard_parents: Family<MemberLabel, Gauge>,
    /// Objects a decorator decorates now.
    pub decorated_parents: Family<DefinitionLabel, Gauge>,
    /// Of those, the ones whose children are all ready.
    pub decorated_ready_parents: Family<DefinitionLabel, Gauge>,
    /// The step each definition's rollout is at (1 for the first; 0 with no rollout).
    pub rollout_step: Family<DefinitionLabel, Gauge>,
    /// Parents rendering each revision of a definition.
    pub rollout_parents: Family<RevisionLabels, Gauge>,
    /// Child writes by result.
    pub children_applied_total: Family<ApplyLabels, Counter>,
    /// Child applies skipped because the live object already matched.
    pub apply_skipped_total: Family<DefinitionLabel, Counter>,
    /// Time spent rendering one parent.
    pub template_render_seconds: Family<DefinitionLabel, Histogram, fn() -> Histogram>,
    /// Requests to the API server by method, as client-go's `rest_client_requests_total`.
    pub rest_client_requests_total: Family<MethodLabel, Counter>,
    /// ConversionReviews answered, by result (`success` or `failure`).
    pub conversion_reviews_total: Family<ResultLabel, Counter>,
    /// Time to answer one ConversionReview.
    pub conversion_review_seconds: Histogram,
    /// Calls of metacontroller hooks by controller object, hook and result.
    pub hook_calls_total: Family<HookResultLabels, Counter>,
    /// Time per metacontroller hook call.
    pub hook_call_seconds: Family<HookLabels, Histogram, fn() -> Histogram>,
    registry: Registry,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Counts one reconcile of controller `name` that took `seconds`, as
    /// controller-runtime does: its time, its result and, when it failed, an error.
    pub fn reconciled(&self, name: &str, seconds: f64, succeeded: bool) {
        let label = controller(name);
        self.reconcile_time_seconds.get_or_create(&label).observe(seconds);
        let result = if succeeded { "success" } else { "error" };
        self.reconcile_total
            .get_or_create(&ResultLabels {
                controller: name.to_string(),
                result: result.into(),
            })
            .inc();
        if !succeeded {
            self.reconcile_errors_total.get_or_create(&label).inc();
        }
    }

    /// A fresh set of metrics, all zero; the runtime makes one per process and passes it on.
    pub fn new() -> Metrics {
        let m = Metrics {
            reconcile_total: Family::default(),
            reconcile_errors_total: Family::default(),
            reconcile_time_seconds: Family::new_with_constructor(seconds),
            reconciles_in_flight: Family::default(),
            workqueue_adds_total: Family::default(),
            workqueue_queue_duration_seconds: Family::new_with_constructor(seconds),
            workqueue_retries_total: Family::default(),
            leader_election_master_status: Family::default(),
            fenced_writes_total: Family::default(),
            definitions: Family::default(),
            watched_kinds: Gauge::default(),
            shard_members: Gauge::default(),
            shard_parents: Family::default(),
            decorated_parents: Family::default(),
            decorated_ready_parents: Family::default(),
            rollout_step: Family::default(),
            rollout_parents: Family::default(),
            children_applied_total: Family::default(),
            apply_skipped_total: Family::default(),
            template_render_seconds: Family::new_with_constructor(seconds),
            rest_client_requests_total: Family::default(),
            conversion_reviews_total: Family::default(),
            conversion_review_seconds: seconds(),
            hook_calls_total: Family::default(),
            hook_call_seconds: Family::new_with_constructor(seconds),
            registry: Registry::default(),
        };
        let mut r = Registry::default();
        m.register_shared(&mut r);
        m.register_own(&mut r);
        Metrics { registry: r, ..m }
    }

    /// Registers the metrics named as controller-runtime and client-go name theirs, so
    /// their dashboards read Stencil's.
    fn register_shared(&self, r: &mut Registry) {
        r.register(
            "controller_runtime_reconcile",
            "Reconciles per controller and result",
            self.reconcile_total.clone(),
        );
        r.register(
            "controller_runtime_reconcile_errors",
            "Reconcile errors per controller",
            self.reconcile_errors_total.clone(),
        );
        r.register(
            "controller_runtime_reconcile_time_seconds",
            "Time per reconcile",
            self.reconcile_time_seconds.clone(),
        );
        r.register(
            "workqueue_adds",
            "Reconcile requests from watch events",
            self.workqueue_adds_total.clone(),
        );
        r.register(
            "workqueue_queue_duration_seconds",
            "Time from a watch event to its reconcile",
            self.workqueue_queue_duration_seconds.clone(),
        );
        r.register(
            "workqueue_retries",
            "Requeues after errors",
            self.workqueue_retries_total.clone(),
        );
        r.register(
            "leader_election_master_status",
            "1 while this process is the leader",
            self.leader_election_master_status.clone(),
        );
        r.register(
            "rest_client_requests",
            "API server requests by method",
            self.rest_client_requests_total.clone(),
        );
    }

    /// Registers Stencil's own metrics (`stencil_*`).
    fn register_own(&self, r: &mut Registry) {
        r.register(
            "stencil_reconciles_in_flight",
            "Reconciles running now",
            self.reconciles_in_flight.clone(),
        );
        r.register(
            "stencil_fenced_writes",
            "Writes through the leader's fence, sent or refused after the renew deadline",
            self.fenced_writes_total.clone(),
        );
        r.register("stencil_definitions", "Definitions by state", self.definitions.clone());
        r.register(
            "stencil_hook_calls",
            "Calls of metacontroller hooks by controller object, hook and result",
            self.hook_calls_total.clone(),
        );
        r.register(
            "stencil_hook_call_seconds",
            "Time per metacontroller hook call",
            self.hook_call_seconds.clone(),
        );
        r.register("stencil_watched_kinds", "Kinds watched", self.watched_kinds.clone());
        r.register(
            "stencil_shard_members",
            "Ready members of the sharded ring, as the sharder sees them",
            self.shard_members.clone(),
        );
        r.register(
            "stencil_shard_parents",
            "Parents assigned to each member, as the sharder last counted them",
            self.shard_parents.clone(),
        );
        r.register(
            "stencil_decorated_parents",
            "Objects a decorator decorates",
            self.decorated_parents.clone(),
        );
        r.register(
            "stencil_decorated_ready_parents",
            "Decorated objects whose children are all ready",
            self.decorated_ready_parents.clone(),
        );
        r.register(
            "stencil_rollout_step",
            "The step each definition's rollout is at, from 1; 0 when none runs",
            self.rollout_step.clone(),
        );
        r.register(
            "stencil_rollout_parents",
            "Parents rendering each revision of a definition",
            self.rollout_parents.clone(),
        );
        r.register(
            "stencil_children_applied",
            "Child writes by result",
            self.children_applied_total.clone(),
        );
        r.register(
            "stencil_apply_skipped",
            "Child applies skipped because the live object matched",
            self.apply_skipped_total.clone(),
        );
        r.register(
            "stencil_template_render_seconds",
            "Time to render one parent",
            self.template_render_seconds.clone(),
        );
        r.register(
            "stencil_conversion_reviews",
            "ConversionReviews answered by result",
            self.conversion_reviews_total.clone(),
        );
        r.register(
            "stencil_conversion_review_seconds",
            "Time to answer one ConversionReview",
            self.conversion_review_seconds.clone(),
        );
    }

    /// The text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}

/// Shorthand for a definition label.
pub fn definition(name: &str) -> DefinitionLabel {
    DefinitionLabel {
        definition: name.to_string(),
    }
}

/// Shorthand for a controller label.
pub fn controller(name: &str) -> ControllerLabel {
    ControllerLabel {
        controller: name.to_string(),
    }
}

/// Shorthand for a queue label.
pub fn queue(name: &str) -> QueueLabel {
    QueueLabel { name: name.to_string() }
}

#[cfg(test)]
mod tests;
