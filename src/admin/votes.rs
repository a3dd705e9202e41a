//! The vote listener: `GET /v1/vote/<service>/<pool>` answers `200` with the text of this
//! instance's vote on the pool (its serve or drain string, or `gslb-abstain`), and `404` for a
//! service or pool it does not know. Route 53's string-match checks read it; nothing else is
//! served here (the admin API stays private). Over TLS when a certificate is configured
//! (Route 53 does not validate it, see `docs/route53-data-plane.md`).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;

use super::connections;
use super::tls::{CertStore, TlsError, TlsListener};
use crate::config::dataplane::DataPlaneSettings;
use crate::daemon::dataplane::VoteRegistry;

/// The vote routes over `registry`.
pub fn router(registry: VoteRegistry) -> Router {
    Router::new()
        .route("/v1/vote/{service}/{pool}", get(vote))
        .with_state(registry)
}

async fn vote(
    State(registry): State<VoteRegistry>,
    Path((service, pool)): Path<(String, String)>,
) -> (StatusCode, String) {
    match registry.answer(&service, &pool) {
        Some(body) => (StatusCode::OK, body),
        None => (StatusCode::NOT_FOUND, "gslb-unknown".to_owned()),
    }
}

/// Why the vote listener could not start.
#[derive(Debug, thiserror::Error)]
pub enum VoteServerError {
    /// The certificate or key cannot be read.
    #[error("route53.data_plane TLS: {0}")]
    Tls(#[from] TlsError),
    /// The address cannot be bound.
    #[error("binding the vote listener on {addr}: {source}")]
    Bind {
        /// `route53.data_plane.listen`.
        addr: std::net::SocketAddr,
        /// The socket error.
        source: std::io::Error,
    },
}

/// Binds `settings.listen` and serves the vote routes there (TLS with `tls_cert_file` and
/// `tls_key_file`, reloaded when they change) on tasks added to `tasks`. The listener faces
/// Route 53's checkers, so it keeps the admin API's connection bounds
/// ([`connections::Limits::default`]).
///
/// # Errors
/// See [`VoteServerError`].
pub async fn spawn(
    settings: &DataPlaneSettings,
    registry: VoteRegistry,
    tasks: &mut tokio::task::JoinSet<()>,
) -> Result<std::net::SocketAddr, VoteServerError> {
    let tls = match (&settings.tls_cert_file, &settings.tls_key_file) {
        (Some(cert), Some(key)) => {
            let store = Arc::new(CertStore::load(cert, key)?);
            let acceptor = store.acceptor()?;
            tasks.spawn(store.watch());
            Some(acceptor)
        }
        _ => None,
    };
    let addr = settings.listen;
    let bind = |source| VoteServerError::Bind { addr, source };
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(bind)?;
    let local = listener.local_addr().map_err(bind)?;
    let app = router(registry);
    tracing::info!(addr = %local, tls = tls.is_some(), "route53 data-plane vote listener on /v1/vote/<service>/<pool>");
    let limits = connections::Limits::default();
    match tls {
        Some(acceptor) => {
            let l = TlsListener::new(listener, acceptor).map_err(bind)?;
            tasks.spawn(connections::serve(l, app, limits));
        }
        None => {
            tasks.spawn(connections::serve(listener, app, limits));
        }
    }
    Ok(local)
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt as _;

    use crate::daemon::dataplane::VoteRegistry;

    /// Route 53's string-match check reads the raw body: a request that accepts gzip still
    /// gets the vote string as is (no compression on these routes, unlike the admin API's
    /// large reads).
    #[tokio::test]
    async fn a_vote_is_never_compressed_even_when_asked() {
        let app = super::router(VoteRegistry::new(std::time::Duration::from_secs(60), None));
        let request = Request::get("/v1/vote/api/seoul")
            .header("accept-encoding", "gzip, deflate, br")
            .body(Body::empty())
            .expect("request");
        let answer = app.oneshot(request).await.expect("answer");
        assert_eq!(answer.status(), 404);
        assert_eq!(answer.headers().get("content-encoding"), None);
        let body = axum::body::to_bytes(answer.into_body(), 1024)
            .await
            .expect("body");
        assert_eq!(&body[..], b"gslb-unknown");
    }

    async fn get(app: &axum::Router, path: &str) -> (u16, String) {
        let request = Request::get(path).body(Body::empty()).expect("request");
        let answer = app.clone().oneshot(request).await.expect("answer");
        let status = answer.status().as_u16();
        let body = axum::body::to_bytes(answer.into_body(), 1024)
            .await
            .expect("body");
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    /// A service's vote URL abstains until its board holds a decision, and answers
    /// `404 gslb-unknown` (no vote) once a reload removed the service.
    #[tokio::test]
    async fn a_vote_url_abstains_before_a_decision_and_goes_with_its_service() {
        use gslb_provider::Provider as _;
        let policy = gslb_core::policy::parse(
            std::path::Path::new("api.toml"),
            include_str!("../../policies/api-seoul-tokyo.toml"),
        )
        .expect("policy");
        let secrets = tempfile::tempdir().expect("tempdir");
        for pool in ["seoul", "tokyo"] {
            let secret = format!("{pool}-secret-0123456789");
            std::fs::write(secrets.path().join(format!("api.{pool}")), secret).expect("secret");
        }
        let settings: crate::config::Route53Settings = toml::from_str(&format!(
            "[modes]\napi = \"data_plane\"\n[data_plane]\ninstance = \"a\"\nlisten = \"127.0.0.1:0\"\n\
             secrets_dir = {:?}\n[[data_plane.instances]]\nname = \"a\"\nurl = \"https://127.0.0.1:9\"\n",
            secrets.path()
        ))
        .expect("settings");
        let registry = VoteRegistry::new(std::time::Duration::from_secs(60), None);
        let board = registry.board(&policy, &settings).expect("board");
        let app = super::router(registry.clone());
        assert_eq!(
            get(&app, "/v1/vote/api/seoul").await,
            (200, "gslb-abstain".into())
        );
        board.observe().await.expect("observe");
        assert_eq!(
            get(&app, "/v1/vote/api/seoul").await,
            (200, "gslb-abstain".into()),
            "read, not decided"
        );
        board.decided();
        assert_eq!(
            get(&app, "/v1/vote/api/seoul").await,
            (200, "gslb-serve seoul-secret-0123456789".into())
        );
        registry.remove("api");
        assert_eq!(
            get(&app, "/v1/vote/api/seoul").await,
            (404, "gslb-unknown".into())
        );
    }
}
