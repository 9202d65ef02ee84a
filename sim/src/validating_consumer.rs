//! Consumers that fetch as librdkafka's do (`[consumers] client = "librdkafka"`), in a cluster:
//!
//! - Metadata gives each partition's leader and leader epoch; it is refreshed on every error
//!   that says it is stale and every [`METADATA_MAX_AGE`] (stale metadata is normal);
//! - Fetch v11 carries that `current_leader_epoch` and the consumer's `client.rack`;
//!   FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH and NOT_LEADER_OR_FOLLOWER refresh metadata;
//! - when the leader epoch changes, the position (offset, and the leader epoch of the last
//!   record consumed) is validated with OffsetForLeaderEpoch before fetching on (KIP-320). An
//!   end offset below the position is a detected log truncation: the consumer seeks to that
//!   end offset, as librdkafka does with an `auto.offset.reset` policy; no epoch at all resets
//!   by the policy (latest). Both are [`ConsumerEvent::Truncated`] for the checker;
//! - a leader whose `replica.selector.class` is rack-aware answers a consumer in another
//!   replica's rack with `preferred_read_replica`; the consumer then fetches from that follower
//!   (KIP-392) until it errs (OFFSET_OUT_OF_RANGE there: back to the leader, which decides) or
//!   [`PREFERRED_REPLICA_MAX_AGE`] passes.
//!
//! Every read is recorded with the high watermark of the replica that served it, so the
//! checker's `uncommitted` check covers a follower serving past its own high watermark and
//! `lost-read` a follower read that was later taken back.
//!
//! Consumer-group members (`[groups] client = "librdkafka"`) fetch their owned partitions the
//! same way through [`GroupFetch`]: a position starts at the committed offset with its
//! committed leader epoch (OffsetFetch), which is validated before the first fetch, as
//! librdkafka validates a committed position; the reset policy is `earliest`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use weir::client::consumer_fetch::{ConsumerFetch, PartitionRoute};
use weir::client::{Client, ClientError};
use weir::io::Io;
use weir::log::batch;

use crate::history::{Event, History};
use crate::workload::{connect, decode, ConsumerSpec, RunClock, RECONNECT_BACKOFF};

/// librdkafka's `topic.metadata.refresh.interval.ms` (5 min) scaled to a 30-second run.
const METADATA_MAX_AGE: Duration = Duration::from_secs(3);
/// The Java consumer's `metadata.max.age.ms` bound on a preferred read replica, scaled.
const PREFERRED_REPLICA_MAX_AGE: Duration = Duration::from_secs(5);
/// librdkafka retries a failed validation after 500 ms.
const VALIDATE_RETRY: Duration = Duration::from_millis(500);
/// ListOffsets LATEST: `auto.offset.reset=latest`, as the plain consumer resets.
const LATEST: i64 = -1;
/// ListOffsets EARLIEST: `auto.offset.reset=earliest`, as group members reset.
#[cfg(madsim)]
const EARLIEST: i64 = -2;

/// What a validating consumer does that the checker and the report see.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConsumerEvent {
    /// Validation found the log truncated below the position (`epoch`, `end`: the leader's
    /// answer; -1 when it knows no epoch that old): the position moved from `from` to `to`.
    Truncated {
        consumer: u32,
        partition: i32,
        from: i64,
        to: i64,
        epoch: i32,
        end: i64,
    },
    /// The position held after a leader change (OffsetForLeaderEpoch agreed).
    Validated {
        consumer: u32,
        partition: i32,
        offset: i64,
        leader_epoch: i32,
    },
    /// Fetches of `partition` go to `node` now (`follower`: a preferred read replica).
    ReadFrom {
        consumer: u32,
        partition: i32,
        node: i32,
        follower: bool,
    },
}

struct Part {
    position: i64,
    /// Leader epoch of the record before `position` (-1: unknown, nothing to validate).
    epoch: i32,
    route: Option<PartitionRoute>,
    route_at_ms: u64,
    /// The leader epoch the position was last validated at (or first fetched at).
    validated_at: i32,
    /// The preferred read replica and when the leader named it.
    replica: Option<(i32, u64)>,
    /// Where the last fetch started (after any validation moved the position).
    fetched_from: i64,
}

impl Part {
    /// At `position`, after a record of leader epoch `epoch` (-1: unknown), not yet validated.
    fn at(position: i64, epoch: i32) -> Part {
        Part {
            position,
            epoch,
            route: None,
            route_at_ms: 0,
            validated_at: -1,
            replica: None,
            fetched_from: position,
        }
    }
}

/// A record a group member's fetch returned: (partition, offset, value, high watermark of the
/// replica that served it).
pub(crate) type Served = (i32, i64, String, i64);

struct Consumer {
    spec: ConsumerSpec,
    io: Io,
    history: History,
    clock: RunClock,
    /// One connection per broker, as librdkafka keeps.
    conns: BTreeMap<i32, Client>,
    /// The connection metadata requests go to (a bootstrap broker, the next one each time).
    meta: Option<Client>,
    lookups: u64,
    parts: BTreeMap<i32, Part>,
    /// Partition → the highest leader epoch Metadata named for it, kept when a route is dropped
    /// or a partition reassigned (a process's memory, as librdkafka's toppar keeps it): an
    /// answer naming an older one is ignored (the broker asked has not caught up; the leader it
    /// names may be deposed).
    known_epochs: BTreeMap<i32, i32>,
    /// `auto.offset.reset`: [`LATEST`] or [`EARLIEST`].
    reset_to: i64,
    /// A group member's fetcher hands its reads back here (to process, then commit) instead
    /// of recording them as a standalone consumer's reads.
    served: Option<Vec<Served>>,
}

/// Why a step stopped: pause before the next.
struct Backoff(Duration);

impl Consumer {
    fn record(&self, event: Event) {
        self.history.record(self.clock.now_ms(), event);
    }

    fn note(&self, event: ConsumerEvent) {
        self.record(Event::Consumer(event));
    }

    async fn route(&mut self, partition: i32) -> Result<PartitionRoute, Backoff> {
        if self.meta.is_none() {
            self.lookups += 1;
            let via =
                self.spec.bootstrap[(self.lookups % self.spec.bootstrap.len() as u64) as usize];
            self.meta = Some(
                connect(&self.io, via, self.spec.timeout)
                    .await
                    .map_err(|_| Backoff(RECONNECT_BACKOFF))?,
            );
        }
        let meta = self.meta.as_mut().expect("connected above");
        match meta.partition_route(&self.spec.topic, partition).await {
            Ok(route) => Ok(route),
            Err(_) => {
                self.meta = None;
                Err(Backoff(RECONNECT_BACKOFF))
            }
        }
    }

    async fn conn(&mut self, route: &PartitionRoute, node: i32) -> Option<&mut Client> {
        if !self.conns.contains_key(&node) {
            let b = route.broker(node)?;
            let addr: SocketAddr = format!("{}:{}", b.host, b.port).parse().ok()?;
            let c = connect(&self.io, addr, self.spec.timeout).await.ok()?;
            self.conns.insert(node, c);
        }
        self.conns.get_mut(&node)
    }

    fn part(&mut self, partition: i32) -> &mut Part {
        self.parts
            .get_mut(&partition)
            .expect("a partition is fetched only once it has a position")
    }

    /// Forgets what the partition's metadata said (and a connection that failed).
    fn stale(&mut self, partition: i32, failed_node: Option<i32>) {
        let part = self.part(partition);
        part.route = None;
        part.replica = None;
        if let Some(n) = failed_node {
            self.conns.remove(&n);
        }
    }

    /// One round for one partition: metadata if stale, validation if the leader epoch moved,
    /// then one fetch.
    async fn step(&mut self, partition: i32) -> Result<(), Backoff> {
        let now = self.clock.now_ms();
        let part = self.part(partition);
        let fresh = part
            .route
            .as_ref()
            .is_some_and(|_| now < part.route_at_ms + METADATA_MAX_AGE.as_millis() as u64);
        if !fresh {
            let route = self.route(partition).await?;
            let known = self.known_epochs.entry(partition).or_insert(-1);
            if route.leader_epoch < *known {
                // Outdated: ask the next bootstrap broker after the back-off.
                self.meta = None;
                return Err(Backoff(RECONNECT_BACKOFF));
            }
            *known = route.leader_epoch;
            let part = self.part(partition);
            if part
                .route
                .as_ref()
                .is_some_and(|r| r.leader_epoch != route.leader_epoch)
            {
                part.replica = None;
            }
            part.route = Some(route);
            part.route_at_ms = now;
        }
        let route = self.part(partition).route.clone().expect("set above");
        let Some(leader) = route.leader.as_ref().map(|b| b.id) else {
            self.stale(partition, None);
            return Err(Backoff(RECONNECT_BACKOFF));
        };
        if self.part(partition).validated_at != route.leader_epoch {
            self.validate(partition, &route, leader).await?;
        }
        self.fetch(partition, &route, leader).await
    }

    /// KIP-320: where the epoch of the position ends on the leader, at its current epoch.
    async fn validate(
        &mut self,
        partition: i32,
        route: &PartitionRoute,
        leader: i32,
    ) -> Result<(), Backoff> {
        let (position, epoch) = (self.part(partition).position, self.part(partition).epoch);
        if epoch < 0 {
            // Nothing consumed yet (or an epoch-less reset): nothing to validate.
            self.part(partition).validated_at = route.leader_epoch;
            return Ok(());
        }
        let topic = self.spec.topic.clone();
        let Some(c) = self.conn(route, leader).await else {
            self.stale(partition, Some(leader));
            return Err(Backoff(RECONNECT_BACKOFF));
        };
        let answer = c
            .offset_for_leader_epoch(&topic, partition, route.leader_epoch, epoch)
            .await;
        let (end_epoch, end) = match answer {
            Ok(a) => a,
            Err(e) => {
                let failed = !matches!(e, ClientError::Kafka(..));
                self.stale(partition, failed.then_some(leader));
                return Err(Backoff(VALIDATE_RETRY));
            }
        };
        let consumer = self.spec.id;
        if end < 0 || end_epoch < 0 {
            // No epoch at or below ours: reset by the policy.
            let c = self.conns.get_mut(&leader).expect("connected above");
            let Ok((to, to_epoch)) = c
                .list_offset_with_epoch(&topic, partition, self.reset_to, route.leader_epoch)
                .await
            else {
                self.stale(partition, Some(leader));
                return Err(Backoff(VALIDATE_RETRY));
            };
            self.note(ConsumerEvent::Truncated {
                consumer,
                partition,
                from: position,
                to,
                epoch: end_epoch,
                end,
            });
            let part = self.part(partition);
            part.position = to;
            part.epoch = to_epoch;
        } else if end < position {
            self.note(ConsumerEvent::Truncated {
                consumer,
                partition,
                from: position,
                to: end,
                epoch: end_epoch,
                end,
            });
            let part = self.part(partition);
            part.position = end;
            part.epoch = end_epoch;
        } else {
            self.note(ConsumerEvent::Validated {
                consumer,
                partition,
                offset: position,
                leader_epoch: route.leader_epoch,
            });
        }
        self.part(partition).validated_at = route.leader_epoch;
        Ok(())
    }

    async fn fetch(
        &mut self,
        partition: i32,
        route: &PartitionRoute,
        leader: i32,
    ) -> Result<(), Backoff> {
        let now = self.clock.now_ms();
        let follower = self
            .part(partition)
            .replica
            .filter(|&(_, at)| now < at + PREFERRED_REPLICA_MAX_AGE.as_millis() as u64)
            .map(|(node, _)| node)
            .filter(|&n| n != leader);
        if follower.is_none() && self.part(partition).replica.is_some() {
            self.part(partition).replica = None;
            self.read_from(partition, leader, false);
        }
        let node = follower.unwrap_or(leader);
        let (topic, rack) = (self.spec.topic.clone(), self.spec.rack.clone());
        let position = self.part(partition).position;
        self.part(partition).fetched_from = position;
        let max_wait_ms = self.spec.max_wait.as_millis() as i32;
        let Some(c) = self.conn(route, node).await else {
            self.stale(partition, Some(node));
            return Err(Backoff(RECONNECT_BACKOFF));
        };
        let request = ConsumerFetch {
            topic: &topic,
            partition,
            offset: position,
            current_leader_epoch: route.leader_epoch,
            rack: &rack,
            max_bytes: 1 << 20,
            max_wait_ms,
        };
        let fetched = match c.consumer_fetch(&request).await {
            Ok(f) => f,
            Err(ClientError::Kafka(ResponseError::OffsetOutOfRange, _)) if follower.is_some() => {
                // A follower may lag: the leader decides whether the offset is out of range.
                self.part(partition).replica = None;
                self.read_from(partition, leader, false);
                return Ok(());
            }
            Err(ClientError::Kafka(ResponseError::OffsetOutOfRange, _)) => {
                let c = self.conns.get_mut(&node).expect("connected above");
                let Ok((to, to_epoch)) = c
                    .list_offset_with_epoch(&topic, partition, self.reset_to, route.leader_epoch)
                    .await
                else {
                    self.stale(partition, Some(node));
                    return Err(Backoff(RECONNECT_BACKOFF));
                };
                self.record(Event::Reset {
                    consumer: self.spec.id,
                    partition,
                    from: position,
                    to,
                });
                let part = self.part(partition);
                part.position = to;
                part.epoch = to_epoch;
                return Ok(());
            }
            Err(ClientError::Kafka(..)) => {
                // NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, ...:
                // metadata is stale (or the broker is behind); ask again after a pause.
                self.stale(partition, None);
                return Err(Backoff(RECONNECT_BACKOFF));
            }
            Err(_) => {
                self.stale(partition, Some(node));
                return Err(Backoff(RECONNECT_BACKOFF));
            }
        };
        let preferred = fetched.preferred_read_replica;
        if preferred >= 0 && preferred != node {
            // Sent elsewhere: the answer holds no records (KIP-392).
            self.part(partition).replica = (preferred != leader).then_some((preferred, now));
            self.read_from(partition, preferred, preferred != leader);
            return Ok(());
        }
        let mut last_epoch = None;
        let reads = decode(&fetched.records, position);
        let mut read_up_to = None;
        for read in reads {
            match read {
                Ok((offset, value)) => {
                    read_up_to = Some(offset);
                    let high_watermark = fetched.high_watermark;
                    match self.served.as_mut() {
                        Some(served) => served.push((partition, offset, value, high_watermark)),
                        None => self.record(Event::Read {
                            consumer: self.spec.id,
                            partition,
                            offset,
                            value,
                            high_watermark,
                        }),
                    }
                }
                Err((offset, error)) => {
                    self.record(Event::CorruptRead {
                        consumer: self.spec.id,
                        partition,
                        offset,
                        error,
                    });
                    break;
                }
            }
        }
        if let Some(last) = read_up_to {
            for (_, h) in batch::iter(&fetched.records).flatten() {
                if h.base_offset <= last && last < h.next_offset() {
                    last_epoch = Some(h.partition_leader_epoch);
                }
            }
            let part = self.part(partition);
            part.position = last + 1;
            part.epoch = last_epoch.unwrap_or(part.epoch);
        }
        Ok(())
    }

    fn read_from(&self, partition: i32, node: i32, follower: bool) {
        self.note(ConsumerEvent::ReadFrom {
            consumer: self.spec.id,
            partition,
            node,
            follower,
        });
    }
}

/// Reads every partition from offset 0 onwards, as above, until the deadline.
pub async fn run(io: Io, spec: ConsumerSpec, history: History, clock: RunClock) {
    assert!(
        !spec.bootstrap.is_empty(),
        "a validating consumer needs a cluster's brokers"
    );
    let parts = (0..spec.partitions).map(|p| (p, Part::at(0, -1))).collect();
    let until = spec.until_ms;
    let mut c = Consumer {
        spec,
        io,
        history,
        clock,
        conns: BTreeMap::new(),
        meta: None,
        lookups: 0,
        parts,
        known_epochs: BTreeMap::new(),
        reset_to: LATEST,
        served: None,
    };
    while clock.now_ms() < until {
        let mut pause = None;
        for partition in 0..c.spec.partitions {
            if let Err(Backoff(d)) = c.step(partition).await {
                pause = Some(pause.map_or(d, |p: Duration| p.max(d)));
            }
        }
        if let Some(d) = pause {
            c.io.clock.sleep(d).await;
        }
    }
}

/// A group member's fetch path when it fetches as librdkafka does: the owned partitions of
/// the member's positions, each from its leader (or a preferred follower) with Fetch v11, its
/// position validated after every leader change and before the first fetch from a committed
/// offset that carries a leader epoch. Only `group_route` (madsim) uses it.
#[cfg(madsim)]
pub(crate) struct GroupFetch {
    consumer: Consumer,
}

#[cfg(madsim)]
impl GroupFetch {
    /// `spec.id` names the member in the consumer events (validations, truncations, replica
    /// switches); `spec.partitions` is unused (the positions say what is owned).
    pub(crate) fn new(io: Io, spec: ConsumerSpec, history: History, clock: RunClock) -> GroupFetch {
        assert!(
            !spec.bootstrap.is_empty(),
            "a validating group member needs a cluster's brokers"
        );
        GroupFetch {
            consumer: Consumer {
                spec,
                io,
                history,
                clock,
                conns: BTreeMap::new(),
                meta: None,
                lookups: 0,
                parts: BTreeMap::new(),
                known_epochs: BTreeMap::new(),
                reset_to: EARLIEST,
                served: Some(Vec::new()),
            },
        }
    }

    /// Starts `partition` at a committed `offset` whose record before it has leader epoch
    /// `epoch` (-1: none committed; nothing to validate).
    pub(crate) fn start_at(&mut self, partition: i32, offset: i64, epoch: i32) {
        self.consumer
            .parts
            .insert(partition, Part::at(offset, epoch));
    }

    /// The leader epoch of the record before `offset` in `partition`, as a commit of that
    /// offset carries it (-1 when this fetcher is elsewhere).
    pub(crate) fn epoch_at(&self, partition: i32, offset: i64) -> i32 {
        self.consumer
            .parts
            .get(&partition)
            .filter(|p| p.position == offset)
            .map_or(-1, |p| p.epoch)
    }

    /// Forgets every partition and connection (a consumer process that went away).
    pub(crate) fn reset(&mut self) {
        self.consumer.parts.clear();
        self.consumer.known_epochs.clear();
        self.consumer.conns.clear();
        self.consumer.meta = None;
    }

    /// Fetches every partition of `positions` once. A partition without a fetch position
    /// starts at its member position (epoch unknown); one no longer owned is forgotten. A
    /// position the fetcher moved (a detected truncation, a reset) moves the member's
    /// position with it; records still advance it only once processed.
    pub(crate) async fn fetch(&mut self, positions: &mut BTreeMap<i32, i64>) -> Vec<Served> {
        let c = &mut self.consumer;
        c.parts.retain(|p, _| positions.contains_key(p));
        for (&p, &o) in positions.iter() {
            let stale = c.parts.get(&p).is_none_or(|part| part.position != o);
            if stale {
                c.parts.insert(p, Part::at(o, -1));
            }
        }
        if positions.is_empty() {
            // Nothing assigned: a consumer's poll still waits (and the loop must not spin).
            c.io.clock.sleep(c.spec.max_wait).await;
        }
        let mut pause: Option<Duration> = None;
        let owned: Vec<i32> = positions.keys().copied().collect();
        for p in owned {
            let before = c.served.as_ref().map_or(0, Vec::len);
            if let Err(Backoff(d)) = c.step(p).await {
                pause = Some(pause.map_or(d, |x| x.max(d)));
            }
            let read = c.served.as_ref().map_or(0, Vec::len) > before;
            let part = c.part(p);
            positions.insert(
                p,
                if read {
                    part.fetched_from
                } else {
                    part.position
                },
            );
        }
        if let Some(d) = pause {
            c.io.clock.sleep(d).await;
        }
        c.served.replace(Vec::new()).unwrap_or_default()
    }
}
