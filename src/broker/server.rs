//! Connections: accept, read frames, decode, dispatch, answer in order. A connection handles one
//! request at a time, as Kafka does, so responses need no reordering. Anything malformed closes
//! that one connection with a logged reason; nothing a client sends can panic the broker.
//!
//! While a request is handled the connection still watches its socket: if the peer closes it
//! (end of stream, an error) the request's delayed operations end at once instead of holding
//! their slots until their deadline. Bytes that arrive instead (a pipelined request) stay in
//! the read buffer for the next turn, and the watch stops for this request.

use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::delayed::{ConnectionGone, ConnectionWatch};
use super::{
    acls, admin, broker_rpc, configs, consumer_groups, delete_records, elect_leaders, fetch,
    forward, groups, metadata, offset_for_leader_epoch, produce, quorum_rpc, scram,
    topic_partitions, versions, Broker,
};
use crate::io::{BoxStream, Listener};
use crate::protocol::frame::{finish_frame, read_frame, start_frame, write_frame};

/// Bound on concurrent connections: past it, new ones are closed at once.
const MAX_CONNECTIONS: usize = 10_000;

/// Which listener a connection came in on: the controller listener also answers the quorum's
/// RPCs and never forwards (what arrives there was forwarded already, or is a peer's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ListenerKind {
    Client,
    Controller,
}

pub(super) async fn accept_loop(
    broker: Arc<Broker>,
    mut listener: Box<dyn Listener>,
    kind: ListenerKind,
) {
    let mut shutdown = broker.shutdown_signal();
    let open = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    loop {
        let accepted = tokio::select! {
            biased;
            a = listener.accept() => a,
            _ = shutdown.changed() => return,
        };
        match accepted {
            Ok((stream, peer)) => {
                if open.load(std::sync::atomic::Ordering::SeqCst) >= MAX_CONNECTIONS {
                    tracing::warn!(%peer, "too many connections; closing new one");
                    continue;
                }
                open.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let broker = broker.clone();
                let open = open.clone();
                broker.io.clone().spawn(async move {
                    serve_connection(broker, stream, peer, kind).await;
                    open.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
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
) {
    let (read_half, mut write_half) = tokio::io::split(stream);
    let mut reader = BufReader::with_capacity(64 * 1024, read_half);
    let mut shutdown = broker.shutdown_signal();
    let idle = Duration::from_millis(broker.config.connections_max_idle_ms.max(1));
    let max_frame = broker.config.socket_request_max_bytes;
    let mut out = BytesMut::with_capacity(64 * 1024);
    loop {
        let frame = tokio::select! {
            biased;
            f = broker.io.timeout(idle, read_frame(&mut reader, max_frame)) => f,
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
        let watch = ConnectionWatch::new();
        let handled = {
            let handling = dispatch(&broker, kind, frame, peer, watch.signal(), &mut out);
            tokio::pin!(handling);
            let mut watching = true;
            loop {
                tokio::select! {
                    // The handler first: a request answered at its first poll (most are) never
                    // costs a read of the socket.
                    biased;
                    handled = &mut handling => break handled,
                    peeked = reader.fill_buf(), if watching => {
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
        match handled {
            Ok(true) => {
                if let Err(e) = write_frame(&mut write_half, &out).await {
                    tracing::debug!(%peer, error = %e, "write failed");
                    break;
                }
                tracing::debug!(target: "latency", len = out.len(), %peer, "frame written");
            }
            Ok(false) => {} // acks=0: no response
            Err(reason) => {
                tracing::warn!(%peer, %reason, "closing connection");
                break;
            }
        }
    }
    let _ = write_half.shutdown().await;
}

impl Broker {
    /// Answers one request exactly as a connection does: `frame` is a request without its size
    /// prefix; the answer is the whole response frame (size prefix included), `None` when the
    /// request gets no response (acks=0), or the reason the connection would be closed. `peer`
    /// stands for the client's address. For tests and the fuzzer (`fuzz/`), which drive the
    /// decoder and dispatcher without sockets.
    pub async fn handle_request(
        &self,
        frame: Bytes,
        peer: SocketAddr,
    ) -> Result<Option<Bytes>, String> {
        let mut out = BytesMut::new();
        let kind = ListenerKind::Client;
        match handle_frame(self, kind, frame, peer, ConnectionGone::never(), &mut out).await? {
            true => Ok(Some(out.freeze())),
            false => Ok(None),
        }
    }
}

/// Decodes and answers one request into `out` (a whole frame). `Ok(false)`: send nothing.
/// Routes one frame: quorum RPCs on the controller listener to the quorum driver; metadata
/// changes on a client listener of a node that is not the active controller to the active
/// controller (relayed); everything else to the request handlers.
async fn dispatch(
    broker: &Broker,
    kind: ListenerKind,
    frame: Bytes,
    peer: SocketAddr,
    gone: ConnectionGone,
    out: &mut BytesMut,
) -> Result<bool, String> {
    match kind {
        ListenerKind::Controller if quorum_rpc::is_quorum_request(&frame) => {
            quorum_rpc::handle(broker, frame, out).await
        }
        ListenerKind::Controller if broker_rpc::is_session_request(&frame) => {
            broker_rpc::handle(broker, frame, out).await
        }
        ListenerKind::Client => {
            // Relayed to the controller, or handled here (this node is it, or none answered
            // within the bound); handled here and refused because the leadership moved during
            // the commit, it goes to the next controller (`forward`).
            let deadline = forward::deadline(broker);
            loop {
                if let Some(relayed) = forward::forward(broker, &frame, peer, deadline).await {
                    *out = relayed;
                    return Ok(true);
                }
                let answered =
                    handle_frame(broker, kind, frame.clone(), peer, gone.clone(), out).await;
                if !matches!(answered, Ok(true))
                    || !forward::lost_control_while_handling(broker, &frame, out, deadline).await
                {
                    return answered;
                }
                out.clear();
            }
        }
        ListenerKind::Controller => handle_frame(broker, kind, frame, peer, gone, out).await,
    }
}

async fn handle_frame(
    broker: &Broker,
    kind: ListenerKind,
    mut frame: Bytes,
    peer: SocketAddr,
    gone: ConnectionGone,
    out: &mut BytesMut,
) -> Result<bool, String> {
    if frame.len() < 8 {
        return Err(format!(
            "request of {} bytes is too short for a header",
            frame.len()
        ));
    }
    let api_key_raw = i16::from_be_bytes([frame[0], frame[1]]);
    let api_version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let Ok(api_key) = ApiKey::try_from(api_key_raw) else {
        return Err(format!("unknown API key {api_key_raw}"));
    };
    // ApiVersions must be answered whatever its version, so old clients can retry lower.
    if api_key == ApiKey::ApiVersions && !versions::is_supported(api_key, api_version) {
        encode_response(out, correlation_id, 0, &versions::unsupported_response(), 0)?;
        return Ok(true);
    }
    if !versions::is_supported(api_key, api_version) {
        return Err(format!("unsupported {api_key:?} version {api_version}"));
    }
    let header_version = api_key.request_header_version(api_version);
    let decoded = catch(|| {
        let header = RequestHeader::decode(&mut frame, header_version)?;
        let body = RequestKind::decode(api_key, &mut frame, api_version)?;
        Ok::<_, anyhow::Error>((header, body))
    });
    let (header, body) = match decoded {
        Ok(Ok(decoded)) => decoded,
        Ok(Err(e)) => return Err(format!("undecodable {api_key:?} v{api_version}: {e:#}")),
        Err(panic) => {
            return Err(format!(
                "decoder panicked on {api_key:?} v{api_version}: {panic}"
            ))
        }
    };
    let ctx = RequestContext {
        version: api_version,
        trusted: kind == ListenerKind::Controller,
        client_id: header.client_id.map(|c| c.to_string()).unwrap_or_default(),
        peer,
        gone,
    };
    let response = match body {
        RequestKind::ApiVersions(_) => Some(ResponseKind::ApiVersions(match kind {
            ListenerKind::Client => versions::handle(),
            ListenerKind::Controller => versions::handle_controller(),
        })),
        RequestKind::Metadata(req) => Some(ResponseKind::Metadata(
            metadata::handle(broker, &ctx, req).await,
        )),
        RequestKind::DescribeCluster(req) => Some(ResponseKind::DescribeCluster(
            metadata::describe_cluster(broker, &ctx, req),
        )),
        RequestKind::DescribeTopicPartitions(req) => Some(ResponseKind::DescribeTopicPartitions(
            topic_partitions::handle(broker, &ctx, req),
        )),
        RequestKind::ElectLeaders(req) => Some(ResponseKind::ElectLeaders(
            elect_leaders::handle(broker, &ctx, req).await,
        )),
        RequestKind::FindCoordinator(req) => Some(ResponseKind::FindCoordinator(
            groups::find_coordinator(broker, &ctx, req).await,
        )),
        RequestKind::JoinGroup(req) => Some(ResponseKind::JoinGroup(
            groups::join_group(broker, &ctx, req).await,
        )),
        RequestKind::SyncGroup(req) => Some(ResponseKind::SyncGroup(
            groups::sync_group(broker, &ctx, req).await,
        )),
        RequestKind::Heartbeat(req) => Some(ResponseKind::Heartbeat(
            groups::heartbeat(broker, &ctx, req).await,
        )),
        RequestKind::LeaveGroup(req) => Some(ResponseKind::LeaveGroup(
            groups::leave_group(broker, &ctx, req).await,
        )),
        RequestKind::OffsetCommit(req) => Some(ResponseKind::OffsetCommit(
            groups::offset_commit(broker, &ctx, req).await,
        )),
        RequestKind::OffsetFetch(req) => Some(ResponseKind::OffsetFetch(groups::offset_fetch(
            broker, &ctx, req,
        ))),
        RequestKind::OffsetDelete(req) => Some(ResponseKind::OffsetDelete(
            groups::offset_delete(broker, &ctx, req).await,
        )),
        RequestKind::ListGroups(req) => Some(ResponseKind::ListGroups(groups::list_groups(
            broker, &ctx, req,
        ))),
        RequestKind::DescribeGroups(req) => Some(ResponseKind::DescribeGroups(
            groups::describe_groups(broker, &ctx, req),
        )),
        RequestKind::DeleteGroups(req) => Some(ResponseKind::DeleteGroups(
            groups::delete_groups(broker, &ctx, req).await,
        )),
        RequestKind::ConsumerGroupHeartbeat(req) => Some(ResponseKind::ConsumerGroupHeartbeat(
            consumer_groups::heartbeat(broker, &ctx, req).await,
        )),
        RequestKind::ConsumerGroupDescribe(req) => Some(ResponseKind::ConsumerGroupDescribe(
            consumer_groups::describe(broker, &ctx, req),
        )),
        RequestKind::Produce(req) => produce::handle(broker, &ctx, req)
            .await
            .map(ResponseKind::Produce),
        RequestKind::Fetch(req) => {
            Some(ResponseKind::Fetch(fetch::handle(broker, &ctx, req).await))
        }
        RequestKind::ListOffsets(req) => Some(ResponseKind::ListOffsets(fetch::list_offsets(
            broker, &ctx, req,
        ))),
        RequestKind::InitProducerId(req) => Some(ResponseKind::InitProducerId(
            produce::init_producer_id(broker, req).await,
        )),
        RequestKind::CreateTopics(req) => Some(ResponseKind::CreateTopics(
            admin::create_topics(broker, &ctx, req).await,
        )),
        RequestKind::DeleteTopics(req) => Some(ResponseKind::DeleteTopics(
            admin::delete_topics(broker, &ctx, req).await,
        )),
        RequestKind::CreatePartitions(req) => Some(ResponseKind::CreatePartitions(
            admin::create_partitions(broker, &ctx, req).await,
        )),
        RequestKind::DescribeQuorum(req) => Some(ResponseKind::DescribeQuorum(
            quorum_rpc::describe_quorum(broker, &ctx, &req),
        )),
        RequestKind::DescribeAcls(req) => Some(ResponseKind::DescribeAcls(acls::describe(
            broker, &ctx, req,
        ))),
        RequestKind::CreateAcls(req) => Some(ResponseKind::CreateAcls(
            acls::create(broker, &ctx, req).await,
        )),
        RequestKind::DeleteAcls(req) => Some(ResponseKind::DeleteAcls(
            acls::delete(broker, &ctx, req).await,
        )),
        RequestKind::DescribeUserScramCredentials(req) => Some(
            ResponseKind::DescribeUserScramCredentials(scram::describe(broker, &ctx, req)),
        ),
        RequestKind::AlterUserScramCredentials(req) => Some(
            ResponseKind::AlterUserScramCredentials(scram::alter(broker, &ctx, req).await),
        ),
        RequestKind::DeleteRecords(req) => Some(ResponseKind::DeleteRecords(
            delete_records::handle(broker, &ctx, req).await,
        )),
        RequestKind::OffsetForLeaderEpoch(req) => Some(ResponseKind::OffsetForLeaderEpoch(
            offset_for_leader_epoch::handle(broker, &ctx, req),
        )),
        RequestKind::DescribeConfigs(req) => Some(ResponseKind::DescribeConfigs(
            configs::describe(broker, &ctx, req),
        )),
        RequestKind::AlterConfigs(req) => Some(ResponseKind::AlterConfigs(
            configs::alter(broker, &ctx, req).await,
        )),
        RequestKind::IncrementalAlterConfigs(req) => Some(ResponseKind::IncrementalAlterConfigs(
            configs::incremental_alter(broker, &ctx, req).await,
        )),
        other => {
            return Err(format!(
                "no handler for {:?}",
                std::mem::discriminant(&other)
            ))
        }
    };
    let Some(response) = response else {
        return Ok(false);
    };
    let response_header_version = api_key.response_header_version(api_version);
    encode_response(
        out,
        correlation_id,
        response_header_version,
        &response,
        api_version,
    )?;
    Ok(true)
}

/// What handlers may need to know about the request beyond its body.
pub(super) struct RequestContext {
    pub version: i16,
    /// Arrived on the controller listener: inter-node traffic (or a client request another
    /// node relayed after authorizing it), never checked by the authorizer (`authz`).
    pub trusted: bool,
    /// The header's client id ("" when null): prefixes new member ids, as in Kafka.
    pub client_id: String,
    pub peer: SocketAddr,
    /// Fires when the client closed the connection: waits end early.
    pub gone: ConnectionGone,
}

pub(super) fn encode_response(
    out: &mut BytesMut,
    correlation_id: i32,
    header_version: i16,
    body: &ResponseKind,
    version: i16,
) -> Result<(), String> {
    start_frame(out);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    header
        .encode(out, header_version)
        .map_err(|e| format!("encoding response header: {e}"))?;
    // An encoder refusal is our bug (a field the version lacks): log it loudly.
    body.encode(out, version).map_err(|e| {
        tracing::error!(error = %e, version, "response encoding failed");
        format!("response encoding failed: {e}")
    })?;
    finish_frame(out);
    Ok(())
}

/// Runs a decoder, turning a panic inside the codec into an error for this connection only.
pub(super) fn catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(AssertUnwindSafe(f)).map_err(|panic| {
        panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_string())
    })
}
