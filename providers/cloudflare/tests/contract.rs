//! The shared provider contract (`gslb_provider::contract`) against the fake Cloudflare API;
//! `providers/route53/tests/contract.rs` runs the same suite against Route 53.

use gslb_cloudflare::CloudflareProvider;
use gslb_cloudflare::fake::{Fake, ids};
use gslb_provider::contract::{self, Fault, Harness};
use serde_json::json;

struct Cf {
    fake: Fake,
    provider: CloudflareProvider,
}

impl Cf {
    async fn start() -> Self {
        let fake = Fake::start().await;
        let provider = gslb_cloudflare::fake::provider(&fake);
        Self { fake, provider }
    }
}

impl Harness for Cf {
    type P = CloudflareProvider;

    fn provider(&self) -> &CloudflareProvider {
        &self.provider
    }

    fn priority(&self) -> Vec<String> {
        gslb_cloudflare::fake::priority()
    }

    async fn make_foreign(&mut self) {
        self.fake
            .edit_pool(ids::GCP, json!({"description": "the GCP team's pool"}));
    }

    async fn inject(&mut self, fault: Fault) {
        match fault {
            Fault::Throttled => self.fake.rate_limit_for(std::time::Duration::from_secs(60)),
            Fault::ServerError => self.fake.fail_next(u32::MAX),
            Fault::AuthFailure => self.fake.auth_failure(true),
        }
    }

    async fn heal(&mut self) {
        self.fake.fail_next(0);
        self.fake.auth_failure(false);
        // The adapter remembers a Retry-After block: a fresh provider starts without one.
        self.provider = gslb_cloudflare::fake::provider(&self.fake);
        self.fake.rate_limit_for(std::time::Duration::ZERO);
    }
}

#[tokio::test]
async fn cloudflare_converges() {
    contract::converges(&mut Cf::start().await).await;
}

#[tokio::test]
async fn cloudflare_refuses_foreign_objects() {
    contract::refuses_foreign(&mut Cf::start().await).await;
}

#[tokio::test]
async fn cloudflare_classifies_faults() {
    contract::classifies_faults(&mut Cf::start().await).await;
}
