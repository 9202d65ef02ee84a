//! Clients in a cluster find a partition's leader as Kafka clients do: a Metadata request to
//! one of the bootstrap brokers (the next one on every attempt, so a broker that is down or
//! cut off is not asked twice in a row), then a connection to the leader it names. A leader
//! that moved answers NOT_LEADER_OR_FOLLOWER; the client drops the connection and asks again.

use std::net::SocketAddr;
use std::time::Duration;

use weir::client::{Client, ClientError};
use weir::io::Io;

/// The address of `partition`'s leader as broker `bootstrap[attempt % len]` knows it.
pub async fn leader(
    io: &Io,
    bootstrap: &[SocketAddr],
    attempt: u64,
    topic: &str,
    partition: i32,
    timeout: Duration,
) -> Result<SocketAddr, ClientError> {
    assert!(!bootstrap.is_empty(), "routing needs a bootstrap broker");
    let via = bootstrap[(attempt % bootstrap.len() as u64) as usize];
    let asked = async {
        let mut c = Client::connect(io, via).await?;
        c.set_timeout(timeout);
        c.wait_for_leader(topic, partition).await
    };
    let info = io
        .timeout(timeout, asked)
        .await
        .ok_or(ClientError::Timeout)??;
    format!("{}:{}", info.host, info.port)
        .parse()
        .map_err(|e| ClientError::Protocol(format!("leader address {}: {e}", info.host)))
}

/// Connects to `partition`'s leader (see [`leader`]), with the client's time-out set.
pub async fn connect_leader(
    io: &Io,
    bootstrap: &[SocketAddr],
    attempt: u64,
    topic: &str,
    partition: i32,
    timeout: Duration,
) -> Result<Client, ClientError> {
    let addr = leader(io, bootstrap, attempt, topic, partition, timeout).await?;
    crate::workload::connect(io, addr, timeout).await
}
