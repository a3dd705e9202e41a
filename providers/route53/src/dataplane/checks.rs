//! The data-plane mode's health checks: per pool and instance two string-match checks of the
//! instance's vote URL (*vote checks*: a serve check, and an inverted drain check), per pool a
//! CALCULATED check over them (the *tally check*) that the pool's failover record carries. All
//! are gslb's: their `CallerReference` starts with gslb's prefix.

use aws_sdk_route53::types::{HealthCheck, HealthCheckConfig, HealthCheckType};
use gslb_provider::ProviderError;

use super::{Side, Voter};
use crate::api::Api;
use crate::ownership::{CALLER_REFERENCE_PREFIX, caller_reference, caller_reference_stem};

/// Every health check in the account (`ListHealthChecks`, all pages).
///
/// # Errors
/// Those of [`Api::call`].
pub(crate) async fn list_all(api: &Api) -> Result<Vec<HealthCheck>, ProviderError> {
    let mut all = Vec::new();
    let mut marker: Option<String> = None;
    loop {
        let out = api
            .call("ListHealthChecks", |c| {
                c.list_health_checks().set_marker(marker.clone()).send()
            })
            .await?;
        all.extend(out.health_checks);
        match out.next_marker.filter(|_| out.is_truncated) {
            Some(m) => marker = Some(m),
            None => return Ok(all),
        }
    }
}

/// Whether `hc` is gslb's (its `CallerReference` has gslb's prefix).
pub(crate) fn ours(hc: &HealthCheck) -> bool {
    hc.caller_reference.starts_with(CALLER_REFERENCE_PREFIX)
}

fn vote_type(v: &Voter) -> HealthCheckType {
    if v.https {
        HealthCheckType::HttpsStrMatch
    } else {
        HealthCheckType::HttpStrMatch
    }
}

/// Whether `c` probes `v`'s vote URL: same type, host, port and path.
fn probes(c: &HealthCheckConfig, v: &Voter) -> bool {
    let host = c
        .ip_address()
        .or(c.fully_qualified_domain_name())
        .unwrap_or_default();
    c.r#type == vote_type(v)
        && host.eq_ignore_ascii_case(&v.host)
        && c.port() == Some(i32::from(v.port))
        && c.resource_path() == Some(v.path.as_str())
}

/// The desired config of `v`'s vote check on `side`.
fn vote_config(
    v: &Voter,
    side: Side,
    search: &str,
    interval: i32,
    threshold: i32,
) -> Result<HealthCheckConfig, ProviderError> {
    let is_ip = v.host.parse::<std::net::IpAddr>().is_ok();
    HealthCheckConfig::builder()
        .r#type(vote_type(v))
        .set_ip_address(is_ip.then(|| v.host.clone()))
        .set_fully_qualified_domain_name((!is_ip).then(|| v.host.clone()))
        .port(i32::from(v.port))
        .resource_path(&v.path)
        .search_string(search)
        .request_interval(interval)
        .failure_threshold(threshold)
        .inverted(side.inverted())
        .set_enable_sni((v.https && !is_ip).then_some(true))
        .build()
        .map_err(|e| ProviderError::Invalid(format!("vote check config: {e}")))
}

/// What [`ensure_vote`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ensured {
    /// The check was as desired.
    Kept,
    /// The check's search string or failure threshold was corrected.
    Updated,
    /// A new check was made.
    Created,
}

/// `v`'s vote check on `side` among `listed`, read only: `Some((check, as_desired))` for
/// the gslb check of `v`'s URL with `interval` and the side's inversion (`as_desired`: its
/// search string and failure threshold are right), `None` when there is none.
pub(crate) fn find_vote<'a>(
    listed: &'a [HealthCheck],
    v: &Voter,
    (side, search): (Side, &str),
    (interval, threshold): (i32, i32),
) -> Option<(&'a HealthCheck, bool)> {
    let found = listed.iter().find(|hc| {
        ours(hc)
            && hc.health_check_config().is_some_and(|c| {
                probes(c, v)
                    && c.request_interval() == Some(interval)
                    && c.inverted().unwrap_or(false) == side.inverted()
            })
    })?;
    let same = found.health_check_config().is_some_and(|c| {
        c.search_string() == Some(search) && c.failure_threshold() == Some(threshold)
    });
    Some((found, same))
}

/// Makes `v`'s vote check on `side` exist as desired among `listed`; returns its id.
///
/// A gslb check of the same URL with another `RequestInterval` (fixed at creation) is left
/// alone and a new one made; one with another search string or failure threshold is updated
/// in place, fenced by its `HealthCheckVersion` ([`find_vote`] says which).
///
/// # Errors
/// Those of [`Api::call`].
pub(crate) async fn ensure_vote(
    api: &Api,
    listed: &[HealthCheck],
    v: &Voter,
    (side, search): (Side, &str),
    (interval, threshold): (i32, i32),
    set_identifier: &str,
) -> Result<(String, Ensured), ProviderError> {
    if let Some((hc, same)) = find_vote(listed, v, (side, search), (interval, threshold)) {
        if same {
            return Ok((hc.id.clone(), Ensured::Kept));
        }
        api.call("UpdateHealthCheck", |c| {
            c.update_health_check()
                .health_check_id(&hc.id)
                .health_check_version(hc.health_check_version)
                .search_string(search)
                .failure_threshold(threshold)
                .send()
        })
        .await?;
        return Ok((hc.id.clone(), Ensured::Updated));
    }
    let config = vote_config(v, side, search, interval, threshold)?;
    let label = format!("{set_identifier}-{}-{}", v.instance, side.word());
    let reference = new_caller_reference(&label);
    let out = api
        .call("CreateHealthCheck", |c| {
            c.create_health_check()
                .caller_reference(&reference)
                .health_check_config(config.clone())
                .send()
        })
        .await?;
    let hc = out.health_check.ok_or_else(|| {
        ProviderError::Invalid("CreateHealthCheck: response has no health check".to_owned())
    })?;
    Ok((hc.id, Ensured::Created))
}

/// The gslb CALCULATED check among `listed` whose children are exactly `children`.
pub(crate) fn find_tally<'a>(
    listed: &'a [HealthCheck],
    children: &[String],
) -> Option<&'a HealthCheck> {
    let mut want = children.to_vec();
    want.sort();
    listed.iter().find(|hc| {
        ours(hc)
            && hc.health_check_config().is_some_and(|c| {
                let mut have = c.child_health_checks().to_vec();
                have.sort();
                c.r#type == HealthCheckType::Calculated && have == want
            })
    })
}

/// Creates a permissive tally check (`HealthThreshold = 0`: always healthy) over `children`.
///
/// # Errors
/// Those of [`Api::call`].
pub(crate) async fn create_tally(
    api: &Api,
    children: &[String],
    set_identifier: &str,
) -> Result<String, ProviderError> {
    let config = HealthCheckConfig::builder()
        .r#type(HealthCheckType::Calculated)
        .health_threshold(0)
        .set_child_health_checks(Some(children.to_vec()))
        .build()
        .map_err(|e| ProviderError::Invalid(format!("tally check config: {e}")))?;
    let reference = new_caller_reference(&format!("{set_identifier}-tally"));
    let out = api
        .call("CreateHealthCheck", |c| {
            c.create_health_check()
                .caller_reference(&reference)
                .health_check_config(config.clone())
                .send()
        })
        .await?;
    out.health_check.map(|hc| hc.id).ok_or_else(|| {
        ProviderError::Invalid("CreateHealthCheck: response has no health check".to_owned())
    })
}

/// Sets the tally check's `HealthThreshold`, fenced by its version. Its children are sent
/// again unchanged (moto 5.2.5 drops a CALCULATED check's children on an update that omits
/// them; Route 53 keeps them either way).
///
/// # Errors
/// Those of [`Api::call`].
pub(crate) async fn set_threshold(
    api: &Api,
    tally: &HealthCheck,
    threshold: i32,
) -> Result<(), ProviderError> {
    let children = tally
        .health_check_config()
        .map(|c| c.child_health_checks().to_vec());
    api.call("UpdateHealthCheck", |c| {
        c.update_health_check()
            .health_check_id(&tally.id)
            .health_check_version(tally.health_check_version)
            .health_threshold(threshold)
            .set_child_health_checks(children.clone())
            .send()
    })
    .await
    .map(drop)
}

/// Whether Route 53's checkers have reported on check `id` (`GetHealthCheckStatus` lists at
/// least one observation).
///
/// # Errors
/// Those of [`Api::call`].
pub(crate) async fn has_data(api: &Api, id: &str) -> Result<bool, ProviderError> {
    let out = api
        .call("GetHealthCheckStatus", |c| {
            c.get_health_check_status().health_check_id(id).send()
        })
        .await?;
    Ok(!out.health_check_observations.is_empty())
}

/// A fresh caller reference for a data-plane check labelled `label`: gslb's prefix (so the
/// ownership rules cover it), the label, and a hash of the label and the current time. Vote
/// and tally checks are found again by listing and comparing their configuration, not by
/// reference, so each creation gets a new one (Route 53 refuses a reference used before by a
/// check since deleted).
fn new_caller_reference(label: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    caller_reference(&caller_reference_stem(label, &format!("{label}|{now}")), 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn voter() -> Voter {
        Voter {
            instance: "a".into(),
            https: true,
            host: "203.0.113.10".into(),
            port: 8443,
            path: "/v1/vote/api/seoul".into(),
        }
    }

    fn check(id: &str, reference: &str, config: HealthCheckConfig) -> HealthCheck {
        HealthCheck::builder()
            .id(id)
            .caller_reference(reference)
            .health_check_config(config)
            .health_check_version(1)
            .build()
            .expect("check")
    }

    #[test]
    fn a_vote_check_is_recognised_by_its_url() {
        let v = voter();
        let c = vote_config(&v, Side::Drain, "gslb-drain x", 30, 3).expect("config");
        assert!(probes(&c, &v));
        assert_eq!(c.inverted(), Some(true));
        let serve = vote_config(&v, Side::Serve, "gslb-serve x", 30, 3).expect("config");
        assert_eq!(
            serve.inverted(),
            Some(false),
            "the serve check is not inverted"
        );
        let listed = vec![
            check("d", "gslb-seoul-a-drain-1", c.clone()),
            check("s", "gslb-seoul-a-serve-1", serve),
        ];
        let found = |side, search| find_vote(&listed, &v, (side, search), (30, 3));
        assert_eq!(
            found(Side::Drain, "gslb-drain x").map(|(h, same)| (h.id.as_str(), same)),
            Some(("d", true))
        );
        assert_eq!(
            found(Side::Serve, "gslb-serve y").map(|(h, same)| (h.id.as_str(), same)),
            Some(("s", false))
        );
        assert_eq!(c.ip_address(), Some("203.0.113.10"));
        assert_eq!(c.enable_sni(), None, "no SNI for an IP address");
        let mut other = v.clone();
        other.path = "/v1/vote/api/tokyo".into();
        assert!(!probes(&c, &other));
        other = v.clone();
        other.https = false;
        assert!(!probes(&c, &other), "HTTP_STR_MATCH is another check");
        let mut named = v.clone();
        named.host = "Seoul.gslb.example.com".into();
        let c = vote_config(&named, Side::Drain, "gslb-drain x", 10, 3).expect("config");
        assert_eq!(
            c.fully_qualified_domain_name(),
            Some("Seoul.gslb.example.com")
        );
        assert_eq!(c.enable_sni(), Some(true));
        named.host = "seoul.gslb.example.com".into();
        assert!(probes(&c, &named), "host names compare case-insensitively");
    }

    #[test]
    fn the_tally_is_found_by_its_children_in_any_order_and_only_if_ours() {
        let tally = |children: &[&str]| {
            HealthCheckConfig::builder()
                .r#type(HealthCheckType::Calculated)
                .health_threshold(2)
                .set_child_health_checks(Some(children.iter().map(|c| (*c).to_owned()).collect()))
                .build()
                .expect("config")
        };
        let listed = vec![
            check("foreign", "terraform-1", tally(&["x", "y", "z"])),
            check("t1", "gslb-seoul-tally-1", tally(&["z", "x", "y"])),
            check("t2", "gslb-tokyo-tally-2", tally(&["x", "y"])),
        ];
        let want = ["x".to_owned(), "y".to_owned(), "z".to_owned()];
        assert_eq!(
            find_tally(&listed, &want).map(|h| h.id.as_str()),
            Some("t1")
        );
        assert_eq!(
            find_tally(&listed, &want[..2]).map(|h| h.id.as_str()),
            Some("t2")
        );
        assert!(find_tally(&listed[..1], &want).is_none(), "not gslb's");
    }
}
