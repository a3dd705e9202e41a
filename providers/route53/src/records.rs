//! The failover pair's records: reading them with one `ListResourceRecordSets`, recognising
//! ours among what Route 53 returns, building the record a binding asks for, and saying how a
//! listed record differs from it.
//!
//! Pure helpers apart from [`list_pair`]; nothing here writes.

use aws_sdk_route53::types::{
    ResourceRecord, ResourceRecordSet, ResourceRecordSetFailover, RrType,
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
    Ok(binding
        .pools
        .iter()
        .map(|pool| {
            ours.iter()
                .find(|r| r.set_identifier.as_deref() == Some(&pool.set_identifier))
                .cloned()
        })
        .collect())
}

/// The record pool `index` of `binding` should be, pointing at verdict check `check_id`.
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
    let values = pool
        .values
        .iter()
        .map(|v| ResourceRecord::builder().value(v).build().map_err(invalid))
        .collect::<Result<Vec<_>, _>>()?;
    ResourceRecordSet::builder()
        .name(&binding.record_name)
        .r#type(RrType::from(binding.record_type.as_str()))
        .set_identifier(&pool.set_identifier)
        .failover(role(index))
        .ttl(i64::try_from(binding.ttl.as_secs()).unwrap_or(i64::MAX))
        .set_resource_records(Some(values))
        .health_check_id(check_id)
        .build()
        .map_err(invalid)
}

/// How `listed` differs from `desired`, in words, or `None` when Route 53 would consider
/// them the same record (name compared normalised, values as a set).
pub(crate) fn drift(listed: &ResourceRecordSet, desired: &ResourceRecordSet) -> Option<String> {
    let mut diffs = Vec::new();
    if listed.failover != desired.failover {
        diffs.push(format!(
            "role {:?}, want {:?}",
            listed.failover, desired.failover
        ));
    }
    if listed.ttl != desired.ttl {
        diffs.push(format!("TTL {:?}, want {:?}", listed.ttl, desired.ttl));
    }
    if sorted_values(listed) != sorted_values(desired) {
        diffs.push(format!(
            "values {:?}, want {:?}",
            sorted_values(listed),
            sorted_values(desired)
        ));
    }
    if listed.health_check_id != desired.health_check_id {
        diffs.push(format!(
            "health check {:?}, want {:?}",
            listed.health_check_id, desired.health_check_id
        ));
    }
    let routing_extras = listed.alias_target.is_some()
        || listed.weight.is_some()
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
                },
                Route53Pool {
                    set_identifier: "tokyo".into(),
                    values: vec!["192.0.2.2".into()],
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
}
