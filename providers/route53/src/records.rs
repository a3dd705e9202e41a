//! The failover pair's records: reading them with one `ListResourceRecordSets`, recognising
//! ours among what Route 53 returns, building the record a binding asks for, and saying how a
//! listed record differs from it.
//!
//! Pure helpers apart from [`list_pair`]; nothing here writes.

use aws_sdk_route53::types::{
    AliasTarget, ResourceRecord, ResourceRecordSet, ResourceRecordSetFailover, RrType,
};
use gslb_provider::ProviderError;

use crate::Route53Binding;
use crate::api::Api;

/// The failover role of pool `index`: 0 is PRIMARY, every other SECONDARY.
pub(crate) fn role(index: usize) -> ResourceRecordSetFailover {
    if index == 0 {
        ResourceRecordSetFailover::Primary
    } else {
        ResourceRecordSetFailover::Secondary
    }
}

/// A DNS name as Route 53 compares it: without the trailing dot, with `\ooo` octal escapes
/// (Route 53 returns e.g. `\052` for `*`) and `\c` escapes undone, ASCII letters lowercased.
pub(crate) fn normalize_name(name: &str) -> String {
    let name = name.strip_suffix('.').unwrap_or(name);
    let bytes = name.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\\' {
            let digits = bytes
                .get(i + 1..i + 4)
                .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
            if let Some(d) = digits {
                let value = d.iter().fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'));
                if let Ok(byte) = u8::try_from(value) {
                    out.push(byte);
                    i += 4;
                    continue;
                }
            }
            if let Some(&next) = bytes.get(i + 1) {
                out.push(next);
                i += 2;
                continue;
            }
        }
        out.push(b);
        i += 1;
    }
    String::from_utf8_lossy(&out).to_ascii_lowercase()
}

/// Whether a listed record has the binding's name and type.
fn same_name_and_type(rrs: &ResourceRecordSet, binding: &Route53Binding) -> bool {
    rrs.r#type.as_str() == binding.record_type
        && normalize_name(&rrs.name) == normalize_name(&binding.record_name)
}

/// Lists the binding's records: one `ListResourceRecordSets` starting at (name, type), paging
/// on only while the page ends inside our name and type. Returns, per pool in binding order,
/// the record with that pool's set identifier exactly as listed (so it can be the DELETE of a
/// compare-and-swap), or `None`.
///
/// # Errors
/// As [`Api::call`]; `NoSuchHostedZone` is [`ProviderError::NotFound`].
pub(crate) async fn list_pair(
    api: &Api,
    binding: &Route53Binding,
) -> Result<Vec<Option<ResourceRecordSet>>, ProviderError> {
    Ok(split_pair(binding, list_name_and_type(api, binding).await?).0)
}

/// Every record listed with the binding's name and type, split into the pools' records (per
/// pool in binding order, as [`list_pair`]) and the others: records of that name and type
/// whose set identifier is no pool's (e.g. a pair made by Terraform with other identifiers).
pub(crate) fn split_pair(
    binding: &Route53Binding,
    mut listed: Vec<ResourceRecordSet>,
) -> (Vec<Option<ResourceRecordSet>>, Vec<ResourceRecordSet>) {
    let pools = binding
        .pools
        .iter()
        .map(|pool| {
            let at = listed
                .iter()
                .position(|r| r.set_identifier.as_deref() == Some(&pool.set_identifier))?;
            Some(listed.remove(at))
        })
        .collect();
    (pools, listed)
}

/// Lists every record with the binding's name and type: one `ListResourceRecordSets`
/// starting at (name, type), paging on only while the page ends inside that name and type.
///
/// # Errors
/// As [`Api::call`]; `NoSuchHostedZone` is [`ProviderError::NotFound`].
pub(crate) async fn list_name_and_type(
    api: &Api,
    binding: &Route53Binding,
) -> Result<Vec<ResourceRecordSet>, ProviderError> {
    let rr_type = RrType::from(binding.record_type.as_str());
    let mut start = (binding.record_name.clone(), rr_type, None::<String>);
    let mut ours = Vec::new();
    loop {
        let (name, ty, id) = start.clone();
        let out = api
            .call("ListResourceRecordSets", |c| {
                c.list_resource_record_sets()
                    .hosted_zone_id(&binding.hosted_zone_id)
                    .start_record_name(name.clone())
                    .start_record_type(ty.clone())
                    .set_start_record_identifier(id.clone())
                    .send()
            })
            .await?;
        ours.extend(
            out.resource_record_sets
                .into_iter()
                .filter(|r| same_name_and_type(r, binding)),
        );
        let next = match (out.is_truncated, out.next_record_name, out.next_record_type) {
            (true, Some(name), Some(ty)) => (name, ty, out.next_record_identifier),
            _ => break,
        };
        let still_ours = next.1.as_str() == binding.record_type
            && normalize_name(&next.0) == normalize_name(&binding.record_name);
        if !still_ours {
            break;
        }
        start = next;
    }
    Ok(ours)
}

/// The record pool `index` of `binding` should be, pointing at health check `check_id`: an
/// Alias record (no TTL, Route 53 uses the target's) when the pool has an Alias target, else
/// a record with the pool's values and the binding's TTL.
///
/// # Errors
/// [`ProviderError::Invalid`] when the binding cannot make a record (a field the SDK
/// requires is empty; [`Route53Binding::validate`] catches these first).
pub(crate) fn desired_record(
    binding: &Route53Binding,
    index: usize,
    check_id: &str,
) -> Result<ResourceRecordSet, ProviderError> {
    let pool = &binding.pools[index];
    let invalid = |e: aws_sdk_route53::error::BuildError| {
        ProviderError::Invalid(format!("record {index}: {e}"))
    };
    let record = ResourceRecordSet::builder()
        .name(&binding.record_name)
        .r#type(RrType::from(binding.record_type.as_str()))
        .set_identifier(&pool.set_identifier)
        .failover(role(index))
        .health_check_id(check_id);
    let record = match &pool.alias {
        Some(alias) => record.alias_target(
            AliasTarget::builder()
                .dns_name(&alias.dns_name)
                .hosted_zone_id(&alias.hosted_zone_id)
                .evaluate_target_health(alias.evaluate_target_health)
                .build()
                .map_err(invalid)?,
        ),
        None => {
            let values = pool
                .values
                .iter()
                .map(|v| ResourceRecord::builder().value(v).build().map_err(invalid))
                .collect::<Result<Vec<_>, _>>()?;
            record
                .ttl(i64::try_from(binding.ttl.as_secs()).unwrap_or(i64::MAX))
                .set_resource_records(Some(values))
        }
    };
    record.build().map_err(invalid)
}

/// What a record answers with, in words: `Alias to <name>` or `values`.
pub(crate) fn kind(rrs: &ResourceRecordSet) -> String {
    match &rrs.alias_target {
        Some(a) => format!("an Alias record to {}", normalize_name(&a.dns_name)),
        None => "a record with values".to_owned(),
    }
}

/// Whether turning `listed` into `desired` converts an Alias record into one with values or
/// back, which provisioning does only for a record named by `--adopt`.
pub(crate) fn converts_kind(listed: &ResourceRecordSet, desired: &ResourceRecordSet) -> bool {
    listed.alias_target.is_some() != desired.alias_target.is_some()
}

/// How `listed` differs from `desired`, in words, or `None` when Route 53 would consider
/// them the same record (names compared normalised, values as a set, an Alias target by
/// normalised DNS name, hosted zone id and `EvaluateTargetHealth`).
pub(crate) fn drift(listed: &ResourceRecordSet, desired: &ResourceRecordSet) -> Option<String> {
    let mut diffs = Vec::new();
    let word = |f: &Option<ResourceRecordSetFailover>| {
        f.as_ref()
            .map_or("no failover role", |f| f.as_str())
            .to_owned()
    };
    if listed.failover != desired.failover {
        diffs.push(format!(
            "role {}, want {}",
            word(&listed.failover),
            word(&desired.failover)
        ));
    }
    if converts_kind(listed, desired) {
        diffs.push(format!("{}, want {}", kind(listed), kind(desired)));
    } else if let (Some(l), Some(d)) = (&listed.alias_target, &desired.alias_target) {
        diffs.extend(alias_drift(l, d));
    } else {
        if listed.ttl != desired.ttl {
            let secs = |t: Option<i64>| t.map_or_else(|| "none".to_owned(), |t| format!("{t}s"));
            diffs.push(format!(
                "TTL {}, want {}",
                secs(listed.ttl),
                secs(desired.ttl)
            ));
        }
        if sorted_values(listed) != sorted_values(desired) {
            diffs.push(format!(
                "values {}, want {}",
                sorted_values(listed).join(" "),
                sorted_values(desired).join(" ")
            ));
        }
    }
    if listed.health_check_id != desired.health_check_id {
        diffs.push(format!(
            "health check {}, want {}",
            listed.health_check_id.as_deref().unwrap_or("none"),
            desired.health_check_id.as_deref().unwrap_or("none")
        ));
    }
    let routing_extras = listed.weight.is_some()
        || listed.region.is_some()
        || listed.geo_location.is_some()
        || listed.multi_value_answer.is_some()
        || listed.traffic_policy_instance_id.is_some()
        || listed.cidr_routing_config.is_some()
        || listed.geo_proximity_location.is_some();
    if routing_extras {
        diffs.push("has routing settings other than failover".to_owned());
    }
    if diffs.is_empty() {
        None
    } else {
        Some(diffs.join("; "))
    }
}

/// How two Alias targets differ, in words.
fn alias_drift(listed: &AliasTarget, desired: &AliasTarget) -> Vec<String> {
    let mut diffs = Vec::new();
    if normalize_name(&listed.dns_name) != normalize_name(&desired.dns_name) {
        diffs.push(format!(
            "Alias to {}, want {}",
            normalize_name(&listed.dns_name),
            normalize_name(&desired.dns_name)
        ));
    }
    if listed.hosted_zone_id != desired.hosted_zone_id {
        diffs.push(format!(
            "Alias hosted zone {}, want {}",
            listed.hosted_zone_id, desired.hosted_zone_id
        ));
    }
    if listed.evaluate_target_health != desired.evaluate_target_health {
        diffs.push(format!(
            "evaluate_target_health {}, want {}",
            listed.evaluate_target_health, desired.evaluate_target_health
        ));
    }
    diffs
}

fn sorted_values(rrs: &ResourceRecordSet) -> Vec<&str> {
    let mut values: Vec<&str> = rrs.resource_records().iter().map(|r| r.value()).collect();
    values.sort_unstable();
    values
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Route53Pool;
    use std::time::Duration;

    fn binding() -> Route53Binding {
        Route53Binding {
            hosted_zone_id: "Z1".into(),
            record_name: "API.example.com".into(),
            record_type: "A".into(),
            ttl: Duration::from_secs(60),
            pools: vec![
                Route53Pool {
                    set_identifier: "seoul".into(),
                    values: vec!["192.0.2.1".into(), "192.0.2.3".into()],
                    alias: None,
                },
                Route53Pool {
                    set_identifier: "tokyo".into(),
                    values: vec!["192.0.2.2".into()],
                    alias: None,
                },
            ],
        }
    }

    #[test]
    fn names_compare_like_route53() {
        assert_eq!(normalize_name("api.Example.com."), "api.example.com");
        assert_eq!(normalize_name("\\052.example.com."), "*.example.com");
        assert_eq!(normalize_name("a\\.b.example.com"), "a.b.example.com");
        assert_eq!(normalize_name("x\\"), "x\\");
    }

    #[test]
    fn a_listed_copy_of_the_desired_record_has_no_drift() {
        let want = desired_record(&binding(), 0, "hc-1").unwrap();
        let mut listed = want.clone();
        listed.name = "api.example.com.".into();
        listed.resource_records.as_mut().unwrap().reverse();
        assert!(same_name_and_type(&listed, &binding()));
        assert_eq!(drift(&listed, &want), None);
    }

    #[test]
    fn drift_names_each_difference() {
        let want = desired_record(&binding(), 0, "hc-1").unwrap();
        let mut listed = desired_record(&binding(), 1, "hc-2").unwrap();
        listed.ttl = Some(300);
        listed.weight = Some(1);
        let words = drift(&listed, &want).unwrap();
        for needle in ["role", "TTL", "values", "health check", "routing settings"] {
            assert!(words.contains(needle), "{needle} in {words}");
        }
    }

    fn alias_binding() -> Route53Binding {
        let mut b = binding();
        for (pool, name) in b.pools.iter_mut().zip(["seoul-alb", "tokyo-alb"]) {
            pool.values.clear();
            pool.alias = Some(crate::Route53Alias {
                dns_name: format!("{name}.elb.amazonaws.com"),
                hosted_zone_id: "ZELB".into(),
                evaluate_target_health: false,
            });
        }
        b
    }

    #[test]
    fn an_alias_record_matching_the_binding_is_not_drift() {
        let want = desired_record(&alias_binding(), 0, "hc-1").unwrap();
        assert_eq!(want.ttl, None, "an Alias record has no TTL");
        assert!(want.resource_records.is_none());
        let mut listed = want.clone();
        listed.name = "api.example.com.".into();
        let target = listed.alias_target.as_mut().unwrap();
        target.dns_name = "SEOUL-ALB.elb.amazonaws.com.".into();
        assert_eq!(drift(&listed, &want), None);
        let target = listed.alias_target.as_mut().unwrap();
        target.evaluate_target_health = true;
        target.hosted_zone_id = "ZOTHER".into();
        let words = drift(&listed, &want).unwrap();
        assert!(
            words.contains("evaluate_target_health true, want false")
                && words.contains("Alias hosted zone ZOTHER, want ZELB"),
            "{words}"
        );
    }

    #[test]
    fn alias_to_values_is_a_kind_conversion() {
        let alias = desired_record(&alias_binding(), 0, "hc-1").unwrap();
        let values = desired_record(&binding(), 0, "hc-1").unwrap();
        assert!(converts_kind(&alias, &values) && converts_kind(&values, &alias));
        assert!(!converts_kind(&alias, &alias));
        let words = drift(&alias, &values).unwrap();
        assert_eq!(
            words,
            "an Alias record to seoul-alb.elb.amazonaws.com, want a record with values"
        );
    }
}
