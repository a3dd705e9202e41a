//! The shared provider contract (`gslb_provider::contract`) against Route 53: convergence and
//! foreign objects on moto 5.2.5 (started on 127.0.0.1 by the test), faults from scripted
//! answers (`aws-smithy-mocks`), because moto cannot throttle or refuse credentials.
//! `providers/cloudflare/tests/contract.rs` runs the same suite against the fake Cloudflare
//! API.

mod emulator_support;

use aws_sdk_route53::Client;
use aws_sdk_route53::types::{
    Change, ChangeAction, ChangeBatch, HealthCheckConfig, HealthCheckType,
};
use aws_smithy_mocks::{RuleMode, mock, mock_client};
use emulator_support::emulators::{Emulator, Kind};
use emulator_support::{binding, client, hosted_zone, records, settings};
use gslb_provider::contract::{self, Fault, Harness};
use gslb_route53::{Route53Provider, Route53Settings};

/// A Route 53 error body as sent on the wire (restXml `ErrorResponse`), as in
/// `tests/mock_support` (not included here: both support modules load `fixture.rs`).
fn error_body(code: &str, message: &str) -> String {
    format!(
        "<?xml version=\"1.0\"?>\n<ErrorResponse xmlns=\"https://route53.amazonaws.com/doc/2013-04-01/\">\
         <Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error>\
         <RequestId>00000000-0000-0000-0000-000000000000</RequestId></ErrorResponse>"
    )
}

struct R53 {
    _moto: Emulator,
    raw: Client,
    zone: String,
    endpoint: String,
    provider: Route53Provider,
}

impl R53 {
    async fn start() -> Self {
        let moto = Emulator::start(Kind::Moto);
        let endpoint = moto.endpoint();
        let raw = client(&endpoint, vec![]);
        let zone = hosted_zone(&raw).await;
        let provider = Route53Provider::new(client(&endpoint, vec![]), settings(), binding(&zone));
        provider.provision().await.expect("provision");
        Self {
            _moto: moto,
            raw,
            zone,
            endpoint,
            provider,
        }
    }
}

impl Harness for R53 {
    type P = Route53Provider;

    fn provider(&self) -> &Route53Provider {
        &self.provider
    }

    fn priority(&self) -> Vec<String> {
        vec!["seoul".into(), "tokyo".into()]
    }

    /// Points the PRIMARY record at a health check another team made (its caller reference
    /// does not start with `gslb-`).
    async fn make_foreign(&mut self) {
        let check = self
            .raw
            .create_health_check()
            .caller_reference(format!("team-x-{}", std::process::id()))
            .health_check_config(
                HealthCheckConfig::builder()
                    .r#type(HealthCheckType::Calculated)
                    .health_threshold(0)
                    .set_child_health_checks(Some(vec![]))
                    .build()
                    .expect("config"),
            )
            .send()
            .await
            .expect("foreign check");
        let id = check.health_check.expect("check").id;
        let mut primary = records(&self.raw, &self.zone)
            .await
            .into_iter()
            .find(|r| r.set_identifier.as_deref() == Some("seoul"))
            .expect("seoul record");
        primary.health_check_id = Some(id);
        let change = Change::builder()
            .action(ChangeAction::Upsert)
            .resource_record_set(primary)
            .build()
            .expect("change");
        self.raw
            .change_resource_record_sets()
            .hosted_zone_id(&self.zone)
            .change_batch(
                ChangeBatch::builder()
                    .changes(change)
                    .build()
                    .expect("batch"),
            )
            .send()
            .await
            .expect("upsert");
    }

    /// Swaps in a provider whose every `ListResourceRecordSets` gets the fault's answer, as
    /// Route 53 sends it on the wire; one attempt, so no in-place retries hide the class.
    async fn inject(&mut self, fault: Fault) {
        let (status, body) = match fault {
            Fault::Throttled => (400, error_body("Throttling", "Rate exceeded")),
            Fault::ServerError => (
                500,
                error_body("InternalFailure", "We encountered an internal error."),
            ),
            Fault::AuthFailure => (
                403,
                error_body(
                    "AccessDenied",
                    "not authorized to perform: route53:ListResourceRecordSets",
                ),
            ),
        };
        let list = mock!(Client::list_resource_record_sets)
            .sequence()
            .http_status(status, Some(body))
            .repeatedly()
            .build();
        let one_try = Route53Settings {
            max_attempts: 1,
            ..settings()
        };
        self.provider = Route53Provider::new(
            mock_client!(aws_sdk_route53, RuleMode::MatchAny, [&list]),
            one_try,
            binding(&self.zone),
        );
    }

    async fn heal(&mut self) {
        self.provider = Route53Provider::new(
            client(&self.endpoint, vec![]),
            settings(),
            binding(&self.zone),
        );
    }
}

#[tokio::test]
async fn route53_converges() {
    contract::converges(&mut R53::start().await).await;
}

#[tokio::test]
async fn route53_refuses_foreign_objects() {
    contract::refuses_foreign(&mut R53::start().await).await;
}

#[tokio::test]
async fn route53_classifies_faults() {
    contract::classifies_faults(&mut R53::start().await).await;
}
