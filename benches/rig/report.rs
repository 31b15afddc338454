//! The bench's report: results.json kept between runs and parts, and the table of
//! results.md, one row per figure, with the limit, kro and the target beside Stencil.

use std::collections::BTreeMap;

use serde_json::Value;

use super::root;

/// A row of the table: benchmark, Stencil, the limit (or floor), kro, target.
type Row = (&'static str, String, String, String, &'static str);

/// The results read by key; a missing figure reads as NaN.
struct Figures<'a>(&'a BTreeMap<&'a str, Value>);

impl Figures<'_> {
    fn get(&self, k: &str) -> Option<&Value> {
        self.0.get(k)
    }

    fn f(&self, k: &str) -> f64 {
        self.get(k).and_then(Value::as_f64).unwrap_or(f64::NAN)
    }

    /// A kro figure, or why kro did not run.
    fn kro(&self, text: String) -> String {
        match self.get("kro_skipped") {
            Some(why) => format!("not run: {}", why.as_str().unwrap_or_default()),
            None => text,
        }
    }

    /// The p50 and p99 of the latency keys `<prefix>_p50_ms` and `<prefix>_p99_ms`.
    fn ms(&self, prefix: &str) -> String {
        format!(
            "p50 {:.0} ms, p99 {:.0} ms",
            self.f(&format!("{prefix}_p50_ms")),
            self.f(&format!("{prefix}_p99_ms"))
        )
    }

    /// One sharding row: the three members against one process, for the keys `shard_<case>*`.
    fn shard_row(&self, case: &str) -> String {
        let key = |k: &str| format!("shard_{case}{k}");
        let f = |k: &str| self.f(&key(k));
        let list = |k: &str| {
            self.get(&key(k))
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_f64)
                        .map(|v| format!("{v:.0}"))
                        .collect::<Vec<_>>()
                        .join(" / ")
                })
                .unwrap_or_else(|| "not run".into())
        };
        format!(
            "shares {} parents; RSS {} MiB (sum {:.1}) against {:.1} MiB for one process; converge {:.1} s against {:.1} s; {:.0} restarts",
            list("parents"),
            list("rss_mib"),
            f("rss_sum_mib"),
            f("one_rss_mib"),
            f("converge_s"),
            f("one_converge_s"),
            f("restarts")
        )
    }
}

/// B1 and B1b: convergence against the limit, and the API server's CPU.
fn convergence(r: &Figures) -> Vec<Row> {
    vec![
        (
            "B1 converge N parents x 3 children, all Ready",
            format!("{:.1} s ({:.2}x the limit)", r.f("b1_converge_s"), r.f("b1_ratio")),
            format!("{:.1} s", r.f("limit_plain_s")),
            r.kro(format!(
                "{:.1} s ({:.2}x the limit)",
                r.f("kro_b1_converge_s"),
                r.f("kro_b1_converge_s") / r.f("limit_plain_s")
            )),
            "<= 1.25x",
        ),
        (
            "B1b converge N parents x 3 children ready on creation (ConfigMap, Secret, headless Service)",
            format!(
                "{:.1} s ({:.2}x the limit; {:.2}x Stencil's writes from a plain client) at N = {}",
                r.f("b1b_converge_s"),
                r.f("b1b_ratio"),
                r.f("b1b_writes_ratio"),
                r.f("b1b_n")
            ),
            format!(
                "{:.1} s; Stencil's writes: {:.1} s",
                r.f("b1b_plain_s"),
                r.f("b1b_writes_s")
            ),
            match r.get("b1b_kro_skipped") {
                Some(why) => format!("not run: {}", why.as_str().unwrap_or_default()),
                None => format!(
                    "{:.1} s ({:.1}x Stencil's time)",
                    r.f("b1b_kro_s"),
                    r.f("b1b_kro_ratio")
                ),
            },
            "<= 1.10x; kro >= 3x",
        ),
        (
            "B1b API server and etcd CPU per parent converged",
            format!("{:.1} ms", r.f("b1b_server_cpu_ms_per_parent")),
            format!(
                "{:.1} ms; Stencil's writes: {:.1} ms",
                r.f("b1b_plain_server_cpu_ms_per_parent"),
                r.f("b1b_writes_server_cpu_ms_per_parent")
            ),
            match r.get("b1b_kro_skipped") {
                Some(_) => String::new(),
                None => format!("{:.1} ms", r.f("b1b_kro_server_cpu_ms_per_parent")),
            },
            "",
        ),
    ]
}

/// B2: create to children against the floor, idle and during B1.
fn latency(r: &Figures) -> Vec<Row> {
    vec![
        (
            "B2 create -> children, idle",
            format!("{} ({:.2}x the floor's p50)", r.ms("b2_idle"), r.f("b2_idle_ratio")),
            r.ms("b2_floor_idle"),
            r.kro(r.ms("kro_b2_idle")),
            "p50 < 50 ms, <= 1.3x",
        ),
        (
            "B2 create -> children, during B1",
            format!("{} ({:.2}x the floor's p50)", r.ms("b2_busy"), r.f("b2_busy_ratio")),
            r.ms("b2_floor_busy"),
            r.kro(r.ms("kro_b2_busy")),
            "<= 1.3x",
        ),
        (
            "B2 during B1, over Stencil's idle p50",
            format!("{:.2}x", r.f("b2_busy_over_idle")),
            String::new(),
            String::new(),
            "<= 2x",
        ),
        (
            "B2 in another namespace during B1, over Stencil's idle p50",
            format!("{} ({:.2}x)", r.ms("b2_tenant"), r.f("b2_tenant_over_idle")),
            String::new(),
            String::new(),
            "<= 2x",
        ),
        (
            "B2 in another namespace during B1, over the floor beside Stencil",
            format!("{:.2}x", r.f("b2_tenant_over_beside")),
            format!(
                "{} ({:.2}x its idle {})",
                r.ms("b2_beside"),
                r.f("b2_beside_over_idle"),
                r.ms("b2_beside_idle")
            ),
            String::new(),
            "<= 2x",
        ),
        (
            "B2 while N parents are re-checked (a lookup they read touched every 2 s)",
            format!(
                "{} against {} idle ({:.2}x; N = {}, {:.0} passes a second)",
                r.ms("b2_recheck"),
                r.ms("b2_recheck_idle"),
                r.f("b2_recheck_over_idle"),
                r.f("b2_recheck_n"),
                r.f("b2_recheck_passes_per_s")
            ),
            String::new(),
            String::new(),
            "<= 2x",
        ),
    ]
}

/// B3 to B7: writes, memory and CPU, restart and deletion.
fn steady_state(r: &Figures) -> Vec<Row> {
    vec![
        (
            "B3 steady state writes",
            format!(
                "{} in {} s ({} resync reconciles)",
                r.f("b3_writes"),
                r.f("b3_idle_s"),
                r.f("b3_reconciles")
            ),
            String::new(),
            String::new(),
            "0",
        ),
        (
            "B4 RSS",
            format!(
                "{:.1} MiB steady, {:.1} MiB peak; {:.1} MiB after a restart; {:.1} KiB per parent over {:.1} MiB with none",
                r.f("b4_steady_rss_mib"),
                r.f("b4_peak_mib"),
                r.f("b6_rss_mib"),
                r.f("b4_kib_per_parent"),
                r.f("b4_base_rss_mib")
            ),
            String::new(),
            r.kro(format!(
                "{:.1} MiB after B1, {:.1} MiB peak",
                r.f("kro_b4_rss_mib"),
                r.f("kro_b4_peak_mib")
            )),
            "< 48 MiB at 1k; <= 20 KiB per parent",
        ),
        (
            "B5 CPU per 1k parents converged",
            format!(
                "{:.1} s ({:.2} % of a core idle)",
                r.f("b5_cpu_s_per_1k"),
                r.f("b5_idle_cpu_percent")
            ),
            String::new(),
            r.kro(format!("{:.1} s", r.f("kro_b5_cpu_s_per_1k"))),
            "",
        ),
        (
            "B6 restart",
            format!(
                "first reconcile {:.2} s, {} writes",
                r.f("b6_first_reconcile_s"),
                r.f("b6_writes")
            ),
            String::new(),
            String::new(),
            "0 writes",
        ),
        (
            "B7 delete every parent, until the children are gone",
            format!("{:.1} s", r.f("b7_delete_s")),
            String::new(),
            r.kro(format!("{:.1} s", r.f("kro_b7_delete_s"))),
            "",
        ),
    ]
}

/// B8 and B9: a decorator and a selector lookup.
fn decorators(r: &Figures) -> Vec<Row> {
    vec![
        (
            "B8 decorator: label -> 3 children; N labelled at once",
            format!("{}; converge {:.1} s", r.ms("b8_label"), r.f("b8_converge_s")),
            String::new(),
            String::new(),
            "",
        ),
        (
            "B8 decorator RSS",
            format!(
                "{:.1} MiB alone, {:.1} MiB with {} non-matching Namespaces, {:.1} MiB with N decorated",
                r.f("b8_rss_before_mib"),
                r.f("b8_rss_others_mib"),
                r.f("b8_others"),
                r.f("b8_rss_matching_mib")
            ),
            String::new(),
            String::new(),
            "flat with non-matching objects",
        ),
        (
            "B9 selector lookup: one Secret copied into N Namespaces",
            format!(
                "{} copies in {:.1} s; {:.1} MiB with every Namespace watched, {:.1} MiB with the copies",
                r.f("b9_members"),
                r.f("b9_copies_s"),
                r.f("b9_rss_idle_mib"),
                r.f("b9_rss_mib")
            ),
            String::new(),
            String::new(),
            "",
        ),
    ]
}

/// Sharding, the canary rollout (B11) and conversion (B10).
fn sharding_and_rollout(r: &Figures) -> Vec<Row> {
    vec![
        (
            "Sharding, B4's App over three replicas",
            r.shard_row(""),
            String::new(),
            String::new(),
            "each about a third of one process",
        ),
        (
            "Sharding, B1b's Lite over three replicas",
            r.shard_row("b1b_"),
            String::new(),
            String::new(),
            "",
        ),
        (
            "B11 canary rollout of an edit, steps 10 / 50 / 100 % without pauses",
            format!(
                "{} parents: steps {} s, {:.1} s in all; {:.0} writes ({:.2} per parent: 2 children and an event each, and the revision's own)",
                r.f("rollout_n"),
                r.get("rollout_step_s")
                    .and_then(Value::as_array)
                    .map(|s| s
                        .iter()
                        .map(|t| format!("{:.1}", t.as_f64().unwrap_or(f64::NAN)))
                        .collect::<Vec<_>>()
                        .join(" / "))
                    .unwrap_or_default(),
                r.f("rollout_total_s"),
                r.f("rollout_writes"),
                r.f("rollout_writes_per_parent")
            ),
            String::new(),
            String::new(),
            "",
        ),
        (
            "B10 GET through the conversion webhook (v1alpha1 of a v1 object)",
            format!(
                "{}; {} at v1; +{:.1} ms p50, {:.2} ms inside the webhook; {:.0} ns per object converted (pure)",
                r.ms("b10_get_converted"),
                r.ms("b10_get_v1"),
                r.f("b10_added_p50_ms"),
                r.f("b10_webhook_mean_ms"),
                r.f("b10_convert_ns_per_object")
            ),
            String::new(),
            String::new(),
            "",
        ),
        (
            "B10 LIST of N parents, per object: at v1alpha1 through the webhook, at v1 (storage)",
            format!(
                "{:.1} µs; {:.1} µs ({:.2}x); the webhook's CPU {:.1} µs per object",
                r.f("b10_list_converted_us_per_object"),
                r.f("b10_list_v1_us_per_object"),
                r.f("b10_list_ratio"),
                r.f("b10_list_webhook_cpu_us_per_object")
            ),
            String::new(),
            String::new(),
            "",
        ),
    ]
}

/// Adds the last run's figures that this run does not measure.
pub(super) fn keep_saved(results: &mut BTreeMap<&'static str, Value>) {
    let saved = std::fs::read_to_string(root().join("target/bench/results.json")).unwrap_or_default();
    let saved: BTreeMap<String, Value> = serde_json::from_str(&saved).unwrap_or_default();
    for (k, v) in saved {
        // The bench is one short process; its keys live as long as it does.
        results.entry(Box::leak(k.into_boxed_str())).or_insert(v);
    }
}

/// Prints the table, writes it to results.md and saves the results.
pub(super) fn report(r: &BTreeMap<&str, Value>) {
    let figures = Figures(r);
    let rows = [convergence, latency, steady_state, decorators, sharding_and_rollout]
        .iter()
        .flat_map(|section| section(&figures));
    let mut md = format!(
        "N = {}, {} replica(s) per Deployment; {}\n\n| benchmark | Stencil | plain client (the limit; for B2 the floor: a client watching the parents) | kro | target |\n|---|---|---|---|---|\n",
        r["n"],
        r["replicas"],
        r.get("etcd").and_then(Value::as_str).unwrap_or_default()
    );
    for (name, stencil, plain, kro, target) in rows {
        md.push_str(&format!("| {name} | {stencil} | {plain} | {kro} | {target} |\n"));
    }
    println!("{md}");
    std::fs::write(root().join("target/bench/results.md"), &md).unwrap();
    save(r);
}

/// Writes the results so far, so that a failure in a later phase keeps the earlier ones.
pub(super) fn save(r: &BTreeMap<&str, Value>) {
    let path = root().join("target/bench/results.json");
    std::fs::write(path, serde_json::to_string_pretty(r).unwrap()).unwrap();
}
