//! The HTTP client of the admin API's drill routes. It sends what
//! [`crate::admin::drills`] documents and turns refusals into [`ClientError`]s carrying the
//! server's message; it prints nothing and decides nothing.

use std::time::Duration;

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::admin::drills::{
    ApiErrorBody, DrillCreated, DrillList, DrillRequest, EndRequest, RearmRequest, RearmResponse,
};
use crate::admin::events::EventsResponse;
use crate::config::{AdminToken, TokenError};
use crate::io::http_body::read_at_most;
use gslb_core::engine::Override;
use gslb_core::model::ServiceId;

/// How long one request may take, connection included: 30 s (the server gives up on the
/// engine loop after 10 s).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest answer read from the admin API: 64 MiB (`/v1/events` at its largest `limit`
/// is a few MiB); a larger one is refused as a protocol error, not read on.
pub const ANSWER_LIMIT: usize = 64 << 20;

/// The client failed; [`exit_code`](Self::exit_code) says how `gslb` exits.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The arguments are unusable (e.g. the admin URL). Exit code 2.
    #[error("{0}")]
    BadArguments(String),
    /// The token file is unreadable or empty, or `GSLB_ADMIN_TOKEN` is empty. Exit code 2.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// No connection or no answer. Exit code 1.
    #[error("cannot reach the admin API at {url}: {reason}")]
    Unreachable {
        /// The URL asked.
        url: String,
        /// Why, with its causes.
        reason: String,
    },
    /// The server refused, with its message. Exit code 1.
    #[error("refused by the admin API ({status} {code}): {message}")]
    Refused {
        /// HTTP status.
        status: u16,
        /// The error code (`unknown_pool`, `conflict`, `unauthorized`, ...).
        code: String,
        /// The server's message.
        message: String,
    },
    /// The drill was started but is not in effect: the engine holds it or the provider
    /// ignores it (the server's `held` or `ignored`), with the reason. Exit code 3.
    #[error("{0}")]
    NotInEffect(String),
    /// The answer is not what the API documents. Exit code 1.
    #[error("unexpected answer from {url}: {reason}")]
    Protocol {
        /// The URL asked.
        url: String,
        /// What was wrong.
        reason: String,
    },
}

impl ClientError {
    /// 2 for bad arguments or token, 3 for a drill started but not in effect, 1 for
    /// everything else the server or the network did.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::BadArguments(_) | Self::Token(_) => 2,
            Self::NotInEffect(_) => 3,
            Self::Unreachable { .. } | Self::Refused { .. } | Self::Protocol { .. } => 1,
        }
    }
}

/// A client of one admin API.
#[derive(Debug, Clone)]
pub struct AdminClient {
    base: reqwest::Url,
    token: Option<AdminToken>,
    http: reqwest::Client,
}

impl AdminClient {
    /// A client of the admin API at `base` (e.g. `http://127.0.0.1:9464`), sending `token` as
    /// a bearer token when given. Proxies from the environment are not used.
    ///
    /// # Errors
    /// [`ClientError::BadArguments`] when `base` is not an http(s) URL.
    pub fn new(base: &str, token: Option<AdminToken>) -> Result<Self, ClientError> {
        let bad = |why: String| ClientError::BadArguments(format!("--admin '{base}': {why}"));
        let mut url = reqwest::Url::parse(base).map_err(|e| bad(e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") || url.cannot_be_a_base() {
            return Err(bad("not an http(s) URL".into()));
        }
        if !url.path().ends_with('/') {
            let path = format!("{}/", url.path());
            url.set_path(&path);
        }
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .no_proxy()
            .build()
            .map_err(|e| bad(e.to_string()))?;
        Ok(Self {
            base: url,
            token,
            http,
        })
    }

    /// `POST /v1/drills`: starts a drill; the answer says whether it is in effect.
    ///
    /// # Errors
    /// [`ClientError::Refused`] with the server's reason, [`ClientError::Unreachable`],
    /// [`ClientError::Protocol`].
    pub async fn start(&self, request: &DrillRequest) -> Result<DrillCreated, ClientError> {
        let url = self.url(&["v1", "drills"]);
        self.call(self.http.post(url.clone()), &url, Some(request))
            .await
    }

    /// `GET /v1/drills`: the active drills, by id.
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub async fn list(&self) -> Result<Vec<Override>, ClientError> {
        let url = self.url(&["v1", "drills"]);
        let list: DrillList = self
            .call(self.http.get(url.clone()), &url, None::<&()>)
            .await?;
        Ok(list.overrides)
    }

    /// `DELETE /v1/drills/{id}`: ends a drill.
    ///
    /// # Errors
    /// As [`start`](Self::start); `404 not_found` when no drill has this id.
    pub async fn end(&self, id: &str, request: &EndRequest) -> Result<Override, ClientError> {
        let url = self.url(&["v1", "drills", id]);
        self.call(self.http.delete(url.clone()), &url, Some(request))
            .await
    }

    /// `POST /v1/rearm`: the services re-armed.
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub async fn rearm(&self, request: &RearmRequest) -> Result<Vec<ServiceId>, ClientError> {
        let url = self.url(&["v1", "rearm"]);
        let r: RearmResponse = self
            .call(self.http.post(url.clone()), &url, Some(request))
            .await?;
        Ok(r.rearmed)
    }

    /// `GET /v1/events`: the answer, failover timelines newest first.
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub async fn events(
        &self,
        service: Option<&ServiceId>,
        limit: usize,
    ) -> Result<EventsResponse, ClientError> {
        let mut url = self.url(&["v1", "events"]);
        {
            let mut q = url.query_pairs_mut();
            if let Some(s) = service {
                q.append_pair("service", &s.0);
            }
            q.append_pair("limit", &limit.to_string());
        }
        self.call(self.http.get(url.clone()), &url, None::<&()>)
            .await
    }

    fn url(&self, segments: &[&str]) -> reqwest::Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        url
    }

    async fn call<T: DeserializeOwned>(
        &self,
        mut builder: reqwest::RequestBuilder,
        url: &reqwest::Url,
        body: Option<&impl Serialize>,
    ) -> Result<T, ClientError> {
        if let Some(token) = &self.token
            && let Ok(mut value) = HeaderValue::try_from(format!("Bearer {}", token.expose()))
        {
            value.set_sensitive(true);
            builder = builder.header(AUTHORIZATION, value);
        }
        if let Some(body) = body {
            let json = serde_json::to_vec(body).map_err(|e| ClientError::Protocol {
                url: url.to_string(),
                reason: e.to_string(),
            })?;
            builder = builder.header(CONTENT_TYPE, "application/json").body(json);
        }
        let unreachable = |e: reqwest::Error| ClientError::Unreachable {
            url: url.to_string(),
            reason: innermost_cause(&e),
        };
        let mut response = builder.send().await.map_err(unreachable)?;
        let status = response.status();
        let body = read_at_most(&mut response, ANSWER_LIMIT)
            .await
            .map_err(unreachable)?;
        if body.truncated {
            return Err(ClientError::Protocol {
                url: url.to_string(),
                reason: format!("{status}: the answer is larger than {ANSWER_LIMIT} bytes"),
            });
        }
        let bytes = body.bytes;
        if status.is_success() {
            return serde_json::from_slice(&bytes).map_err(|e| ClientError::Protocol {
                url: url.to_string(),
                reason: format!("{status}: {e}"),
            });
        }
        Err(match serde_json::from_slice::<ApiErrorBody>(&bytes) {
            Ok(b) => ClientError::Refused {
                status: status.as_u16(),
                code: b.error,
                message: b.message,
            },
            Err(_) => ClientError::Refused {
                status: status.as_u16(),
                code: status
                    .canonical_reason()
                    .unwrap_or("error")
                    .to_lowercase()
                    .replace(' ', "_"),
                message: String::from_utf8_lossy(&bytes)
                    .trim()
                    .chars()
                    .take(300)
                    .collect(),
            },
        })
    }
}

/// The innermost cause (`Connection refused (os error 111)`, `operation timed out`): reqwest's
/// outer messages repeat the URL the caller already shows.
pub(crate) fn innermost_cause(e: &dyn std::error::Error) -> String {
    let mut innermost = e;
    while let Some(c) = innermost.source() {
        innermost = c;
    }
    innermost.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_admin_url_is_a_bad_argument() {
        for url in ["127.0.0.1:9464", "ftp://host/", "not a url"] {
            let e = AdminClient::new(url, None).expect_err(url);
            assert_eq!(e.exit_code(), 2, "{url}");
            assert!(
                e.to_string().starts_with(&format!("--admin '{url}'")),
                "{e}"
            );
        }
    }

    #[test]
    fn urls_keep_a_base_path_and_escape_ids() {
        let c = AdminClient::new("http://127.0.0.1:9464/gslb", None).expect("client");
        assert_eq!(
            c.url(&["v1", "drills", "d-1/../x"]).as_str(),
            "http://127.0.0.1:9464/gslb/v1/drills/d-1%2F..%2Fx"
        );
        let c = AdminClient::new("http://127.0.0.1:9464", None).expect("client");
        assert_eq!(
            c.url(&["v1", "rearm"]).as_str(),
            "http://127.0.0.1:9464/v1/rearm"
        );
    }
}
