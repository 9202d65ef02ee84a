//! Connections: accept, read frames, decode, dispatch, answer in order. A connection handles one
//! request at a time, as Kafka does, so responses need no reordering. Anything malformed closes
//! that one connection with a logged reason; nothing a client sends can panic the broker.
//!
//! While a request is handled the connection still watches its socket: if the peer closes it
//! (end of stream, an error) the request's delayed operations end at once instead of holding
//! their slots until their deadline. Bytes that arrive instead (a pipelined request) stay in
//! the read buffer for the next turn, and the watch stops for this request.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use kafka_protocol::protocol::StrBytes;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::api::{self, encode_response, envelope, Decoded, ListenerKind, Request, RequestContext};
use super::connection_slot::NotServed;
use super::delayed::{ConnectionGone, ConnectionWatch};
use super::handlers::inter_node::{forward, timed_out};
use super::handlers::security::throttle;
use super::handlers::ROUTES;
use super::secure_connection::{Admit, Secure};
use super::shared::Broker;
use crate::io::{BoxStream, Listener};
use crate::metrics::wire::RequestTally;
use crate::metrics::RequestTimes;
use crate::protocol::frame::{read_frame, write_frame};

/// Bound on concurrent connections: past it, new ones are closed at once.
const MAX_CONNECTIONS: usize = 10_000;

/// A connection's read buffer: small requests arrive whole in one read; a request body at least
/// this large is read straight into its own buffer (tokio's `BufReader` bypasses its buffer),
/// so a larger buffer only costs zeroing it on every accept.
const READ_BUFFER: usize = 8 * 1024;

pub(super) async fn accept_loop(
    broker: Arc<Broker>,
    mut listener: Box<dyn Listener>,
    kind: ListenerKind,
    name: &str,
) {
    let mut shutdown = broker.shutdown_signal();
    // Checked at start (`check_listener_security`); a key file gone since is logged here.
    let secure = match Secure::for_listener(&broker.config, &broker.io, name) {
        Ok(secure) => Arc::new(secure),
        Err(e) => {
            tracing::error!(error = %e, "listener security unusable; not serving");
            return;
        }
    };
    let open = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    loop {
        let accepted = tokio::select! {
            biased;
            a = listener.accept() => a,
            _ = shutdown.changed() => return,
        };
        match accepted {
            Ok((stream, peer)) => {
                // Over the creation rate the acceptor waits before taking it (and the next).
                let delay = broker.accept_delay(kind, name);
                if !delay.is_zero() {
                    tracing::debug!(%peer, ?delay, "connection creation rate reached; accept delayed");
                    tokio::select! {
                        biased;
                        _ = broker.io.clock.sleep(delay) => {}
                        _ = shutdown.changed() => return,
                    }
                }
                let slot = match broker.connection_slot(kind, name, peer.ip()) {
                    Ok(slot) => slot,
                    Err(NotServed::Refused(refused)) => {
                        tracing::info!(%peer, ?refused, "connection limit reached; closing new one");
                        continue;
                    }
                    Err(NotServed::Throttled(throttle)) => {
                        // Kafka's DelayedCloseSocket: held unserved, then closed.
                        tracing::info!(%peer, ?throttle, "IP connection rate quota reached; closing after the throttle");
                        let io = broker.io.clone();
                        broker.io.spawn(async move {
                            io.clock.sleep(throttle).await;
                            drop(stream);
                        });
                        continue;
                    }
                };
                if open.load(std::sync::atomic::Ordering::SeqCst) >= MAX_CONNECTIONS {
                    tracing::warn!(%peer, "too many connections; closing new one");
                    continue;
                }
                open.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let broker = broker.clone();
                let open = open.clone();
                let secure = secure.clone();
                broker.io.clone().spawn(async move {
                    serve_connection(broker, stream, peer, kind, secure).await;
                    open.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                    drop(slot);
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                broker.io.clock.sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

async fn serve_connection(
    broker: Arc<Broker>,
    stream: BoxStream,
    peer: SocketAddr,
    kind: ListenerKind,
    secure: Arc<Secure>,
) {
    let idle = Duration::from_millis(broker.config.connections_max_idle_ms.max(1));
    let Some((stream, mut session)) = secure.open(&broker.io, stream, peer, idle).await else {
        return;
    };
    // Written straight through the read buffer (`BufReader` passes writes on): the loop reads,
    // handles and answers in turn, so no split into halves (and its lock on every poll).
    let mut conn = BufReader::with_capacity(READ_BUFFER, stream);
    let mut shutdown = broker.shutdown_signal();
    let mut out = BytesMut::with_capacity(64 * 1024);
    // Shared with every request's context: the listener's name, and the principal (taken anew
    // only when a re-authentication changed it).
    let listener: Arc<str> = Arc::from(secure.name());
    let mut principal: Arc<str> = Arc::from(session.principal());
    loop {
        let max_frame = session.max_frame(broker.config.socket_request_max_bytes);
        let frame = tokio::select! {
            biased;
            f = broker.io.timeout(idle, read_frame(&mut conn, max_frame)) => f,
            _ = shutdown.changed() => break,
        };
        let frame = match frame {
            None => {
                tracing::debug!(%peer, "closing idle connection (connections.max.idle.ms)");
                break;
            }
            Some(Ok(Some(frame))) => {
                // Diagnostics (`latency` target, see scripts/latency-breakdown).
                tracing::debug!(target: "latency", len = frame.len(), %peer, "frame read");
                frame.freeze()
            }
            Some(Ok(None)) => break,
            Some(Err(e)) => {
                tracing::warn!(%peer, reason = %e, "closing connection");
                break;
            }
        };
        match session.admit(&broker, kind, &frame, &mut out) {
            Admit::Route => {}
            Admit::Answered => {
                if let Err(e) = write_frame(&mut conn, &out).await {
                    tracing::debug!(%peer, error = %e, "write failed");
                    break;
                }
                continue;
            }
            Admit::Close(delay) => {
                // KIP-306: a failed authentication is answered (if at all) after the delay.
                tracing::info!(%peer, "authentication failed or refused; closing");
                broker.io.clock.sleep(delay).await;
                if !out.is_empty() {
                    let _ = write_frame(&mut conn, &out).await;
                }
                break;
            }
        }
        let read_at = broker.io.clock.monotonic();
        let mut note = RequestNote::default();
        let watch = ConnectionWatch::new();
        if *principal != *session.principal() {
            principal = Arc::from(session.principal());
        }
        let handled = {
            let handling = dispatch(
                &broker,
                kind,
                frame,
                (peer, &principal, &listener),
                watch.signal(),
                &mut out,
                true,
                &mut note,
            );
            tokio::pin!(handling);
            let mut watching = true;
            loop {
                tokio::select! {
                    // The handler first: a request answered at its first poll (most are) never
                    // costs a read of the socket.
                    biased;
                    handled = &mut handling => break handled,
                    peeked = conn.fill_buf(), if watching => {
                        // Only looked at, not consumed: a next request stays buffered.
                        watching = false;
                        if peeked.map_or(true, |b| b.is_empty()) {
                            // A half-closed peer may still read: the (early) answer is sent.
                            tracing::debug!(%peer, "peer closed while a request was handled");
                            watch.mark_gone();
                        }
                    }
                }
            }
        };
        let handled_at = broker.io.clock.monotonic();
        match handled {
            Ok(true) => {
                if let Err(e) = write_frame(&mut conn, &out).await {
                    tracing::debug!(%peer, error = %e, "write failed");
                    break;
                }
                tracing::debug!(target: "latency", len = out.len(), %peer, "frame written");
            }
            Ok(false) => {} // acks=0: no response
            Err(reason) => {
                if let Some((name, _)) = &note.request {
                    broker.metrics.request_error(name);
                }
                tracing::warn!(%peer, %reason, "closing connection");
                break;
            }
        }
        note.record(&broker, read_at, handled_at, watch.waited());
        if !note.throttle.is_zero() {
            // KIP-219: answered at once, then muted: no request is read until the throttle
            // ends (the client holds back too, having read throttle_time_ms).
            tokio::select! {
                biased;
                _ = broker.io.clock.sleep(note.throttle) => {}
                _ = shutdown.changed() => break,
            }
        }
    }
    let _ = conn.shutdown().await;
}

impl Broker {
    /// Answers one request exactly as a connection does: `frame` is a request without its size
    /// prefix; the answer is the whole response frame (size prefix included), `None` when the
    /// request gets no response (acks=0), or the reason the connection would be closed. `peer`
    /// stands for the client's address. For tests and the fuzzer (`fuzz/`), which drive the
    /// decoder and dispatcher without sockets; nothing is relayed to the controller.
    pub async fn handle_request(
        &self,
        frame: Bytes,
        peer: SocketAddr,
    ) -> Result<Option<Bytes>, String> {
        let mut out = BytesMut::new();
        let kind = ListenerKind::Client;
        let gone = ConnectionGone::never();
        let listener: Arc<str> =
            Arc::from(super::handlers::topics::metadata::client_listener(self));
        let anonymous: Arc<str> = Arc::from(crate::acl::ANONYMOUS);
        let caller = (peer, &anonymous, &listener);
        let mut note = RequestNote::default();
        match dispatch(self, kind, frame, caller, gone, &mut out, false, &mut note).await? {
            true => Ok(Some(out.freeze())),
            false => Ok(None),
        }
    }
}

impl Broker {
    /// Serves one connection on listener `listener` whose client wrote `input` and then
    /// closed its side, through the whole connection loop (TLS, SASL, routing), and returns
    /// what the broker wrote back. For the fuzzer (`fuzz/`, the unauthenticated path); `peer`
    /// stands for the client's address.
    pub async fn serve_replayed(
        self: &Arc<Self>,
        listener: &str,
        input: Bytes,
        peer: SocketAddr,
    ) -> Result<Vec<u8>, String> {
        let kind = if self
            .config
            .controller_listener_names
            .iter()
            .any(|n| n == listener)
        {
            ListenerKind::Controller
        } else {
            ListenerKind::Client
        };
        let secure = Arc::new(Secure::for_listener(&self.config, &self.io, listener)?);
        let written = Arc::new(std::sync::Mutex::new(Vec::new()));
        let stream = super::replayed_stream::ReplayedStream::new(input, written.clone());
        serve_connection(self.clone(), Box::new(stream), peer, kind, secure).await;
        let out = std::mem::take(&mut *written.lock().unwrap());
        Ok(out)
    }
}

/// What the connection loop learns of a request for the request metrics: set by `answer`.
#[derive(Default)]
struct RequestNote {
    /// The `request` label and version, once decoded.
    request: Option<(Cow<'static, str>, i16)>,
    /// When the handler started (the first time, for a request relayed and then handled).
    handler_started: Option<Duration>,
    /// How long the client is over its quota: nothing more is read from it for this long.
    throttle: Duration,
    /// The request is a client's another node relayed (an Envelope's): its quotas are charged
    /// and its answer carries the throttle, but this (inter-node) connection is not muted.
    enveloped: bool,
}

impl RequestNote {
    /// Counts and times an answered request; `waited`: its delayed waits (remote time).
    fn record(&self, broker: &Broker, read_at: Duration, handled_at: Duration, waited: Duration) {
        let Some((name, version)) = &self.request else {
            return; // answered by the decoder (ApiVersions fallback) or not decoded
        };
        let started = self.handler_started.unwrap_or(read_at);
        let remote = waited.min(handled_at.saturating_sub(started));
        let times = RequestTimes {
            queue: started.saturating_sub(read_at),
            local: handled_at.saturating_sub(started).saturating_sub(remote),
            remote,
            send: broker.io.clock.monotonic().saturating_sub(handled_at),
        };
        broker.metrics.request(name, *version, &times);
    }
}

/// Decodes and answers one request into `out` (a whole frame). `Ok(false)`: send nothing.
/// The route table says which handler answers on this listener (quorum RPCs and broker
/// sessions on the controller listener only); on a client listener of a node that is not the
/// active controller, metadata changes are relayed to the active controller when `relay`.
// The request's parts and the connection's outputs (answer frame, metrics note), passed once.
#[allow(clippy::too_many_arguments)]
async fn dispatch(
    broker: &Broker,
    kind: ListenerKind,
    frame: Bytes,
    (peer, principal, listener): (SocketAddr, &Arc<str>, &Arc<str>),
    gone: ConnectionGone,
    out: &mut BytesMut,
    relay: bool,
    note: &mut RequestNote,
) -> Result<bool, String> {
    let mut request = match api::decode(frame, ROUTES, kind)? {
        Decoded::Request(request) => request,
        Decoded::Answer(correlation_id, response) => {
            encode_response(out, correlation_id, 0, &response, 0)?;
            return Ok(true);
        }
    };
    if request.key == ApiKey::Envelope {
        return open_envelope(
            broker,
            *request,
            (peer, principal, listener),
            gone,
            out,
            note,
        )
        .await;
    }
    if !(relay
        && kind == ListenerKind::Client
        && forward::is_forwarded_request(request.key, &request.body))
    {
        // Handled once: take the body (a produce's is large) and the client id out instead of
        // copying them.
        let placeholder = RequestKind::ApiVersions(Default::default());
        let body = std::mem::replace(&mut request.body, placeholder);
        let client_id = std::mem::take(&mut request.client_id);
        return answer(
            broker,
            kind,
            &request,
            (body, client_id),
            (peer, principal, listener),
            gone,
            out,
            note,
        )
        .await;
    }
    // Relayed to the controller, or handled here (this node is it, or none answered within
    // the bound); handled here and refused because the leadership moved during the commit, it
    // goes to the next controller (`forward`).
    let deadline = forward::deadline(broker, &request.body);
    loop {
        let caller = (peer, &**principal);
        if let Some(relayed) = forward::forward(broker, &request, caller, deadline).await {
            *out = relayed;
            // The controller charged the client's quotas; its throttle mutes the client here.
            note.throttle = throttle::relayed(broker, request.key, request.version, out);
            return Ok(true);
        }
        if forward::expired(broker, deadline) {
            // The request's own bound passed while it waited for a controller: answered
            // REQUEST_TIMED_OUT, never carried out late.
            if let Some(response) = timed_out::response(&request.body) {
                request.encode_answer(out, &response)?;
                return Ok(true);
            }
        }
        let body = (request.body.clone(), request.client_id.clone());
        let caller = (peer, principal, listener);
        let answered = answer(
            broker,
            kind,
            &request,
            body,
            caller,
            gone.clone(),
            out,
            note,
        )
        .await;
        if !matches!(answered, Ok(true))
            || !forward::lost_control_while_handling(broker, &request, out, deadline).await
        {
            return answered;
        }
        out.clear();
    }
}

/// An Envelope (served on the controller listener only): a client's request another broker
/// relayed (`forward`). Carried out here only while this node is the active controller of the
/// epoch it was sealed for, else refused NOT_CONTROLLER (`api::envelope`); the inner answer
/// goes back inside the envelope's. A malformed envelope or inner request is refused
/// INVALID_REQUEST: the connection is the relaying broker's and carries others' requests.
async fn open_envelope(
    broker: &Broker,
    mut request: Request<'_, Broker>,
    (peer, principal, listener): (SocketAddr, &Arc<str>, &Arc<str>),
    gone: ConnectionGone,
    out: &mut BytesMut,
    note: &mut RequestNote,
) -> Result<bool, String> {
    let placeholder = RequestKind::ApiVersions(Default::default());
    let RequestKind::Envelope(sealed) = std::mem::replace(&mut request.body, placeholder) else {
        return Err("an Envelope route with another body".to_string());
    };
    let inner = match envelope::open(sealed) {
        Err(reason) => {
            tracing::debug!(%peer, %reason, "malformed envelope refused");
            Err(ResponseError::InvalidRequest)
        }
        Ok(opened) if opened.fenced(serving_epoch(broker, &opened.frame)) => {
            tracing::debug!(%peer, sealed_for = ?opened.epoch, "envelope for another controller epoch refused");
            Err(ResponseError::NotController)
        }
        Ok(opened)
            if opened.frame.len() < 2
                || opened.frame[..2] == (ApiKey::Envelope as i16).to_be_bytes() =>
        {
            Err(ResponseError::InvalidRequest)
        }
        Ok(opened) => {
            let client = opened.client.map_or(peer, |ip| SocketAddr::new(ip, 0));
            let principal = opened
                .principal
                .as_deref()
                .map_or(principal.clone(), Arc::from);
            let mut answer = BytesMut::new();
            let kind = ListenerKind::Controller;
            note.enveloped = true;
            let caller = (client, &principal, listener);
            let handling = dispatch(
                broker,
                kind,
                opened.frame,
                caller,
                gone,
                &mut answer,
                false,
                note,
            );
            match Box::pin(handling).await {
                // The answer without its size prefix.
                Ok(true) => Ok(answer.freeze().split_off(4)),
                Ok(false) => Err(ResponseError::InvalidRequest),
                Err(reason) => {
                    tracing::debug!(%peer, %reason, "enveloped request refused");
                    Err(ResponseError::InvalidRequest)
                }
            }
        }
    };
    let response = ResponseKind::Envelope(envelope::answer(inner));
    request.encode_answer(out, &response)?;
    Ok(true)
}

/// The epoch in which this node serves the enveloped request `frame`: DescribeQuorum is the
/// quorum leader's to answer (active or not yet), everything else the active controller's.
fn serving_epoch(broker: &Broker, frame: &[u8]) -> Option<u32> {
    let describes_quorum =
        frame.len() >= 2 && frame[..2] == (ApiKey::DescribeQuorum as i16).to_be_bytes();
    if describes_quorum {
        broker.quorum.leader_epoch()
    } else {
        broker.quorum.active_epoch()
    }
}

/// Runs `request`'s handler on `body` and encodes its answer into `out`.
#[allow(clippy::too_many_arguments)]
async fn answer(
    broker: &Broker,
    kind: ListenerKind,
    request: &Request<'_, Broker>,
    (body, client_id): (RequestKind, StrBytes),
    (peer, principal, listener): (SocketAddr, &Arc<str>, &Arc<str>),
    gone: ConnectionGone,
    out: &mut BytesMut,
    note: &mut RequestNote,
) -> Result<bool, String> {
    let (key, version) = (request.key, request.version);
    // Read before the body moves into the handler: one look at each produce batch's header.
    let tally = RequestTally::of(&body, version);
    let charge = throttle::Charge::of(&body, version, request.frame.len());
    note.request = Some((tally.request_name(key), version));
    note.handler_started
        .get_or_insert_with(|| broker.io.clock.monotonic());
    let ctx = RequestContext {
        version,
        listener: kind,
        trusted: kind == ListenerKind::Controller,
        forwarded: note.enveloped,
        client_id,
        peer,
        principal: principal.clone(),
        listener_name: listener.clone(),
        gone,
        deadline: forward::deadline(broker, &body),
    };
    let name_of = |id| broker.image().topic_by_id(id).map(|t| t.name.clone());
    // The handler's own time (request_percentage): its delayed waits left out.
    let (started, waited) = (broker.io.clock.monotonic(), ctx.gone.waited());
    let spent = |ctx: &RequestContext| {
        let elapsed = broker.io.clock.monotonic().saturating_sub(started);
        elapsed.saturating_sub(ctx.gone.waited().saturating_sub(waited))
    };
    let enveloped = note.enveloped;
    let Some(mut response) = (request.route.run)(broker, &ctx, body).await? else {
        // acks=0: no answer, but a producer over its quota is still muted.
        note.throttle = throttle::apply(broker, &ctx, charge, spent(&ctx), None);
        tally.count_unanswered(&broker.metrics, &name_of);
        return Ok(false);
    };
    let throttle = throttle::apply(broker, &ctx, charge, spent(&ctx), Some(&mut response));
    if !enveloped {
        note.throttle = throttle;
    }
    tally.count(&broker.metrics, &response, &name_of);
    request.encode_answer(out, &response)?;
    Ok(true)
}
