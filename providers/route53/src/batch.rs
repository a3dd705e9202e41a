//! Change batches: building one `Change`, and writing a batch as the JSON `ChangeBatch` that
//! `aws route53 change-resource-record-sets --change-batch` takes (the Route 53 API's field
//! names), so a dry run shows exactly what would be sent.

use aws_sdk_route53::types::{Change, ChangeAction, ResourceRecordSet};
use gslb_provider::ProviderError;
use serde_json::{Map, Value, json};

/// One change of a batch.
///
/// # Errors
/// [`ProviderError::Invalid`] when the SDK refuses to build it (a required field is missing).
pub(crate) fn change(
    action: ChangeAction,
    record: ResourceRecordSet,
) -> Result<Change, ProviderError> {
    Change::builder()
        .action(action)
        .resource_record_set(record)
        .build()
        .map_err(|e| ProviderError::Invalid(format!("change: {e}")))
}

/// `changes` with `comment` as a pretty-printed JSON `ChangeBatch`.
pub(crate) fn to_json(comment: &str, changes: &[Change]) -> String {
    let changes: Vec<Value> = changes
        .iter()
        .map(|c| {
            json!({
                "Action": c.action.as_str(),
                "ResourceRecordSet": c.resource_record_set.as_ref().map(record_json),
            })
        })
        .collect();
    let batch = json!({ "Comment": comment, "Changes": changes });
    serde_json::to_string_pretty(&batch).unwrap_or_else(|e| format!("(cannot show the batch: {e})"))
}

/// A record's fields as Route 53 names them; the fields a failover record can carry, and
/// `Weight`/`Region` for a foreign record being deleted.
fn record_json(r: &ResourceRecordSet) -> Value {
    let mut m = Map::new();
    m.insert("Name".into(), json!(r.name));
    m.insert("Type".into(), json!(r.r#type.as_str()));
    if let Some(id) = &r.set_identifier {
        m.insert("SetIdentifier".into(), json!(id));
    }
    if let Some(f) = &r.failover {
        m.insert("Failover".into(), json!(f.as_str()));
    }
    if let Some(w) = r.weight {
        m.insert("Weight".into(), json!(w));
    }
    if let Some(region) = &r.region {
        m.insert("Region".into(), json!(region.as_str()));
    }
    if let Some(ttl) = r.ttl {
        m.insert("TTL".into(), json!(ttl));
    }
    if let Some(values) = &r.resource_records {
        let values: Vec<Value> = values.iter().map(|v| json!({ "Value": v.value })).collect();
        m.insert("ResourceRecords".into(), Value::Array(values));
    }
    if let Some(a) = &r.alias_target {
        m.insert(
            "AliasTarget".into(),
            json!({
                "HostedZoneId": a.hosted_zone_id,
                "DNSName": a.dns_name,
                "EvaluateTargetHealth": a.evaluate_target_health,
            }),
        );
    }
    if let Some(hc) = &r.health_check_id {
        m.insert("HealthCheckId".into(), json!(hc));
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_route53::types::{AliasTarget, ResourceRecordSetFailover, RrType};

    #[test]
    fn a_batch_is_shown_with_route53_field_names() {
        let record = ResourceRecordSet::builder()
            .name("api.example.com")
            .r#type(RrType::A)
            .set_identifier("seoul")
            .failover(ResourceRecordSetFailover::Primary)
            .alias_target(
                AliasTarget::builder()
                    .dns_name("seoul-alb.elb.amazonaws.com")
                    .hosted_zone_id("ZELB")
                    .evaluate_target_health(true)
                    .build()
                    .unwrap(),
            )
            .health_check_id("hc-1")
            .build()
            .unwrap();
        let text = to_json("c", &[change(ChangeAction::Create, record).unwrap()]);
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["Comment"], "c");
        let rrs = &v["Changes"][0]["ResourceRecordSet"];
        assert_eq!(v["Changes"][0]["Action"], "CREATE");
        assert_eq!(rrs["Failover"], "PRIMARY");
        assert_eq!(rrs["AliasTarget"]["DNSName"], "seoul-alb.elb.amazonaws.com");
        assert_eq!(rrs["AliasTarget"]["EvaluateTargetHealth"], true);
        assert_eq!(rrs["HealthCheckId"], "hc-1");
        assert!(rrs.get("TTL").is_none(), "an Alias record has no TTL");
    }
}
