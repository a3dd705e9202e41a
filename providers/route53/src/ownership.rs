//! What gslb owns in a hosted zone, decided in one place for every kind of check gslb makes
//! (verdict checks here; data-plane checks reuse it).
//!
//! - A **health check** is gslb's when its `CallerReference` starts with `gslb-`. Route 53
//!   sets the caller reference once, at `CreateHealthCheck`, and returns it with every
//!   `GetHealthCheck`, so the marker is read back with the call gslb already makes and
//!   nobody can add or remove it later. (moto 5.2.5 also round-trips health-check tags through
//!   `ChangeTagsForResource`/`ListTagsForResource`; a tag was not chosen because it costs one
//!   more call per check on every read and anyone allowed to tag can move it.)
//! - A **record** is gslb's when it has the name, type and `SetIdentifier` of a pool of the
//!   binding and carries a health check gslb owns. A record without a health check, or whose
//!   check is foreign or gone, is foreign: gslb changes it only when `--adopt` names it.

use aws_sdk_route53::types::{HealthCheck, ResourceRecordSet};
use gslb_provider::ProviderError;

use crate::api::Api;

/// The `CallerReference` prefix that marks a health check as gslb's.
pub(crate) const CALLER_REFERENCE_PREFIX: &str = "gslb-";

/// Route 53's longest `CallerReference` (CreateHealthCheck API reference: 1 to 64 characters).
const CALLER_REFERENCE_MAX: usize = 64;

/// Who owns a health check or record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Owner {
    /// gslb made it.
    Gslb,
    /// Someone else did, or gslb cannot tell; the words say why, naming the object.
    Foreign(String),
}

/// Room kept after the stem for the generation suffix `-g<u32>` (at most 12 characters).
const GENERATION_ROOM: usize = 12;

/// The stem of the caller references of one pool's verdict checks:
/// `gslb-<label>-<16 hex digits>`, the digits an FNV-1a 64 hash of `key` (the pool's zone,
/// record name, type and set identifier), `label` (e.g. the set identifier) cut and stripped
/// of non-printing characters so that stem plus [`caller_reference`]'s generation fit Route 53's
/// 64 characters. The same pool always gets the same stem, so a run that was killed or whose
/// change batch was refused finds the checks it created instead of making more.
pub(crate) fn caller_reference_stem(label: &str, key: &str) -> String {
    let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let room = CALLER_REFERENCE_MAX - CALLER_REFERENCE_PREFIX.len() - 1 - 16 - GENERATION_ROOM;
    let mut label: String = label.chars().filter(|c| c.is_ascii_graphic()).collect();
    while label.len() > room {
        label.pop();
    }
    format!("{CALLER_REFERENCE_PREFIX}{label}-{hash:016x}")
}

/// Generation `generation` of `stem`: `<stem>-g<generation>`. A new generation is needed
/// only when Route 53 refuses an earlier one (`HealthCheckAlreadyExists`: the caller
/// reference of a deleted check cannot be used again).
pub(crate) fn caller_reference(stem: &str, generation: u32) -> String {
    format!("{stem}-g{generation}")
}

/// The generation of `reference` when it is one of `stem`'s, else `None`.
pub(crate) fn generation_of(stem: &str, reference: &str) -> Option<u32> {
    reference
        .strip_prefix(stem)?
        .strip_prefix("-g")?
        .parse()
        .ok()
}

/// Whether gslb made health check `hc` (its `CallerReference` prefix).
pub(crate) fn check_owner(hc: &HealthCheck) -> Owner {
    if hc.caller_reference.starts_with(CALLER_REFERENCE_PREFIX) {
        Owner::Gslb
    } else {
        Owner::Foreign(format!(
            "health check {} is not gslb's (CallerReference {:?} does not start with {:?})",
            hc.id, hc.caller_reference, CALLER_REFERENCE_PREFIX
        ))
    }
}

/// Reads health check `id` with `GetHealthCheck`.
///
/// # Errors
/// As [`Api::call`] (`NoSuchHealthCheck` is [`ProviderError::NotFound`]);
/// [`ProviderError::Invalid`] when Route 53 answers with no check.
pub(crate) async fn read_check(api: &Api, id: &str) -> Result<HealthCheck, ProviderError> {
    let out = api
        .call("GetHealthCheck", |c| {
            c.get_health_check().health_check_id(id).send()
        })
        .await?;
    out.health_check.ok_or_else(|| {
        ProviderError::Invalid(format!("GetHealthCheck {id}: response has no health check"))
    })
}

/// Who owns listed record `rrs`, and its health check as read (when it has one that exists).
/// One `GetHealthCheck` when the record carries a check.
///
/// # Errors
/// As [`read_check`].
pub(crate) async fn record_owner(
    api: &Api,
    rrs: &ResourceRecordSet,
) -> Result<(Owner, Option<HealthCheck>), ProviderError> {
    let what = describe(rrs);
    let Some(id) = rrs.health_check_id.as_deref() else {
        return Ok((
            Owner::Foreign(format!(
                "{what} has no health check (gslb's records always carry one of its checks)"
            )),
            None,
        ));
    };
    Ok(match read_check(api, id).await {
        Err(ProviderError::NotFound(_)) => (
            Owner::Foreign(format!(
                "{what} points at health check {id}, which no longer exists, so gslb cannot tell whose it is"
            )),
            None,
        ),
        Err(e) => return Err(e),
        Ok(hc) => match check_owner(&hc) {
            Owner::Gslb => (Owner::Gslb, Some(hc)),
            Owner::Foreign(why) => (Owner::Foreign(format!("{what}: {why}")), Some(hc)),
        },
    })
}

/// A listed record in an operator's words: `record api.example.com A "seoul"`.
pub(crate) fn describe(rrs: &ResourceRecordSet) -> String {
    format!(
        "record {} {} {:?}",
        crate::records::normalize_name(&rrs.name),
        rrs.r#type.as_str(),
        rrs.set_identifier.as_deref().unwrap_or("")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_route53::types::{HealthCheckConfig, HealthCheckType};

    fn check(reference: &str) -> HealthCheck {
        let cfg = HealthCheckConfig::builder()
            .r#type(HealthCheckType::Https)
            .build()
            .unwrap();
        HealthCheck::builder()
            .id("hc-1")
            .caller_reference(reference)
            .health_check_config(cfg)
            .health_check_version(1)
            .build()
            .unwrap()
    }

    #[test]
    fn only_the_gslb_prefix_owns_a_check() {
        assert_eq!(check_owner(&check("gslb-seoul-00")), Owner::Gslb);
        let Owner::Foreign(why) = check_owner(&check("terraform-20240101")) else {
            panic!("a Terraform check is foreign")
        };
        assert!(
            why.contains("hc-1") && why.contains("terraform-20240101"),
            "{why}"
        );
    }

    #[test]
    fn caller_references_are_marked_stable_and_fit_route53() {
        let stem = caller_reference_stem(&"x".repeat(100), "Z1|api.example.com|A|seoul");
        let r = caller_reference(&stem, u32::MAX);
        assert!(r.starts_with("gslb-xxx") && r.len() <= 64, "{r}");
        assert_eq!(check_owner(&check(&r)), Owner::Gslb);
        assert_eq!(generation_of(&stem, &r), Some(u32::MAX));
        assert_eq!(
            caller_reference_stem("seoul", "Z1|api.example.com|A|seoul"),
            caller_reference_stem("seoul", "Z1|api.example.com|A|seoul")
        );
        assert_ne!(
            caller_reference_stem("seoul", "Z1|api.example.com|A|seoul"),
            caller_reference_stem("seoul", "Z2|api.example.com|A|seoul")
        );
        assert_eq!(generation_of(&stem, "gslb-other-g1"), None);
    }
}
