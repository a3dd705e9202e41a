//! `[engine]`: the controller-wide engine settings (suspect window, canaries, the optional
//! controller-wide velocity limit).

use std::time::Duration;

use serde::Deserialize;

/// `[engine]`: what the engine decides controller-wide.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineConfig {
    /// The suspect-vantage window: every pool going down within it makes this vantage point
    /// suspect; it is also the half-life of the prober-side failure share. Default 1 min.
    #[serde(
        default = "default_suspect_window",
        with = "gslb_core::policy::duration"
    )]
    pub suspect_window: Duration,
    /// Canary targets (`https://…`, `http://…`, `tcp://host:port`) outside every policy that
    /// this vantage point probes to check its own network; all of them failing makes it
    /// suspect. Any HTTP answer passes. Default none.
    #[serde(default)]
    pub canaries: Vec<String>,
    /// How often canaries are probed. Default 10 s.
    #[serde(
        default = "default_canary_interval",
        with = "gslb_core::policy::duration"
    )]
    pub canary_interval: Duration,
    /// Controller-wide velocity limit: at most `services` automatic switches within
    /// `window`. Default off (a real regional outage moves every service of the region).
    #[serde(default)]
    pub global_velocity: Option<GlobalVelocity>,
}

/// `[engine.global_velocity]`.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GlobalVelocity {
    /// Switches allowed within the window.
    pub services: u32,
    /// The sliding window, e.g. `"10m"`.
    #[serde(with = "gslb_core::policy::duration")]
    pub window: Duration,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            suspect_window: default_suspect_window(),
            canaries: Vec::new(),
            canary_interval: default_canary_interval(),
            global_velocity: None,
        }
    }
}

impl EngineConfig {
    /// The engine's settings.
    pub fn engine_settings(&self) -> gslb_core::engine::EngineSettings {
        gslb_core::engine::EngineSettings {
            suspect_window: self.suspect_window,
            canaries: self
                .canaries
                .iter()
                .map(|c| gslb_core::model::EndpointId(c.clone()))
                .collect(),
            global_velocity: self.global_velocity.map(|g| (g.services, g.window)),
        }
    }

    /// Checks the ranges: suspect window and canary interval between 1 s and 1 h, not exactly
    /// one canary, a global velocity limit of at least 1 switch over at least 1 s, and every
    /// canary a valid endpoint ([`EngineConfig::canary_endpoints`]).
    ///
    /// # Errors
    /// The first value out of range, as `engine.<key>: reason`.
    pub(super) fn check(&self) -> Result<(), String> {
        let hour = Duration::from_secs(3600);
        if self.suspect_window < Duration::from_secs(1) || self.suspect_window > hour {
            return Err("engine.suspect_window: must be between 1s and 1h".into());
        }
        if self.canaries.len() == 1 {
            return Err(
                "engine.canaries: list at least two independent targets (or none): with one, a dead canary would hold every failover of this vantage point".into(),
            );
        }
        if self.canary_interval < Duration::from_secs(1) || self.canary_interval > hour {
            return Err("engine.canary_interval: must be between 1s and 1h".into());
        }
        if let Some(g) = self.global_velocity
            && (g.services == 0 || g.window < Duration::from_secs(1))
        {
            return Err(
                "engine.global_velocity: services must be at least 1 and window at least 1s".into(),
            );
        }
        self.canary_endpoints().map(drop)
    }

    /// The canary targets as probe endpoints, with the probe settings they use: every HTTP
    /// status passes (a canary checks reachability, not an application), 5 s timeout.
    ///
    /// # Errors
    /// A canary that is not a valid endpoint, naming `engine.canaries[i]`.
    pub fn canary_endpoints(
        &self,
    ) -> Result<
        (
            gslb_core::policy::ProbeSpec,
            Vec<gslb_core::policy::Endpoint>,
        ),
        String,
    > {
        let spec = gslb_core::policy::ProbeSpec {
            interval: self.canary_interval,
            timeout: (self.canary_interval / 2).min(Duration::from_secs(5)),
            expected_status: (100..=599).collect(),
            body_contains: None,
            host_header: None,
            tls_server_name: None,
            tls_verify: true,
            follow_redirects: false,
        };
        let endpoints = self
            .canaries
            .iter()
            .enumerate()
            .map(|(i, c)| gslb_core::policy::endpoint(c, &format!("engine.canaries[{i}]")))
            .collect::<Result<_, _>>()?;
        Ok((spec, endpoints))
    }
}

pub(super) fn default_suspect_window() -> Duration {
    Duration::from_secs(60)
}
pub(super) fn default_canary_interval() -> Duration {
    Duration::from_secs(10)
}
