//! What a handler knows of its request beyond its body, and which listener it came in on.

use std::net::SocketAddr;
use std::sync::Arc;

use kafka_protocol::protocol::StrBytes;

use crate::broker::delayed::ConnectionGone;

/// Which listener a connection came in on: the controller listener also answers the quorum's
/// RPCs and never forwards (what arrives there was forwarded already, or is a peer's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListenerKind {
    Client,
    Controller,
}

/// What handlers may need to know about the request beyond its body.
pub struct RequestContext {
    pub version: i16,
    /// The listener it arrived on.
    pub listener: ListenerKind,
    /// Arrived on the controller listener: inter-node traffic (or a client request another
    /// node relayed after authorizing it), never checked by the authorizer (`authz`).
    pub trusted: bool,
    /// A client's request another node relayed in an Envelope (so `trusted` too): charged to
    /// its client's quotas here, on the controller (`throttle`).
    pub forwarded: bool,
    /// The header's client id ("" when null): prefixes new member ids, as in Kafka.
    pub client_id: StrBytes,
    pub peer: SocketAddr,
    /// Who asks: `User:ANONYMOUS`, a certificate's or a SASL principal (`User:alice`). Shared
    /// with the connection (no copy per request).
    pub principal: Arc<str>,
    /// The name of that listener (`listeners`): Metadata answers with its endpoints.
    pub listener_name: Arc<str>,
    /// Fires when the client closed the connection: waits end early.
    pub gone: ConnectionGone,
    /// Until when (monotonic) a metadata change it asks for may still be carried out: its
    /// own `timeout_ms` where it has one, else the forwarding bound (`forward::deadline`).
    pub deadline: std::time::Duration,
}
