//! Every metric gslb exports, declared once with its help text.
//!
//! Probe metrics use blackbox_exporter's names; controller metrics are prefixed `gslb_`. Labels
//! take only bounded values: names from policies, rule and reason enums, provider error codes.
//! Each family is declared (name, help, labels) in the module of its role, next to what records
//! it: `probes` (probe results), `engine` (decisions, holds, drills), `provider` (reconcilers),
//! `operations` (version, policy loads, webhooks, failover timelines). The probe loops' own
//! metrics (lateness, late and skipped probes) are in `probing`. The process's own
//! (`process_cpu_seconds_total`, `process_resident_memory_bytes`, `process_open_fds`, ...) come
//! from the `prometheus` crate's process collector (Linux only).
//!
//! The families with a series per endpoint, pool, service or provider binding are kept in our
//! own [`Table`]s (label values stored once, values in atomics, written straight into the
//! scrape's buffer: `table`, `cells`, `text`); the low-cardinality rest (per vantage point,
//! webhook sink or etcd call, the plain gauges, the process's and the probe loops' metrics)
//! stays in the crate's registry. [`Metrics::render`] writes both, families sorted by name as
//! the crate's registry sorts them.

mod cells;
mod cluster;
mod dataplane;
mod engine;
mod index;
mod operations;
mod probes;
mod probing;
mod provider;
mod slab;
mod strings;
mod table;
mod text;
mod writer;

use std::cell::RefCell;
use std::sync::{Arc, Mutex};

use prometheus::core::Collector;
use prometheus::proto::MetricType;
use prometheus::{Gauge, GaugeVec, IntCounterVec, Opts, Registry, TextEncoder};

use gslb_core::model::{EndpointId, VantageId, Verdict};
use gslb_core::policy::Policy;

use crate::ops::endpoints::EndpointTable;

pub use cells::{Cell, CounterCell, GaugeCell, HistogramCell, Layout};
pub use cluster::CLUSTER_ONLY;
pub use dataplane::DATA_PLANE_ONLY;
pub use operations::PHASE_BUCKETS;
pub use provider::RECONCILE_BUCKETS;
pub use table::Table;

/// The metric set of one controller process.
#[derive(Debug, Clone)]
pub struct Metrics {
    /// What renders and lists the families.
    export: Export,
    /// Each endpoint's probe series, resolved at its first result ([`Metrics::record_probe`]).
    probe_series: Arc<Mutex<EndpointTable<probes::ProbeSeries>>>,
    /// `probe_success{service,pool,endpoint,vantage}`: 1 when the last probe passed.
    pub probe_success: Table<GaugeCell>,
    /// `probe_duration_seconds{...}`: duration of the last probe.
    pub probe_duration_seconds: Table<GaugeCell>,
    /// `probe_http_status_code{...}`: HTTP status of the last probe, 0 without a response.
    pub probe_http_status_code: Table<GaugeCell>,
    /// `probe_ssl_earliest_cert_expiry{...}`: Unix time (seconds) the first of the certificates
    /// the peer presented in the last TLS handshake expires (leaf or intermediate); absent for
    /// endpoints without TLS.
    pub probe_ssl_earliest_cert_expiry: Table<GaugeCell>,
    /// `probe_dns_lookup_time_seconds{...}`: time the last probe spent resolving the endpoint's
    /// name; 0 for IP literals.
    pub probe_dns_lookup_time_seconds: Table<GaugeCell>,
    /// `gslb_probes_total{service,pool,endpoint,reason}`: probes by outcome reason.
    pub probes_total: Table<CounterCell>,
    /// `gslb_pool_verdict{service,pool,verdict}`: 1 for the pool's current verdict, 0 for the others.
    pub pool_verdict: Table<GaugeCell>,
    /// `gslb_active_pool{service,pool}`: 1 for the pool the engine wants serving.
    pub active_pool: Table<GaugeCell>,
    /// `gslb_decisions_total{service,rule}`: decisions that changed the rule or the active pool.
    pub decisions_total: Table<CounterCell>,
    /// `gslb_decision_applied{service}`: 1 when the status reads the latest decision applied,
    /// 0 while it reads `pending` or `shadow`; set only by
    /// [`Telemetry::record_apply`](crate::ops::telemetry::Telemetry::record_apply).
    pub decision_applied: Table<GaugeCell>,
    /// `gslb_provider_calls_total{provider,service,operation}`: observe and apply calls.
    pub provider_calls_total: Table<CounterCell>,
    /// `gslb_provider_errors_total{provider,service,operation,code}`: failed calls by error
    /// class.
    pub provider_errors_total: Table<CounterCell>,
    /// `gslb_provider_writes_total{provider,service}`: changes written to a provider.
    pub provider_writes_total: Table<CounterCell>,
    /// `gslb_holds_total{service,rule}`: decisions that entered a hold, by rule.
    pub holds_total: Table<CounterCell>,
    /// `gslb_velocity_limited_total{service}`: switches blocked by a velocity limit.
    pub velocity_limited_total: Table<CounterCell>,
    /// `gslb_velocity_available{service}`: automatic switches left in the budget.
    pub velocity_available: Table<GaugeCell>,
    /// `gslb_stale_evidence{service}`: results older than the freshness window at the last
    /// decision (probes running late).
    pub stale_evidence: Table<GaugeCell>,
    /// `gslb_rail_holds_total{service,rule}`: switches refused by a safety rail, drills' included.
    pub rail_holds_total: Table<CounterCell>,
    /// `gslb_pool_flap_percent{service,pool}`: weighted state-change percentage.
    pub pool_flap_percent: Table<GaugeCell>,
    /// `gslb_pool_flapping{service,pool}`: 1 while the pool flaps.
    pub pool_flapping: Table<GaugeCell>,
    /// `gslb_pool_damping_penalty{service,pool}`: flap-damping penalty.
    pub pool_damping_penalty: Table<GaugeCell>,
    /// `gslb_pool_suppressed{service,pool}`: 1 while flap damping suppresses the pool.
    pub pool_suppressed: Table<GaugeCell>,
    /// `gslb_vantage_suspect{vantage,reason}`: 1 while the vantage point is suspect.
    pub vantage_suspect: GaugeVec,
    /// `gslb_overrides_active{service,action}`: active drill overrides.
    pub overrides_active: Table<GaugeCell>,
    /// `gslb_override_oldest_age_seconds{service}`: age of the oldest active override.
    pub override_oldest_age_seconds: Table<GaugeCell>,
    /// `gslb_shadow_plans_total{service}`: plans shadow mode did not write.
    pub shadow_plans_total: Table<CounterCell>,
    /// `gslb_provider_drift_total{provider,service}`: re-applies of a state gslb had already
    /// written, because another writer changed it.
    pub provider_drift_total: Table<CounterCell>,
    /// `gslb_provider_budget_exhausted_total{provider,service}`: reconcile passes held back
    /// because the binding spent its provider call budget for the minute
    /// (`[reconcile] provider_calls_per_minute`).
    pub provider_budget_exhausted_total: Table<CounterCell>,
    /// `gslb_provider_write_fights_total{provider,service}`: write fights declared (drift over
    /// the limit per window); gslb stops writing for the window.
    pub provider_write_fights_total: Table<CounterCell>,
    /// `gslb_plans_refused_total{service,reason}`: plans a safety guard refused
    /// (`fallback_disabled`, `fallback_unhealthy`), counted per reconcile pass; and
    /// `fallback_drain_ignored`: a drain of the fallback pool dropped from an otherwise
    /// applied plan, counted once when it starts.
    pub plans_refused_total: Table<CounterCell>,
    /// `gslb_switches_total{service,kind}`: changes of the serving pool, `kind` = `automatic`
    /// or `drill`.
    pub switches_total: Table<CounterCell>,
    /// `gslb_decision_unapplied_age_seconds{service}`: how long the latest decision has waited
    /// for the provider; 0 while the provider matches it.
    pub decision_unapplied_age_seconds: Table<GaugeCell>,
    /// `gslb_reconcile_duration_seconds{provider}`: duration of one reconcile pass (read,
    /// plan, write when needed), every service bound to the provider together.
    pub reconcile_duration_seconds: Table<HistogramCell>,
    /// `gslb_failover_phase_seconds{service,phase}`: time from the start of a switch (first
    /// failed probe, or the drill's decision) to each timeline phase.
    pub failover_phase_seconds: Table<HistogramCell>,
    /// `gslb_policy_reload_success`: 1 when the last policy (re)load succeeded, 0 when it failed
    /// and the previous set is still in use.
    pub policy_reload_success: Gauge,
    /// `gslb_policy_reload_timestamp_seconds`: Unix time of the last successful policy load.
    pub policy_reload_timestamp_seconds: Gauge,
    /// `gslb_policy_reloads_total{result}`: reload attempts, `result` = `ok` or `error`.
    pub policy_reloads_total: IntCounterVec,
    /// `gslb_webhook_deliveries_total{sink,result}`: webhook attempts, `result` = `delivered`,
    /// `retried`, `failed` (gave up), `dropped` (pushed out of a full queue) or `lagged`
    /// (broadcast events the sink's reader missed, mostly probe results).
    pub webhook_deliveries_total: IntCounterVec,
    /// `gslb_log_lines_dropped_total{log}`: lines that never reached the audit log
    /// (`log="audit"`) or the observation recording (`recording`), counted by the appender
    /// ([`crate::io::jsonl::JsonlWriter::count_drops_in`]).
    pub log_lines_dropped_total: IntCounterVec,
    /// `gslb_build_info{version}`: always 1; the running version.
    pub build_info: GaugeVec,
    /// `gslb_cluster_coordinated`: 1 while coordinated (or alone), 0 while failing static.
    pub cluster_coordinated: Gauge,
    /// `gslb_cluster_vantage_fresh{vantage}`: 1 while the vantage point's heartbeat is fresh.
    pub cluster_vantage_fresh: GaugeVec,
    /// `gslb_cluster_fresh_voters{service,pool}`: vantage points whose votes on the pool count.
    pub cluster_fresh_voters: Table<GaugeCell>,
    /// `gslb_cluster_etcd_errors_total{op}`: failed etcd calls (handed to
    /// [`crate::io::coordination::ErrorCounter`]).
    pub cluster_etcd_errors_total: IntCounterVec,
    /// `gslb_cluster_etcd_requests_total{method}`: every request sent to etcd (handed to the
    /// coordination's [`ErrorCounter`](crate::io::coordination::ErrorCounter)).
    pub cluster_etcd_requests_total: IntCounterVec,
    /// `gslb_cluster_writer{binding}`: 1 while this instance is the binding's elected writer,
    /// 0 otherwise (`[cluster]` only).
    pub cluster_writer: Table<GaugeCell>,
    /// `gslb_cluster_fenced_write_refusals_total{binding,reason}`: writes the fence refused
    /// this instance as writer; `reason` is a [`Refusal::reason`] label.
    ///
    /// [`Refusal::reason`]: crate::io::coordination::fence::Refusal::reason
    pub cluster_fenced_write_refusals_total: Table<CounterCell>,
    /// `gslb_cluster_late_writes_total{binding}`: writes of an older writer seen after this
    /// writer's own (Cloudflare's epoch stamp), each corrected.
    pub cluster_late_writes_total: Table<CounterCell>,
    /// `gslb_dataplane_voters{service}`: instances giving Route 53 a vote, as read here.
    pub dataplane_voters: Table<GaugeCell>,
    /// `gslb_dataplane_instances{service}`: instances listed for Route 53 data-plane mode.
    pub dataplane_instances: Table<GaugeCell>,
}

/// One metric family as declared: name, help text and label names (none for a plain gauge).
#[derive(Debug, Clone, Copy)]
struct Family {
    name: &'static str,
    help: &'static str,
    labels: &'static [&'static str],
}

impl Metrics {
    /// A fresh registry with every metric registered.
    ///
    /// # Panics
    /// Never in practice: names are static and unique (checked by a unit test).
    pub fn new() -> Self {
        let r = Registrar::default();
        let metrics = Self {
            build_info: r.gauge(&operations::BUILD_INFO),
            policy_reloads_total: r.counter(&operations::POLICY_RELOADS_TOTAL),
            probe_success: r.gauges(&probes::PROBE_SUCCESS),
            probe_duration_seconds: r.gauges(&probes::PROBE_DURATION_SECONDS),
            probe_http_status_code: r.gauges(&probes::PROBE_HTTP_STATUS_CODE),
            probe_ssl_earliest_cert_expiry: r.gauges(&probes::PROBE_SSL_EARLIEST_CERT_EXPIRY),
            probe_dns_lookup_time_seconds: r.gauges(&probes::PROBE_DNS_LOOKUP_TIME_SECONDS),
            probes_total: r.counters(&probes::PROBES_TOTAL),
            pool_verdict: r.gauges(&engine::POOL_VERDICT),
            active_pool: r.gauges(&engine::ACTIVE_POOL),
            decisions_total: r.counters(&engine::DECISIONS_TOTAL),
            decision_applied: r.gauges(&provider::DECISION_APPLIED),
            provider_calls_total: r.counters(&provider::PROVIDER_CALLS_TOTAL),
            provider_errors_total: r.counters(&provider::PROVIDER_ERRORS_TOTAL),
            provider_writes_total: r.counters(&provider::PROVIDER_WRITES_TOTAL),
            holds_total: r.counters(&engine::HOLDS_TOTAL),
            velocity_limited_total: r.counters(&engine::VELOCITY_LIMITED_TOTAL),
            velocity_available: r.gauges(&engine::VELOCITY_AVAILABLE),
            stale_evidence: r.gauges(&engine::STALE_EVIDENCE),
            rail_holds_total: r.counters(&engine::RAIL_HOLDS_TOTAL),
            pool_flap_percent: r.gauges(&engine::POOL_FLAP_PERCENT),
            pool_flapping: r.gauges(&engine::POOL_FLAPPING),
            pool_damping_penalty: r.gauges(&engine::POOL_DAMPING_PENALTY),
            pool_suppressed: r.gauges(&engine::POOL_SUPPRESSED),
            vantage_suspect: r.gauge(&engine::VANTAGE_SUSPECT),
            overrides_active: r.gauges(&engine::OVERRIDES_ACTIVE),
            override_oldest_age_seconds: r.gauges(&engine::OVERRIDE_OLDEST_AGE_SECONDS),
            shadow_plans_total: r.counters(&provider::SHADOW_PLANS_TOTAL),
            provider_drift_total: r.counters(&provider::PROVIDER_DRIFT_TOTAL),
            provider_write_fights_total: r.counters(&provider::PROVIDER_WRITE_FIGHTS_TOTAL),
            provider_budget_exhausted_total: r.counters(&provider::PROVIDER_BUDGET_EXHAUSTED_TOTAL),
            plans_refused_total: r.counters(&provider::PLANS_REFUSED_TOTAL),
            switches_total: r.counters(&engine::SWITCHES_TOTAL),
            decision_unapplied_age_seconds: r.gauges(&provider::DECISION_UNAPPLIED_AGE_SECONDS),
            reconcile_duration_seconds: r
                .histograms(&provider::RECONCILE_DURATION_SECONDS, RECONCILE_BUCKETS),
            failover_phase_seconds: r
                .histograms(&operations::FAILOVER_PHASE_SECONDS, PHASE_BUCKETS),
            policy_reload_success: r.plain_gauge(&operations::POLICY_RELOAD_SUCCESS),
            policy_reload_timestamp_seconds: r
                .plain_gauge(&operations::POLICY_RELOAD_TIMESTAMP_SECONDS),
            webhook_deliveries_total: r.counter(&operations::WEBHOOK_DELIVERIES_TOTAL),
            log_lines_dropped_total: r.counter(&operations::LOG_LINES_DROPPED_TOTAL),
            cluster_coordinated: r.plain_gauge(&cluster::CLUSTER_COORDINATED),
            cluster_vantage_fresh: r.gauge(&cluster::CLUSTER_VANTAGE_FRESH),
            cluster_fresh_voters: r.gauges(&cluster::CLUSTER_FRESH_VOTERS),
            cluster_etcd_errors_total: r.counter(&cluster::CLUSTER_ETCD_ERRORS_TOTAL),
            cluster_etcd_requests_total: r.counter(&cluster::CLUSTER_ETCD_REQUESTS_TOTAL),
            cluster_writer: r.gauges(&writer::CLUSTER_WRITER),
            cluster_fenced_write_refusals_total: r
                .counters(&writer::CLUSTER_FENCED_WRITE_REFUSALS_TOTAL),
            cluster_late_writes_total: r.counters(&writer::CLUSTER_LATE_WRITES_TOTAL),
            dataplane_voters: r.gauges(&dataplane::DATAPLANE_VOTERS),
            dataplane_instances: r.gauges(&dataplane::DATAPLANE_INSTANCES),
            probe_series: Arc::default(),
            export: r.finish(),
        };
        // `process_*` (CPU seconds, resident and virtual memory, open and maximum file
        // descriptors, start time) from /proc; on other systems it collects nothing.
        let process = prometheus::process_collector::ProcessCollector::for_self();
        let export = &metrics.export;
        register_named(&export.registry, &export.declared, Box::new(process))
            .expect("unique metric name");
        metrics.declare_process();
        metrics.cluster_coordinated.set(1.0);
        metrics
    }

    /// Removes the gauges of a service that a reload removed or changed (its pools', its
    /// endpoints' as seen from `seen` vantage points), so none reads a stale value. Counters
    /// stay: they are history.
    pub fn forget_service(&self, policy: &Policy, seen: &[(EndpointId, VantageId)]) {
        let service = policy.service.0.as_str();
        self.lock_probe_series().remove_service(&policy.service);
        for pool in policy.pools.iter() {
            let p = pool.id.0.as_str();
            for verdict in [Verdict::Healthy, Verdict::Unhealthy, Verdict::Unknown] {
                self.pool_verdict
                    .remove_label_values(&[service, p, verdict.as_str()]);
            }
            for g in [
                &self.active_pool,
                &self.pool_flap_percent,
                &self.pool_flapping,
                &self.pool_damping_penalty,
                &self.pool_suppressed,
                &self.cluster_fresh_voters,
            ] {
                g.remove_label_values(&[service, p]);
            }
            for (e, v) in seen
                .iter()
                .filter(|(e, _)| pool.endpoints.iter().any(|x| &x.id == e))
            {
                let labels = [service, p, e.0.as_str(), v.0.as_str()];
                for g in [
                    &self.probe_success,
                    &self.probe_duration_seconds,
                    &self.probe_http_status_code,
                    &self.probe_ssl_earliest_cert_expiry,
                    &self.probe_dns_lookup_time_seconds,
                ] {
                    g.remove_label_values(&labels);
                }
            }
        }
        for g in [
            &self.velocity_available,
            &self.stale_evidence,
            &self.override_oldest_age_seconds,
            &self.decision_applied,
            &self.decision_unapplied_age_seconds,
        ] {
            g.remove_label_values(&[service]);
        }
        for action in engine::OVERRIDE_ACTIONS {
            self.overrides_active
                .remove_label_values(&[service, action.as_str()]);
        }
    }

    /// Name and type of every metric family registered, in registration order: each metric
    /// declared here plus those of [`Metrics::register_prober`] once called. A histogram `x`
    /// is exported as `x_bucket`, `x_sum` and `x_count`.
    pub fn families(&self) -> Vec<(String, MetricType)> {
        self.export
            .declared
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Exports `prober`'s loop statistics: `gslb_probe_lateness_seconds` (histogram),
    /// `gslb_probes_started_total`, `gslb_probes_late_total`, `gslb_probes_skipped_total`,
    /// `gslb_probes_in_flight`, `gslb_probe_max_in_flight`. Call once per registry; a second
    /// call is refused.
    ///
    /// # Errors
    /// These metrics are already registered.
    pub fn register_prober(&self, prober: &crate::io::probe::Prober) -> prometheus::Result<()> {
        let collector =
            probing::ProbeStatsCollector::new(prober.stats().clone(), prober.max_in_flight())?;
        register_named(
            &self.export.registry,
            &self.export.declared,
            Box::new(collector),
        )
    }

    /// The Prometheus text exposition (format 0.0.4) of every metric: families sorted by
    /// name, each family's series sorted by label values, empty families left out; the
    /// tables' families interleaved with the registry's. The whole text in hand, for tests and
    /// tools; the admin API streams [`Metrics::render_to`] instead.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Keeping every family in `out` never fails.
        let _ = self.write_families(&mut out, |_| Ok(()));
        out
    }

    /// [`Metrics::render`]'s text written to `out` a family, or a 64 KiB piece of a large
    /// one, at a time: the process holds one piece's text instead of the whole (16.9 MB at
    /// 5,000 services x 2 endpoints, 3 MB for its largest family). What `GET /metrics`
    /// streams, compressed or not.
    ///
    /// # Errors
    /// `out`'s own (the first stops the render).
    pub fn render_to(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        let mut family = String::new();
        self.write_families(&mut family, |text: &mut String| {
            out.write_all(text.as_bytes())?;
            text.clear();
            Ok(())
        })
    }

    /// Appends each family's text to `text` in the exposition's order, calling `done` after
    /// each and after each piece of a large one (it may take the text away).
    fn write_families(
        &self,
        text: &mut String,
        mut done: impl FnMut(&mut String) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let e = &self.export;
        let gathered = e.registry.gather();
        let mut tables = e.tables.iter().peekable();
        for family in &gathered {
            while let Some(t) = tables.next_if(|t| t.name() < family.name()) {
                t.encode(text, &mut done)?;
            }
            // Fails only for a family without a sample, which `gather` leaves out.
            let _ = TextEncoder::new().encode_utf8(std::slice::from_ref(family), text);
            done(text)?;
        }
        for t in tables {
            t.encode(text, &mut done)?;
        }
        Ok(())
    }
}

/// What renders and lists a metric set's families: the crate's registry, our tables (sorted
/// by name) and every family's name and type in registration order.
#[derive(Debug, Clone)]
struct Export {
    registry: Registry,
    declared: Arc<Mutex<Vec<(String, MetricType)>>>,
    tables: Arc<[Box<dyn table::Encode>]>,
}

/// The registry and tables being filled by [`Metrics::new`] and the families declared so far.
#[derive(Default)]
struct Registrar {
    registry: Registry,
    declared: Arc<Mutex<Vec<(String, MetricType)>>>,
    strings: Arc<strings::Strings>,
    tables: RefCell<Vec<Box<dyn table::Encode>>>,
}

impl Registrar {
    /// A table of `f` (see [`Table::new`]), declared.
    fn table<C: Cell + std::fmt::Debug>(&self, f: &Family, buckets: &'static [f64]) -> Table<C> {
        let t = Table::new(f, buckets, self.strings.clone());
        self.tables.borrow_mut().push(Box::new(t.clone()));
        let kind = match C::KIND {
            "counter" => MetricType::COUNTER,
            "histogram" => MetricType::HISTOGRAM,
            _ => MetricType::GAUGE,
        };
        self.declared
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((f.name.to_owned(), kind));
        t
    }

    fn gauges(&self, f: &Family) -> Table<GaugeCell> {
        self.table(f, &[])
    }

    fn counters(&self, f: &Family) -> Table<CounterCell> {
        self.table(f, &[])
    }

    fn histograms(&self, f: &Family, buckets: &'static [f64]) -> Table<HistogramCell> {
        self.table(f, buckets)
    }

    /// The registry, the tables sorted by name, the families declared.
    fn finish(self) -> Export {
        let mut tables = self.tables.into_inner();
        tables.sort_by_key(|t| t.name());
        Export {
            registry: self.registry,
            declared: self.declared,
            tables: tables.into(),
        }
    }

    /// Registers `c` (see [`register_named`]) and hands it back.
    fn register<C: Collector + Clone + 'static>(&self, c: C) -> C {
        register_named(&self.registry, &self.declared, Box::new(c.clone()))
            .expect("unique metric name");
        c
    }

    fn gauge(&self, f: &Family) -> GaugeVec {
        self.register(
            GaugeVec::new(Opts::new(f.name, f.help), f.labels).expect("static metric definition"),
        )
    }

    fn counter(&self, f: &Family) -> IntCounterVec {
        self.register(
            IntCounterVec::new(Opts::new(f.name, f.help), f.labels)
                .expect("static metric definition"),
        )
    }

    /// A gauge without labels (`f.labels` is empty).
    fn plain_gauge(&self, f: &Family) -> Gauge {
        self.register(Gauge::new(f.name, f.help).expect("static metric definition"))
    }
}

/// Registers `c` and records its families' names and types in `declared` (a vector without
/// label values still collects as an empty family, so the type is known before any sample).
fn register_named(
    registry: &Registry,
    declared: &Mutex<Vec<(String, MetricType)>>,
    c: Box<dyn Collector>,
) -> prometheus::Result<()> {
    let names: Vec<_> = c
        .collect()
        .iter()
        .map(|f| (f.name().to_owned(), f.get_field_type()))
        .collect();
    registry.register(c)?;
    declared
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .extend(names);
    Ok(())
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod recording_tests;
#[cfg(test)]
mod table_tests;
#[cfg(test)]
mod tests;
