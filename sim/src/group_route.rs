//! Where a group member's requests go, as a Kafka consumer routes them: group requests
//! (JoinGroup, SyncGroup, Heartbeat, ConsumerGroupHeartbeat, OffsetCommit, OffsetFetch) to the
//! group's coordinator, found with FindCoordinator through any bootstrap broker (the next one
//! on every attempt); fetches to each partition's leader (`routing`). A coordinator that moved
//! answers NOT_COORDINATOR (or COORDINATOR_NOT_AVAILABLE while none leads the group's
//! `__consumer_offsets` partition): the member drops the connection and finds it again. A
//! coordinator still loading the group (COORDINATOR_LOAD_IN_PROGRESS) is asked again as is,
//! after a pause, as the Java consumer does. In the single-node world the bootstrap is that one
//! broker, which answers that it is the coordinator: the same requests as before routing.
//! With `[groups] client = "librdkafka"` fetches take the validating consumers' path instead
//! (`validating_consumer::GroupFetch`: Fetch v11, leader epochs, KIP-320, KIP-392).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use weir::client::{Client, ClientError};
use weir::io::Io;

use crate::group_workload::{fetch_partition, member_id_number, GroupsSpec, FETCH_WAIT};
use crate::history::History;
use crate::scenario::ConsumerClient;
use crate::validating_consumer::GroupFetch;
use crate::workload::{connect, ConsumerSpec, RunClock, RECONNECT_BACKOFF};

/// What a member's fetch returned: (partition, offset, value, and the high watermark of the
/// replica that served it when the member fetches as librdkafka does — the checker then judges
/// the read as a consumer's).
pub(crate) type MemberRead = (i32, i64, String, Option<i64>);

/// `true` if the error says the coordinator is elsewhere (or unknown): find it again.
pub(crate) fn coordinator_moved(e: &ClientError) -> bool {
    matches!(
        e,
        ClientError::Kafka(
            ResponseError::NotCoordinator | ResponseError::CoordinatorNotAvailable,
            _
        )
    )
}

/// Asks `bootstrap[attempt % len]` which broker coordinates `group` and connects there (keeping
/// the first connection when it names itself), with that broker's node id. The client's
/// time-out bounds every call.
pub(crate) async fn connect_coordinator(
    io: &Io,
    bootstrap: &[SocketAddr],
    attempt: u64,
    group: &str,
    timeout: Duration,
) -> Result<(Client, i32), ClientError> {
    assert!(!bootstrap.is_empty(), "a coordinator lookup needs a broker");
    let via = bootstrap[(attempt % bootstrap.len() as u64) as usize];
    let mut client = connect(io, via, timeout).await?;
    let info = client.coordinator(group).await?;
    let addr: SocketAddr = format!("{}:{}", info.host, info.port)
        .parse()
        .map_err(|e| ClientError::Protocol(format!("coordinator address {}: {e}", info.host)))?;
    if addr == via {
        return Ok((client, info.id));
    }
    Ok((connect(io, addr, timeout).await?, info.id))
}

/// A member's fetch connections: one per owned partition, to its leader, in a cluster; none on
/// one node (fetches share the coordinator's connection there).
pub(crate) struct LeaderFetch {
    bootstrap: Vec<SocketAddr>,
    timeout: Duration,
    leaders: BTreeMap<i32, Client>,
    /// The cached leader map (a cluster only).
    routes: Option<crate::routing::Routes>,
    /// The librdkafka-like path (`[groups] client = "librdkafka"`).
    validating: Option<GroupFetch>,
}

impl LeaderFetch {
    /// `bootstrap` empty: the single-node world.
    pub(crate) fn new(bootstrap: Vec<SocketAddr>, timeout: Duration) -> LeaderFetch {
        let routes = (!bootstrap.is_empty()).then(|| {
            crate::routing::Routes::new(bootstrap.clone(), crate::routing::DEFAULT_MAX_AGE, 0)
        });
        LeaderFetch {
            bootstrap,
            timeout,
            routes,
            leaders: BTreeMap::new(),
            validating: None,
        }
    }

    /// Member `slot` of `group`'s fetcher, by the spec's `client`; its rack is
    /// `racks[slot % len]`.
    pub(crate) fn for_member(
        spec: &GroupsSpec,
        group: u32,
        slot: u32,
        io: &Io,
        history: &History,
        clock: RunClock,
    ) -> LeaderFetch {
        let mut fetch = LeaderFetch::new(spec.bootstrap.clone(), spec.timeout);
        if spec.groups.client == ConsumerClient::Librdkafka {
            let racks = &spec.groups.racks;
            let consumer = ConsumerSpec {
                id: member_id_number(group, slot),
                addr: spec.addr,
                bootstrap: spec.bootstrap.clone(),
                topic: spec.topic.clone(),
                partitions: spec.partitions,
                max_wait: FETCH_WAIT,
                timeout: spec.timeout,
                until_ms: spec.until_ms,
                rack: match racks.as_slice() {
                    [] => String::new(),
                    racks => racks[slot as usize % racks.len()].clone(),
                },
            };
            fetch.validating = Some(GroupFetch::new(
                io.clone(),
                consumer,
                history.clone(),
                clock,
            ));
        }
        fetch
    }

    /// A partition newly owned starts at its committed `offset`, whose leader epoch (from
    /// OffsetFetch) the librdkafka-like path validates before fetching.
    pub(crate) fn start_at(&mut self, partition: i32, offset: i64, epoch: i32) {
        if let Some(v) = self.validating.as_mut() {
            v.start_at(partition, offset, epoch);
        }
    }

    /// The leader epoch a commit of `offset` carries (-1: unknown, or the basic path).
    pub(crate) fn epoch_at(&self, partition: i32, offset: i64) -> i32 {
        self.validating
            .as_ref()
            .map_or(-1, |v| v.epoch_at(partition, offset))
    }

    /// Forgets every connection (a consumer process that went away).
    pub(crate) fn reset(&mut self) {
        self.leaders.clear();
        if let Some(v) = self.validating.as_mut() {
            v.reset();
        }
    }

    /// Fetches every partition of `positions` once (see `group_workload::fetch_owned`): from
    /// `coordinator` on one node, else from each partition's leader. In a cluster a partition
    /// whose leader cannot be reached or moved is skipped this round (its connection dropped,
    /// found again next round, after a pause): the member's group session does not depend on it.
    pub(crate) async fn fetch(
        &mut self,
        io: &Io,
        coordinator: &mut Client,
        topic: &str,
        positions: &mut BTreeMap<i32, i64>,
    ) -> Result<Vec<MemberRead>, ClientError> {
        if let Some(v) = self.validating.as_mut() {
            let served = v.fetch(positions).await;
            return Ok(served
                .into_iter()
                .map(|(p, o, value, hw)| (p, o, value, Some(hw)))
                .collect());
        }
        if self.bootstrap.is_empty() {
            let read =
                crate::group_workload::fetch_owned(coordinator, io, topic, positions).await?;
            return Ok(read.into_iter().map(|(p, o, v)| (p, o, v, None)).collect());
        }
        let owned: Vec<i32> = positions.keys().copied().collect();
        if owned.is_empty() {
            // Nothing assigned: a consumer's poll still waits (and the loop must not spin).
            io.clock.sleep(FETCH_WAIT).await;
        }
        let mut out = Vec::new();
        let mut missed = false;
        for p in owned {
            if !self.leaders.contains_key(&p) {
                let routes = self.routes.as_mut().expect("a cluster has routes");
                match routes.connect_leader(io, topic, p, self.timeout).await {
                    Ok(c) => {
                        self.leaders.insert(p, c);
                    }
                    Err(_) => {
                        missed = true;
                        continue;
                    }
                }
            }
            let client = self.leaders.get_mut(&p).expect("connected above");
            match fetch_partition(client, topic, p, positions).await {
                Ok(records) => out.extend(records.into_iter().map(|(p, o, v)| (p, o, v, None))),
                Err(_) => {
                    // NOT_LEADER_OR_FOLLOWER, a broker gone: ask where the leader is again.
                    self.leaders.remove(&p);
                    if let Some(routes) = self.routes.as_mut() {
                        routes.stale(topic, p);
                    }
                    missed = true;
                }
            }
        }
        if missed {
            io.clock.sleep(RECONNECT_BACKOFF).await;
        }
        Ok(out)
    }
}
