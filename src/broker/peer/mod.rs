//! Outbound connections to other nodes' controller listeners: one [`Link`] per peer address,
//! pipelining requests on one TCP connection, matching responses by correlation id,
//! reconnecting with exponential backoff. Everything is bounded: the queue of calls waiting
//! to be written ([`QUEUE`]) and the calls in flight ([`IN_FLIGHT`]); a call that does not fit
//! fails at once (the quorum core retries what matters, forwarded requests answer an error).
//!
//! A link to a secured listener runs TLS and SASL on each new connection first ([`dial`]); a
//! refused login is logged as the configuration error it is, and retried at the slowest pace.
//! When the other node's listener limits a SASL session (`connections.max.reauth.ms`, KIP-368)
//! the link logs in again on the same connection before the session ends, as Kafka's clients
//! do (at 85–95 % of it): it stops writing calls, lets the ones in flight be answered, then
//! sends SaslHandshake and SaslAuthenticate like calls. Without that the other node would close
//! the connection at the first request past the session's end, failing the calls in flight.
//!
//! A link carries raw frames (a request without its size prefix; the link writes the
//! correlation id), so the same link carries forwarded client requests, byte for byte inside
//! their Envelope.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::sync::watch;
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use tokio::io::{AsyncWriteExt, BufReader, WriteHalf};
use tokio::sync::{mpsc, oneshot};

use crate::io::{BoxStream, Io};
use crate::protocol::frame::{finish_frame, read_frame, start_frame, write_frame};

/// Calls waiting to be written.
pub const QUEUE: usize = 256;
/// Calls written and not yet answered.
pub const IN_FLIGHT: usize = 256;
/// Responses larger than this close the connection.
const MAX_RESPONSE: usize = 64 << 20;
const CONNECT_TIMEOUT: Duration = Duration::from_millis(1000);
const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_millis(1000);

mod codec;
pub mod dial;

pub use codec::{decode_response, encode_request};
pub use dial::Dialer;

/// A connection's TLS and SASL: the dialer of the target listener and the host it was
/// reached by (the name its certificate must carry).
pub type Security = Option<(Arc<Dialer>, String)>;

/// The answer to one call: the response frame without its size prefix (correlation id first).
pub type Reply = io::Result<Bytes>;

struct Call {
    frame: Vec<u8>,
    reply: oneshot::Sender<Reply>,
}

/// A connection (made and remade on demand) to one peer.
#[derive(Clone)]
pub struct Link {
    tx: mpsc::Sender<Call>,
    addr: SocketAddr,
}

impl Link {
    /// Starts the link's task; it connects on the first call and ends when every `Link` clone
    /// is dropped or `shutdown` turns true.
    pub fn new(io: &Io, addr: SocketAddr, shutdown: watch::Receiver<bool>) -> Link {
        Link::secured(io, addr, shutdown, None)
    }

    /// A link whose connections are secured by `security` (None: PLAINTEXT).
    pub fn secured(
        io: &Io,
        addr: SocketAddr,
        shutdown: watch::Receiver<bool>,
        security: Security,
    ) -> Link {
        let (tx, rx) = mpsc::channel(QUEUE);
        io.spawn(run(io.clone(), addr, rx, shutdown, security));
        Link { tx, addr }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues a request frame (without size prefix; its correlation id is overwritten). The
    /// receiver yields the response frame, or an error when the call failed (queue full,
    /// connection lost). The caller bounds the wait.
    pub fn call(&self, frame: Vec<u8>) -> oneshot::Receiver<Reply> {
        let (reply, rx) = oneshot::channel();
        if frame.len() < 8 {
            let _ = reply.send(Err(io::Error::other("request frame shorter than a header")));
            return rx;
        }
        if let Err(e) = self.tx.try_send(Call { frame, reply }) {
            let call = match e {
                mpsc::error::TrySendError::Full(c) | mpsc::error::TrySendError::Closed(c) => c,
            };
            let _ = call.reply.send(Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("the queue to {} is full", self.addr),
            )));
        }
        rx
    }
}

type Pending = Arc<Mutex<BTreeMap<i32, oneshot::Sender<Reply>>>>;

/// Connects and secures, within [`CONNECT_TIMEOUT`] each. With the stream comes the SASL
/// session's lifetime in ms (0: no SASL, or no expiry).
async fn connect(
    io: &Io,
    addr: SocketAddr,
    security: &Security,
) -> Result<(BoxStream, i64), dial::DialError> {
    let timed_out = || io::Error::new(io::ErrorKind::TimedOut, "connect timed out");
    let stream = match io.timeout(CONNECT_TIMEOUT, io.net.connect(addr)).await {
        Some(s) => s?,
        None => return Err(timed_out().into()),
    };
    let Some((dialer, host)) = security else {
        return Ok((stream, 0));
    };
    match io
        .timeout(CONNECT_TIMEOUT, dialer.secure(io, stream, host))
        .await
    {
        Some(s) => s,
        None => Err(io::Error::new(io::ErrorKind::TimedOut, "TLS/SASL handshake timed out").into()),
    }
}

async fn run(
    io: Io,
    addr: SocketAddr,
    mut rx: mpsc::Receiver<Call>,
    mut shutdown: watch::Receiver<bool>,
    security: Security,
) {
    let mut backoff = BACKOFF_MIN;
    let mut correlation: i32 = 0;
    loop {
        // Connect only when there is something to send.
        let first = tokio::select! {
            biased;
            c = rx.recv() => match c { Some(c) => c, None => return },
            _ = shutdown.changed() => return,
        };
        if *shutdown.borrow() {
            return;
        }
        let (stream, lifetime) = match connect(&io, addr, &security).await {
            Ok(s) => s,
            Err(e) => {
                if let dial::DialError::Authentication(reason) = &e {
                    let listener = security.as_ref().map_or("", |(d, _)| d.listener());
                    tracing::error!(%addr, listener, %reason,
                        "cannot log in to the other node: check this listener's SASL mechanism and JAAS username/password");
                    backoff = BACKOFF_MAX;
                } else {
                    tracing::debug!(%addr, error = %e, "peer connection failed");
                }
                let e = match e {
                    dial::DialError::Io(e) => e,
                    dial::DialError::Authentication(m) => {
                        io::Error::new(io::ErrorKind::PermissionDenied, m)
                    }
                };
                let _ = first.reply.send(Err(e));
                // Calls queued meanwhile fail too: their answers would be stale by the time a
                // connection exists (the core resends).
                while let Ok(c) = rx.try_recv() {
                    let _ = c.reply.send(Err(io::Error::other("peer unreachable")));
                }
                io.clock.sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
        };
        backoff = BACKOFF_MIN;
        let (read_half, mut write_half) = tokio::io::split(stream);
        let pending: Pending = Arc::default();
        let (dead_tx, mut dead) = watch::channel(false);
        let (answered_tx, mut answered) = watch::channel(0u64);
        io.spawn(read_responses(
            BufReader::new(read_half),
            pending.clone(),
            dead_tx,
            answered_tx,
            addr,
        ));
        let mut reauth_at = reauth_deadline(&io, lifetime);
        let mut next = Some(first);
        loop {
            let call = match next.take() {
                Some(c) => c,
                None => tokio::select! {
                    biased;
                    // First, so a busy link cannot put it off.
                    _ = until(&io, reauth_at) => {
                        let Some((dialer, _)) = &security else { unreachable!("a lifetime without SASL") };
                        if !drain(&pending, &mut answered, &mut dead).await {
                            break;
                        }
                        let mut on_link = OnLink {
                            io: &io,
                            write: &mut write_half,
                            pending: &pending,
                            correlation: &mut correlation,
                        };
                        match dialer.reauthenticate(&io, &mut on_link).await {
                            Ok(lifetime) => {
                                tracing::debug!(%addr, lifetime, "re-authenticated");
                                reauth_at = reauth_deadline(&io, lifetime);
                                continue;
                            }
                            Err(dial::DialError::Authentication(reason)) => {
                                tracing::error!(%addr, listener = dialer.listener(), %reason,
                                    "cannot re-authenticate to the other node: the connection closes");
                                break;
                            }
                            Err(dial::DialError::Io(e)) => {
                                tracing::debug!(%addr, error = %e, "re-authentication failed");
                                break;
                            }
                        }
                    }
                    c = rx.recv() => match c { Some(c) => c, None => return },
                    _ = dead.changed() => break,
                    _ = shutdown.changed() => return,
                },
            };
            if *dead.borrow() {
                let _ = call
                    .reply
                    .send(Err(io::Error::other("peer connection lost")));
                break;
            }
            if call.reply.is_closed() {
                // Its caller gave up (a relay abandoned for the next controller, a timeout):
                // never sent late, as Kafka's channel to the controller drops a request past
                // its deadline unsent. A late relay re-created a topic deleted meanwhile.
                continue;
            }
            let mut frame = call.frame;
            correlation = correlation.wrapping_add(1);
            frame[4..8].copy_from_slice(&correlation.to_be_bytes());
            {
                let mut p = pending.lock().unwrap();
                if p.len() >= IN_FLIGHT {
                    let _ = call
                        .reply
                        .send(Err(io::Error::other("too many requests in flight")));
                    continue;
                }
                p.insert(correlation, call.reply);
            }
            let mut out = BytesMut::with_capacity(frame.len() + 4);
            start_frame(&mut out);
            out.extend_from_slice(&frame);
            finish_frame(&mut out);
            if let Err(e) = write_frame(&mut write_half, &out).await {
                tracing::debug!(%addr, error = %e, "peer write failed");
                break;
            }
        }
        // Every call in flight fails now (dropping its sender); the reader stops.
        pending.lock().unwrap().clear();
        let _ = write_half.shutdown().await;
    }
}

/// When to log in again on a connection whose session lasts `lifetime` ms (monotonic time).
fn reauth_deadline(io: &Io, lifetime: i64) -> Option<Duration> {
    crate::security::sasl::client::reauthenticate_after(lifetime, io.rng.next_u64())
        .map(|after| io.clock.monotonic() + after)
}

/// Ends at `at` (monotonic), never without one.
async fn until(io: &Io, at: Option<Duration>) {
    let Some(at) = at else {
        return std::future::pending().await;
    };
    let now = io.clock.monotonic();
    if at > now {
        io.clock.sleep(at - now).await;
    }
}

/// Waits until no call is in flight; false if the connection died meanwhile.
async fn drain(
    pending: &Pending,
    answered: &mut watch::Receiver<u64>,
    dead: &mut watch::Receiver<bool>,
) -> bool {
    loop {
        if *dead.borrow() {
            return false;
        }
        if pending.lock().unwrap().is_empty() {
            return true;
        }
        tokio::select! {
            // A dead link ends the wait first (the loop's check returns).
            biased;
            _ = dead.changed() => {}
            r = answered.changed() => if r.is_err() { return false },
        }
    }
}

/// Re-authentication's requests on a live connection: written like any call, their answers
/// come back through the reader's pending map.
struct OnLink<'a> {
    io: &'a Io,
    write: &'a mut WriteHalf<BoxStream>,
    pending: &'a Pending,
    correlation: &'a mut i32,
}

impl dial::Exchange for OnLink<'_> {
    async fn exchange(
        &mut self,
        key: ApiKey,
        version: i16,
        body: RequestKind,
    ) -> Result<ResponseKind, dial::DialError> {
        *self.correlation = self.correlation.wrapping_add(1);
        let frame = dial::sasl_frame(key, version, *self.correlation, &body)?;
        let (reply, answer) = oneshot::channel();
        self.pending
            .lock()
            .unwrap()
            .insert(*self.correlation, reply);
        let mut out = BytesMut::with_capacity(frame.len() + 4);
        start_frame(&mut out);
        out.extend_from_slice(&frame);
        finish_frame(&mut out);
        write_frame(self.write, &out).await?;
        let answer = match self.io.timeout(CONNECT_TIMEOUT, answer).await {
            None => {
                return Err(
                    io::Error::new(io::ErrorKind::TimedOut, "re-authentication timed out").into(),
                )
            }
            // The reader dropped it: the connection is gone.
            Some(Err(_)) => return Err(io::Error::other("peer connection lost").into()),
            Some(Ok(reply)) => reply?,
        };
        dial::decode_answer(key, version, answer)
    }
}

async fn read_responses(
    mut reader: BufReader<tokio::io::ReadHalf<crate::io::BoxStream>>,
    pending: Pending,
    dead: watch::Sender<bool>,
    answered: watch::Sender<u64>,
    addr: SocketAddr,
) {
    loop {
        let frame = tokio::select! {
            biased;
            f = read_frame(&mut reader, MAX_RESPONSE) => f,
            _ = dead.closed() => break,
        };
        let frame = match frame {
            Ok(Some(f)) if f.len() >= 4 => f.freeze(),
            Ok(Some(_)) => {
                tracing::warn!(%addr, "peer sent a frame shorter than a response header");
                break;
            }
            Ok(None) => break,
            Err(e) => {
                tracing::debug!(%addr, error = %e, "peer connection closed");
                break;
            }
        };
        let correlation = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
        let waiting = pending.lock().unwrap().remove(&correlation);
        match waiting {
            Some(reply) => {
                let _ = reply.send(Ok(frame));
                answered.send_modify(|n| *n += 1);
            }
            None => {
                tracing::warn!(%addr, correlation, "peer answered a request never sent");
            }
        }
    }
    pending.lock().unwrap().clear();
    let _ = dead.send(true);
}

#[cfg(all(test, not(madsim)))]
mod tests {
    use super::*;

    /// A peer that answers `answers` requests on each connection (echoing the correlation id
    /// and the request's api key), then closes it.
    async fn peer(mut listener: Box<dyn crate::io::Listener>, answers: usize) {
        while let Ok((stream, _)) = listener.accept().await {
            let (r, mut w) = tokio::io::split(stream);
            let mut r = BufReader::new(r);
            for _ in 0..answers {
                let Ok(Some(frame)) = read_frame(&mut r, 1 << 20).await else {
                    break;
                };
                let mut out = BytesMut::new();
                start_frame(&mut out);
                out.extend_from_slice(&frame[4..8]);
                out.extend_from_slice(&frame[0..2]);
                finish_frame(&mut out);
                if write_frame(&mut w, &out).await.is_err() {
                    break;
                }
            }
            let _ = w.shutdown().await;
        }
    }

    fn request(key: i16) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f[0..2].copy_from_slice(&key.to_be_bytes());
        f
    }

    #[tokio::test]
    async fn calls_are_matched_and_the_link_reconnects() {
        let io = Io::os();
        let listener = io.net.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        io.spawn(peer(listener, 2));
        let (_stop, shutdown) = watch::channel(false);
        let link = Link::new(&io, addr, shutdown);
        // Two pipelined calls on one connection, each answered with its own correlation id.
        let (a, b) = (link.call(request(7)), link.call(request(9)));
        let (a, b) = (a.await.unwrap().unwrap(), b.await.unwrap().unwrap());
        assert_eq!(&a[4..6], &7i16.to_be_bytes());
        assert_eq!(&b[4..6], &9i16.to_be_bytes());
        assert_ne!(a[0..4], b[0..4]);
        // The peer closed that connection: calls fail until the link has reconnected.
        let mut ok = false;
        for _ in 0..100 {
            if let Ok(Ok(r)) = link.call(request(3)).await {
                assert_eq!(&r[4..6], &3i16.to_be_bytes());
                ok = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(ok, "the link never reconnected");
        // A frame too short to carry a correlation id fails at once.
        assert!(link.call(vec![0; 3]).await.unwrap().is_err());
    }

    #[tokio::test]
    async fn an_unreachable_peer_fails_calls_instead_of_queueing_them() {
        let io = Io::os();
        let addr = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let (_stop, shutdown) = watch::channel(false);
        let link = Link::new(&io, addr, shutdown);
        let calls: Vec<_> = (0..10).map(|_| link.call(request(1))).collect();
        for c in calls {
            assert!(c.await.unwrap().is_err());
        }
    }
}
