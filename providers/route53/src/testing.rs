//! Test helpers (feature `test-util`): SDK clients for local Route 53 emulators.
//!
//! Never used by the adapter itself. The `gslb` crate's integration tests may enable the
//! feature in their dev-dependencies to build providers against moto or ministack the same way
//! this crate's tests do.

use aws_sdk_route53::Client;
use aws_sdk_route53::config::interceptors::FinalizerInterceptorContextMut;
use aws_sdk_route53::config::{
    BehaviorVersion, ConfigBag, Credentials, Intercept, Region, RuntimeComponents,
};
use aws_sdk_route53::error::BoxError;
use aws_smithy_runtime_api::client::ser_de::{DeserializeResponse, SharedResponseDeserializer};
use aws_smithy_types::body::SdkBody;

/// A client for the emulator at `endpoint_url` (e.g. `http://127.0.0.1:5000`): region
/// `us-east-1`, static credentials `test`/`test`, and [`python_booleans`] so ministack's
/// health checks can be read.
pub fn emulator_client(endpoint_url: &str) -> Client {
    let config = aws_sdk_route53::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(endpoint_url)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new(
            "test",
            "test",
            None,
            None,
            "gslb-emulator",
        ))
        .interceptor(python_booleans())
        .build();
    Client::from_conf(config)
}

/// An interceptor that makes ministack 1.5.33's health-check answers readable.
///
/// ministack writes booleans the Python way (`<Inverted>False</Inverted>`), which
/// aws-sdk-route53 refuses (it accepts only `true`/`false`): every CreateHealthCheck,
/// GetHealthCheck, UpdateHealthCheck and ListHealthChecks answer then fails to deserialize,
/// surfacing as an unhandled service error with the success status (HTTP 200/201). When an
/// answer failed to deserialize and its body holds `>True<` or `>False<`, this lowercases them
/// and deserializes again; every other answer is left alone. It corrects spelling only: the
/// values ministack stores are read as it stores them.
pub fn python_booleans() -> impl Intercept + 'static {
    PythonBooleans
}

#[derive(Debug)]
struct PythonBooleans;

impl Intercept for PythonBooleans {
    fn name(&self) -> &'static str {
        "PythonBooleans"
    }

    fn modify_before_attempt_completion(
        &self,
        context: &mut FinalizerInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if !matches!(context.inner().output_or_error(), Some(Err(_))) {
            return Ok(());
        }
        let Some(deserializer) = cfg.load::<SharedResponseDeserializer>() else {
            return Ok(());
        };
        let Some(response) = context.inner_mut().response_mut() else {
            return Ok(());
        };
        let Some(text) = response
            .body()
            .bytes()
            .map(|b| String::from_utf8_lossy(b).into_owned())
        else {
            return Ok(());
        };
        if !text.contains(">True<") && !text.contains(">False<") {
            return Ok(());
        }
        *response.body_mut() = SdkBody::from(
            text.replace(">True<", ">true<")
                .replace(">False<", ">false<"),
        );
        let result = deserializer.deserialize_nonstreaming_with_config(response, cfg);
        context.inner_mut().set_output_or_error(result);
        Ok(())
    }
}
