//! The etcd clients' transport: one connection per member, every request to one member at a
//! time (the *pinned* one), and on to the next member in `[cluster] endpoints` order as soon as
//! a request through the pinned one fails:
//! - a transport error: connection refused or reset, or the HTTP/2 keepalive unanswered (a
//!   paused or partitioned member: the connection is closed after `request_timeout`);
//! - the per-request timeout of [`Clients::kv`](super::Clients::kv);
//! - gRPC `UNAVAILABLE` (code 14), in the response's headers or a stream's trailers: the member
//!   has no leader (etcd's `require-leader`, set on every call) or is shutting down;
//! - a stream (watch, lease keepalive) that breaks.
//!
//! The failed request itself is not sent again (its body may be a stream, and a write that
//! timed out may have been applied): its caller sees the error and retries on its own cadence,
//! which now reaches a live member. etcd-client's own channel (tonic's power-of-two-choices
//! balance) keeps sending to a member that is down or paused (issue 27, defect 4: one member
//! down cost every instance its coordination for about 11 s).
//!
//! Must not: hold a lock across a call, or keep a failed member pinned.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use etcd_client::{BalancedChannelBuilder, Channel};
use http::{HeaderMap, Request, Response, Uri};
use http_body::{Body as HttpBody, Frame};
use tokio::sync::{mpsc, watch};
use tonic::body::Body;
use tonic::transport::Channel as MemberChannel;
use tonic::transport::Endpoint;
use tonic::transport::channel::Change;
use tower::util::BoxCloneSyncService;
use tower::{BoxError, Service, ServiceExt};

use super::error::ErrorCounter;

/// How many endpoint changes etcd-client may queue before the transport takes them (it sends
/// one per `[cluster] endpoints` entry at connect).
const CHANGES: usize = 64;

/// Which member takes the requests, shared by the clients of one [`Clients`](super::Clients)
/// (their members are the same `[cluster] endpoints`, in the same order): a member one client
/// found failing is left by both.
#[derive(Debug, Default)]
pub struct Pin(AtomicUsize);

impl Pin {
    /// The pinned member's index (modulo the number of members).
    pub fn member(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }

    /// Pins the member after `i` of `n`, unless another failure moved the pin already; whether
    /// this call moved it.
    pub fn leave(&self, i: usize, n: usize) -> bool {
        let n = n.max(1);
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |p| {
                (p % n == i % n).then_some((i + 1) % n)
            })
            .is_ok()
    }
}

/// Builds the failover transport for [`etcd_client::Client::connect_with_balanced_channel`]:
/// follows `pin`, counts each request in `counter` ([`ErrorCounter::requested`]).
#[derive(Debug, Clone)]
pub struct Failover {
    /// The member both clients send to.
    pub pin: Arc<Pin>,
    /// Where requests are counted.
    pub counter: ErrorCounter,
}

impl BalancedChannelBuilder for Failover {
    type Error = etcd_client::Error;

    /// The channel and the sender of its members. A task (on the current tokio runtime) adds
    /// each member etcd-client sends as a lazily connected channel; it ends when every client
    /// sharing the sender is gone.
    fn balanced_channel(
        self,
        _buffer: usize,
    ) -> Result<(Channel, mpsc::Sender<Change<Uri, Endpoint>>), Self::Error> {
        let (changes, mut received) = mpsc::channel::<Change<Uri, Endpoint>>(CHANGES);
        let (list, members) = watch::channel(Vec::new());
        tokio::spawn(async move {
            while let Some(change) = received.recv().await {
                list.send_modify(|l: &mut Vec<(Uri, MemberChannel)>| match change {
                    Change::Insert(uri, endpoint) => {
                        l.retain(|(u, _)| *u != uri);
                        l.push((uri, endpoint.connect_lazy()));
                    }
                    Change::Remove(uri) => l.retain(|(u, _)| *u != uri),
                });
            }
        });
        let members = Arc::new(Members {
            list: members,
            pin: self.pin,
            counter: self.counter,
        });
        let service = FailoverChannel { members };
        Ok((Channel::Custom(BoxCloneSyncService::new(service)), changes))
    }
}

/// The members and the pinned one.
#[derive(Debug)]
struct Members {
    list: watch::Receiver<Vec<(Uri, MemberChannel)>>,
    pin: Arc<Pin>,
    counter: ErrorCounter,
}

impl Members {
    /// The pinned member: its index and channel; waits until etcd-client has sent one.
    async fn pinned(&self) -> Result<(usize, Uri, MemberChannel), BoxError> {
        let mut list = self.list.clone();
        let members = list.wait_for(|l| !l.is_empty()).await?;
        let i = self.pin.member() % members.len();
        let (uri, channel) = members[i].clone();
        Ok((i, uri, channel))
    }

    /// A request through member `i` failed (`why`): the next member is pinned, unless another
    /// failure moved the pin already.
    fn failed(&self, i: usize, uri: &Uri, why: &dyn std::fmt::Display) {
        let n = self.list.borrow().len();
        if self.pin.leave(i, n) {
            tracing::debug!(member = %uri, error = %why, "etcd member failed; the next member takes the requests");
        }
    }
}

/// The channel every etcd-client call goes through.
#[derive(Debug, Clone)]
struct FailoverChannel {
    members: Arc<Members>,
}

type Future = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Response<Body>, BoxError>> + Send + 'static>,
>;

impl Service<Request<Body>> for FailoverChannel {
    type Response = Response<Body>;
    type Error = BoxError;
    type Future = Future;

    /// Always ready: readiness is the pinned member's, awaited in the call.
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let members = Arc::clone(&self.members);
        // The gRPC method: the path's last segment (`/etcdserverpb.KV/Range` -> `Range`).
        let method = request.uri().path().rsplit('/').next().unwrap_or_default();
        members.counter.requested(method);
        Box::pin(async move {
            let (i, uri, channel) = members.pinned().await?;
            let answered = channel.oneshot(request).await;
            match answered {
                Err(e) => {
                    members.failed(i, &uri, &e);
                    Err(e.into())
                }
                Ok(response) => {
                    if unavailable(response.headers()) {
                        members.failed(i, &uri, &"UNAVAILABLE");
                    }
                    let watched = |inner| Watched {
                        inner,
                        members,
                        member: (i, uri),
                    };
                    Ok(response.map(|inner| Body::new(watched(inner))))
                }
            }
        })
    }
}

/// Whether gRPC status `UNAVAILABLE` (14) is in `headers` (or trailers).
fn unavailable(headers: &HeaderMap) -> bool {
    headers.get("grpc-status").is_some_and(|s| s == "14")
}

/// A response body that moves the pin when it breaks or ends `UNAVAILABLE`.
struct Watched {
    inner: Body,
    members: Arc<Members>,
    member: (usize, Uri),
}

impl HttpBody for Watched {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        let polled = std::pin::Pin::new(&mut self.inner).poll_frame(cx);
        let failed = match &polled {
            Poll::Ready(Some(Err(status))) => Some(status.to_string()),
            Poll::Ready(Some(Ok(frame))) => frame
                .trailers_ref()
                .filter(|t| unavailable(t))
                .map(|_| "UNAVAILABLE".to_owned()),
            _ => None,
        };
        if let Some(why) = failed {
            let (i, uri) = &self.member;
            self.members.failed(*i, uri, &why);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_of_the_pinned_member_moves_the_pin_once_and_wraps() {
        let pin = Pin::default();
        assert!(pin.leave(0, 3), "the pinned member failed");
        assert_eq!(pin.member(), 1);
        // Another call that failed on member 0 at the same time moves nothing.
        assert!(!pin.leave(0, 3));
        assert_eq!(pin.member(), 1);
        assert!(pin.leave(1, 3));
        assert!(pin.leave(2, 3));
        assert_eq!(pin.member() % 3, 0, "after the last member, the first");
    }
}
