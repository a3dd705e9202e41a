//! [`Route53Account`]: what every binding on one AWS account shares: the SDK client and one
//! rate limiter. Route 53 allows five API requests per second per AWS account (Route 53
//! Developer Guide, "Quotas", "Number of requests to the Route 53 API: five requests per
//! second per AWS account"), so a limiter per binding lets six services exceed it; one per
//! account, at [`Route53Settings::requests_per_second`], cannot.

use std::sync::Arc;

use aws_config::BehaviorVersion;
use aws_sdk_route53::Client;
use aws_sdk_route53::config::Region;

use crate::Route53Settings;
use crate::api::Api;

/// The client and rate limiter of one AWS account; make one per account (per credential
/// chain) and hand it to each [`crate::Route53Provider::with_account`].
#[derive(Debug, Clone)]
pub struct Route53Account {
    pub(crate) api: Arc<Api>,
}

impl Route53Account {
    /// The account of the standard AWS credential chain (environment, shared config and
    /// credentials files, web identity, ECS and EC2 instance metadata) through `aws-config`,
    /// signing for `settings.region` and sending to `settings.endpoint_url` when set, paced at
    /// `settings.requests_per_second` for every binding together.
    pub async fn from_env(settings: &Route53Settings) -> Self {
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(settings.region.clone()));
        if let Some(url) = &settings.endpoint_url {
            loader = loader.endpoint_url(url);
        }
        let sdk = loader.load().await;
        Self::new(&Client::new(&sdk), settings)
    }

    /// The account `client` signs for, paced as `settings` says (see
    /// [`crate::Route53Provider::new`] for what is kept of the client's configuration).
    pub fn new(client: &Client, settings: &Route53Settings) -> Self {
        Self {
            api: Arc::new(Api::new(client, settings)),
        }
    }
}
