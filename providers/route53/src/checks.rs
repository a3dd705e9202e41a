//! gslb *verdict checks*: the Route 53 health checks through which gslb says whether a pool may
//! serve.
//!
//! A verdict check is `Type = CALCULATED` with no children and `HealthThreshold = 0`, so it is
//! always healthy ("at least 0 of 0 children"), and `Inverted = true` makes it always
//! unhealthy. Route 53's data plane then fails the record over on its own (AWS
//! Well-Architected REL11-BP04: rely on the data plane). gslb touches only checks it owns
//! ([`crate::ownership`]).

use aws_sdk_route53::types::{HealthCheck, HealthCheckConfig, HealthCheckType};
use gslb_provider::ProviderError;

use crate::api::Api;
use crate::ownership::{self, Owner};

/// What gslb reads from a valid verdict check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VerdictCheck {
    /// The health check id.
    pub id: String,
    /// `HealthCheckVersion`, the fence for `UpdateHealthCheck`.
    pub version: i64,
    /// Whether the check is inverted, i.e. the pool is disabled.
    pub inverted: bool,
}

/// Whether `hc` is a verdict check gslb manages, and why not.
///
/// # Errors
/// [`ProviderError::Unowned`] naming the check and what is wrong with it when it is not a
/// gslb verdict check; [`ProviderError::Invalid`] when it is one but is `Disabled` (Route 53
/// then treats it as healthy whatever `Inverted` says, so gslb could not take the pool out).
pub(crate) fn verdict(hc: &HealthCheck) -> Result<VerdictCheck, ProviderError> {
    if let Owner::Foreign(why) = ownership::check_owner(hc) {
        return Err(ProviderError::Unowned(why));
    }
    let mut wrong = Vec::new();
    let cfg = hc.health_check_config.as_ref();
    if cfg.map(|c| &c.r#type) != Some(&HealthCheckType::Calculated) {
        wrong.push(format!(
            "type is {}, not CALCULATED",
            cfg.map_or("not set", |c| c.r#type.as_str())
        ));
    }
    if cfg.is_some_and(|c| !c.child_health_checks().is_empty()) {
        wrong.push("it has child health checks".to_owned());
    }
    if cfg.and_then(|c| c.health_threshold) != Some(0) {
        wrong.push(format!(
            "HealthThreshold is {}, not 0",
            cfg.and_then(|c| c.health_threshold)
                .map_or_else(|| "not set".to_owned(), |t| t.to_string())
        ));
    }
    if !wrong.is_empty() {
        return Err(ProviderError::Unowned(format!(
            "health check {} is gslb's but not a valid verdict check: {}",
            hc.id,
            wrong.join("; ")
        )));
    }
    if cfg.and_then(|c| c.disabled) == Some(true) {
        return Err(ProviderError::Invalid(format!(
            "verdict check {} is Disabled, which Route 53 treats as healthy whatever Inverted says; \
             re-enable it",
            hc.id
        )));
    }
    Ok(VerdictCheck {
        id: hc.id.clone(),
        version: hc.health_check_version,
        inverted: cfg.and_then(|c| c.inverted).unwrap_or(false),
    })
}

/// Reads health check `id` and checks it is a verdict check.
///
/// # Errors
/// [`ProviderError::NotFound`] when it does not exist, the errors of [`verdict`], and those
/// of [`Api::call`].
pub(crate) async fn get(api: &Api, id: &str) -> Result<VerdictCheck, ProviderError> {
    verdict(&ownership::read_check(api, id).await?)
}

/// Generations of a pool's caller reference tried when Route 53 refuses one as used before.
const GENERATIONS_TRIED: u32 = 3;

/// Route 53's largest `ListHealthChecks` page (API reference: `MaxItems` up to 1000).
const LIST_PAGE: i32 = 1000;

/// A verdict check for the pool whose caller references start with `stem`
/// ([`ownership::caller_reference_stem`]): one of the pool's checks that no record in `in_use`
/// points at, valid and not inverted, left behind by a run that was killed or whose change
/// batch was refused, or else a new one. So repeated failing runs converge on one check per
/// pool instead of leaking one each. Returns the check and whether it was reused.
///
/// One `ListHealthChecks` per 1000 checks, then at most one `CreateHealthCheck` per
/// generation tried (Route 53 refuses the caller reference of a deleted check with
/// `HealthCheckAlreadyExists`; the next generation is tried, up to 3).
///
/// # Errors
/// As [`Api::call`]; [`ProviderError::Invalid`] when Route 53 answers with no check.
pub(crate) async fn reuse_or_create(
    api: &Api,
    stem: &str,
    in_use: &[&str],
) -> Result<(VerdictCheck, bool), ProviderError> {
    let mine: Vec<(u32, HealthCheck)> = list_all(api)
        .await?
        .into_iter()
        .filter_map(|hc| Some((ownership::generation_of(stem, &hc.caller_reference)?, hc)))
        .collect();
    let spare = mine.iter().find_map(|(_, hc)| {
        verdict(hc)
            .ok()
            .filter(|v| !v.inverted && !in_use.contains(&v.id.as_str()))
    });
    if let Some(check) = spare {
        return Ok((check, true));
    }
    let mut generation = mine.iter().map(|(g, _)| g + 1).max().unwrap_or(1);
    let mut tried = 1;
    loop {
        match create(api, &ownership::caller_reference(stem, generation)).await {
            Err(ProviderError::Invalid(msg))
                if msg.contains("HealthCheckAlreadyExists") && tried < GENERATIONS_TRIED =>
            {
                generation += 1;
                tried += 1;
            }
            other => return other.map(|check| (check, false)),
        }
    }
}

/// Every health check of the account, `ListHealthChecks` page by page.
async fn list_all(api: &Api) -> Result<Vec<HealthCheck>, ProviderError> {
    let mut all = Vec::new();
    let mut marker: Option<String> = None;
    loop {
        let out = api
            .call("ListHealthChecks", |c| {
                c.list_health_checks()
                    .max_items(LIST_PAGE)
                    .set_marker(marker.clone())
                    .send()
            })
            .await?;
        all.extend(out.health_checks);
        match out.next_marker.filter(|_| out.is_truncated) {
            Some(next) => marker = Some(next),
            None => return Ok(all),
        }
    }
}

/// Creates a verdict check, not inverted, with `caller_reference`. Route 53 answers a repeated
/// `caller_reference` with the same config with the existing check, so a retried create after
/// a lost response makes no second check.
///
/// # Errors
/// As [`Api::call`]; [`ProviderError::Invalid`] when Route 53 answers with no check.
async fn create(api: &Api, caller_reference: &str) -> Result<VerdictCheck, ProviderError> {
    let config = HealthCheckConfig::builder()
        .r#type(HealthCheckType::Calculated)
        .health_threshold(0)
        .set_child_health_checks(Some(Vec::new()))
        .inverted(false)
        .build()
        .map_err(|e| ProviderError::Invalid(format!("verdict check config: {e}")))?;
    let out = api
        .call("CreateHealthCheck", |c| {
            c.create_health_check()
                .caller_reference(caller_reference)
                .health_check_config(config.clone())
                .send()
        })
        .await?;
    let hc = out.health_check.ok_or_else(|| {
        ProviderError::Invalid("CreateHealthCheck: response has no health check".to_owned())
    })?;
    Ok(VerdictCheck {
        id: hc.id,
        version: hc.health_check_version,
        inverted: false,
    })
}

/// Sets `Inverted = inverted` on check `id`, fenced by `HealthCheckVersion = version`.
///
/// # Errors
/// [`ProviderError::Conflict`] when the version moved (`HealthCheckVersionMismatch`), and the
/// other errors of [`Api::call`].
pub(crate) async fn set_inverted(
    api: &Api,
    id: &str,
    version: i64,
    inverted: bool,
) -> Result<(), ProviderError> {
    api.call("UpdateHealthCheck", |c| {
        c.update_health_check()
            .health_check_id(id)
            .health_check_version(version)
            .inverted(inverted)
            .send()
    })
    .await
    .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(
        reference: &str,
        ty: HealthCheckType,
        threshold: Option<i32>,
        children: &[&str],
    ) -> HealthCheck {
        let cfg = HealthCheckConfig::builder()
            .r#type(ty)
            .set_health_threshold(threshold)
            .set_child_health_checks(Some(children.iter().map(|s| s.to_string()).collect()))
            .inverted(true)
            .build()
            .unwrap();
        HealthCheck::builder()
            .id("hc-1")
            .caller_reference(reference)
            .health_check_config(cfg)
            .health_check_version(7)
            .build()
            .unwrap()
    }

    #[test]
    fn a_gslb_verdict_check_is_read() {
        let got = verdict(&check(
            "gslb-seoul-1",
            HealthCheckType::Calculated,
            Some(0),
            &[],
        ))
        .unwrap();
        assert_eq!(
            got,
            VerdictCheck {
                id: "hc-1".into(),
                version: 7,
                inverted: true
            }
        );
    }

    #[test]
    fn other_checks_are_unowned_and_say_why() {
        let cases = [
            (
                check("terraform-1", HealthCheckType::Calculated, Some(0), &[]),
                "CallerReference",
            ),
            (
                check("gslb-a", HealthCheckType::Https, None, &[]),
                "CALCULATED",
            ),
            (
                check("gslb-a", HealthCheckType::Calculated, Some(1), &["c"]),
                "child",
            ),
            (
                check("gslb-a", HealthCheckType::Calculated, Some(1), &[]),
                "HealthThreshold",
            ),
        ];
        let Err(ProviderError::Unowned(foreign)) = verdict(&cases[0].0) else {
            panic!("a Terraform check is foreign")
        };
        assert!(
            !foreign.contains("CALCULATED") && foreign.matches("hc-1").count() == 1,
            "says why once: {foreign}"
        );
        for (hc, why) in cases {
            match verdict(&hc) {
                Err(ProviderError::Unowned(msg)) => {
                    assert!(msg.contains("hc-1") && msg.contains(why), "{msg}");
                    assert!(!msg.contains("Some(") && !msg.contains("None"), "{msg}");
                }
                other => panic!("expected Unowned for {why}, got {other:?}"),
            }
        }
    }
}
