//! Scenario files: TOML describing the cluster, its configuration, the workload, the faults and
//! the properties to check. `scenarios/*.toml` are commented examples; every field not given
//! takes the default documented here.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Defaults to the file name without extension.
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Simulated seconds of workload (faults included); healing and checks come after.
    #[serde(default = "default_duration")]
    pub duration_secs: u64,
    /// `safe`: every seed must pass. `unsafe`: the configuration is known to lose data, and the
    /// sweep passes only if at least one seed catches it (the checker has teeth).
    #[serde(default)]
    pub expect: Expect,
    /// Properties checked at the end; see [`Check`].
    #[serde(default = "default_checks")]
    pub checks: Vec<Check>,
    #[serde(default)]
    pub cluster: Cluster,
    /// Broker configuration with Kafka's own key names (as in server.properties).
    #[serde(default)]
    pub broker: BTreeMap<String, String>,
    #[serde(default)]
    pub topic: Topic,
    #[serde(default)]
    pub producers: Producers,
    #[serde(default)]
    pub consumers: Consumers,
    #[serde(default)]
    pub nemesis: Nemesis,
    /// An admin client changing metadata under the faults; none when absent.
    #[serde(default)]
    pub admin: Option<Admin>,
    /// Consumer groups subscribing to the topic under the faults (`group_workload.rs`); none
    /// when absent.
    #[serde(default)]
    pub groups: Option<Groups>,
    /// Transactional producers and a read_committed consumer on a topic of their own
    /// (`txn_workload.rs`); none when absent.
    #[serde(default)]
    pub transactions: Option<Transactions>,
    /// An operator reassigning the topic's partitions under the faults (`reassigner.rs`);
    /// none when absent.
    #[serde(default)]
    pub reassign: Option<Reassign>,
    /// An operator deleting old records of the workload topic under the faults
    /// (`record_deleter.rs`, judged by `delete_check.rs`); none when absent.
    #[serde(default)]
    pub deleter: Option<Deleter>,
    /// Test-only: plant a known bug in the broker to show the sweep finds it.
    #[serde(default)]
    pub planted_bug: Option<String>,
    /// A sweep runs at most this many of its seeds on this scenario (the first ones), to keep
    /// slow or regression-only scenarios within CI's budget.
    #[serde(default)]
    pub seeds: Option<u64>,
    /// Acknowledged writes lost beyond what acks=all promises (`beyond_promise.rs`: Kafka's own
    /// elections after `min.insync.replicas` replicas stopped uncleanly, one of them by a power
    /// loss that took its unflushed tail) are reported as notes instead of violations. For
    /// scenarios that cut power without fsync before acknowledging (Kafka's default) and let
    /// failures overlap. Default false: every acknowledged write must survive.
    #[serde(default)]
    pub excuse_beyond_promise: bool,
}

fn default_duration() -> u64 {
    20
}

fn default_checks() -> Vec<Check> {
    Check::all()
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Expect {
    #[default]
    Safe,
    Unsafe,
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Check {
    /// An acknowledged write is missing from the final read.
    Lost,
    /// A value appears at more than one offset.
    Duplicate,
    /// One offset was seen holding two different values (reads or acknowledgements).
    Inconsistent,
    /// A consumer's reads went backwards or skipped offsets without the broker saying so.
    Monotonic,
    /// A batch with a bad CRC reached a client, or a value nobody wrote was read.
    Corrupt,
    /// After faults heal, produce and fetch succeed within the bound.
    Liveness,
    /// A value a consumer read below the high watermark the broker reported with it is not at
    /// that offset in the final read (Jepsen's lost-write, with reads as knowledge).
    #[serde(rename = "lost-read")]
    LostRead,
    /// A fetch returned a record at or past the high watermark it reported.
    Uncommitted,
    /// An idempotent producer's values are stored out of the order it sent them (within one
    /// producer id).
    Order,
    /// An acknowledged admin change is missing after the faults heal, or one shows half done.
    Metadata,
    /// The admin client surfaced an error a correct broker would not answer then (librdkafka's
    /// Admin API retries none): NOT_CONTROLLER (a Kafka broker holds a forwarded request until
    /// a controller is known), UNKNOWN_SERVER_ERROR and other wrong answers, or a time-out with
    /// no fault active or recovering (`admin_errors`).
    #[serde(rename = "admin-availability")]
    AdminAvailability,
    /// A producer surfaced an error a correct broker should not cause: a permanent error
    /// librdkafka hands to the application, an idempotent sequence error where nothing
    /// acknowledged may be lost, or a delivery timeout while the partition had a leader and
    /// no fault was active or recovering (`delivery_check`).
    #[serde(rename = "producer-availability")]
    ProducerAvailability,
    /// Two nodes name different leaders for one quorum epoch (multi-node worlds).
    #[serde(rename = "one-leader")]
    OneLeader,
    /// Two nodes hold different records at one committed metadata offset, or a node's
    /// committed metadata is not a prefix of the others' after healing (multi-node worlds).
    #[serde(rename = "committed-prefix")]
    CommittedPrefix,
    /// After faults heal, a quorum leader exists and a metadata change commits within the
    /// bound (multi-node worlds).
    #[serde(rename = "quorum-liveness")]
    QuorumLiveness,
    /// Two members of one group were assigned the same partition in one generation (classic),
    /// or a KIP-848 member's commit of a partition was accepted after another member was
    /// handed it.
    #[serde(rename = "group-ownership")]
    GroupOwnership,
    /// A group's committed offset went backwards: a commit accepted, or an OffsetFetch
    /// answered, below a commit already acknowledged or observed.
    #[serde(rename = "group-offsets")]
    GroupOffsets,
    /// An acknowledged record still in the log was never processed by some group.
    #[serde(rename = "group-delivery")]
    GroupDelivery,
    /// A group did not end in one generation with every partition owned once, within the
    /// bound after healing.
    #[serde(rename = "group-settle")]
    GroupSettle,
    /// A value a producer sent and was never told about (acks=0: fire and forget, which the
    /// client reports as sent) is missing from the final read. Not in the default checks: it
    /// judges the producer's settings, not the broker (`cargo sim check` uses it).
    Sent,
    /// An acknowledged value is not at the offset it was acknowledged at in the final read
    /// (the offset inside the read): acknowledged offsets never move, whichever broker leads.
    #[serde(rename = "acked-offset")]
    AckedOffset,
    /// A read that began after a DeleteRecords was answered with low watermark L returned a
    /// record below L (`delete_check`): deleted records readable again.
    Deleted,
    /// After healing, two replicas of a partition hold different batches (offsets, leader
    /// epoch, CRC) below the lower of their high watermarks, or a replica's high watermark is
    /// outside its log (multi-node worlds with replicated topics).
    Replicas,
    /// After healing, an admin sequence (CreateTopics, CreatePartitions,
    /// IncrementalAlterConfigs, DeleteTopics through any broker) did not succeed within the
    /// bound (`probes`; clusters and admin scenarios).
    #[serde(rename = "admin-liveness")]
    AdminLiveness,
    /// After healing, a fresh group's member did not join a stable generation and commit within
    /// the bound (`probes`; group scenarios).
    #[serde(rename = "group-liveness")]
    GroupLiveness,
    /// After healing, a transaction was not committed and read back read_committed within the
    /// bound (`probes`; transaction scenarios).
    #[serde(rename = "txn-liveness")]
    TxnLiveness,
    /// Transactions (`txn_check`): a read_committed read of an aborted or later-undone value,
    /// a transaction partly visible, an acknowledged commit missing, a value stored twice, a
    /// last stable offset stuck below the high watermark after healing.
    Transactions,
}

impl Check {
    pub fn all() -> Vec<Check> {
        vec![
            Check::Lost,
            Check::Duplicate,
            Check::Inconsistent,
            Check::Monotonic,
            Check::Corrupt,
            Check::Liveness,
            Check::LostRead,
            Check::Uncommitted,
            Check::Order,
            Check::Metadata,
            Check::AdminAvailability,
            Check::ProducerAvailability,
            Check::OneLeader,
            Check::CommittedPrefix,
            Check::QuorumLiveness,
            Check::AckedOffset,
            Check::Deleted,
            Check::Replicas,
            Check::GroupOwnership,
            Check::GroupOffsets,
            Check::GroupDelivery,
            Check::GroupSettle,
            Check::Transactions,
            Check::AdminLiveness,
            Check::GroupLiveness,
            Check::TxnLiveness,
        ]
    }
}

/// The `[groups]` section: `count` consumer groups of `members` members each, all subscribed to
/// the workload's topic, committing after processing: classic members (client-side range
/// assignor) or KIP-848 ones (server-side assignor), by `protocol`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Groups {
    #[serde(default = "one")]
    pub count: u32,
    #[serde(default = "default_members")]
    pub members: u32,
    /// `session.timeout.ms` (the broker's `group.min.session.timeout.ms` is 6000 by default).
    #[serde(default = "default_session")]
    pub session_timeout_ms: u64,
    /// `max.poll.interval.ms`, sent as the rebalance timeout.
    #[serde(default = "default_rebalance")]
    pub rebalance_timeout_ms: u64,
    #[serde(default = "default_heartbeat")]
    pub heartbeat_interval_ms: u64,
    /// Churn per member per simulated minute, until the faults heal: LeaveGroup and come back
    /// as a new member; vanish silently (crash) and come back; stall past the session timeout
    /// between processing and committing, then go on with the old generation.
    #[serde(default)]
    pub leaves_per_min: f64,
    #[serde(default)]
    pub crashes_per_min: f64,
    #[serde(default)]
    pub stalls_per_min: f64,
    /// Commit after processing (at least once); `false` commits what was fetched before
    /// processing it (at most once: a crash in between loses records for the group).
    #[serde(default = "yes")]
    pub commit_after_processing: bool,
    /// How long members keep consuming after the faults heal, so that every acknowledged
    /// record can reach every group.
    #[serde(default = "default_drain")]
    pub drain_secs: u64,
    /// How long after healing each group may take to settle (one generation, every partition
    /// owned once); default session + 2 × rebalance timeout + 10 s (groups.md L2).
    #[serde(default)]
    pub settle_bound_ms: Option<u64>,
    /// KIP-848 members take up to this long (uniformly from 0) between being told to revoke
    /// partitions and committing them (the application finishing the batch in hand, its
    /// revocation callback): the window in which the coordinator must keep the partitions from
    /// their next owner. Below the rebalance timeout.
    #[serde(default)]
    pub revoke_ms: u64,
    /// Which group protocol the members speak.
    #[serde(default)]
    pub protocol: GroupProtocol,
    /// KIP-848 members ask for this server-side assignor (`uniform`, `range`); none: the
    /// broker's default.
    #[serde(default)]
    pub assignor: Option<String>,
    /// How members fetch: `basic` (Fetch v10 from each leader) or `librdkafka` (the validating
    /// consumers' path: Fetch v11 with leader epoch and rack, KIP-320 validation, committed
    /// leader epochs, KIP-392 follower reads). Clusters only.
    #[serde(default)]
    pub client: ConsumerClient,
    /// `client.rack` of member slot i: `racks[i % len]` (none when empty).
    #[serde(default)]
    pub racks: Vec<String>,
}

/// The `[transactions]` section: `producers` transactional producers (`txn-0`, `txn-1`...),
/// each running one transaction every `interval_ms` over 1..=`partitions_per_txn` partitions of
/// the `txn-workload` topic, aborting `abort_ratio` of them; one read_committed consumer.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transactions {
    #[serde(default = "default_txn_producers")]
    pub producers: u32,
    #[serde(default = "default_txn_partitions")]
    pub partitions: i32,
    #[serde(default = "default_partitions_per_txn")]
    pub partitions_per_txn: u32,
    #[serde(default = "default_abort_ratio")]
    pub abort_ratio: f64,
    #[serde(default = "default_txn_interval")]
    pub interval_ms: u64,
    #[serde(default = "default_read_interval")]
    pub read_interval_ms: u64,
    /// `transaction.timeout.ms` the producers ask for: an abandoned transaction is aborted by
    /// the coordinator after it, well within the drain.
    #[serde(default = "default_txn_timeout")]
    pub transaction_timeout_ms: i32,
    /// Between healing and the final read: abandoned transactions time out meanwhile.
    #[serde(default = "default_txn_drain")]
    pub drain_secs: u64,
    /// Consume-transform-produce (`txn_pipeline`): one task per partition of the workload's
    /// topic, writing to `output_partitions` partitions of `txn-output`.
    #[serde(default)]
    pub pipeline: bool,
    #[serde(default = "default_output_partitions")]
    pub output_partitions: i32,
    /// Input records one pipeline transaction takes at most.
    #[serde(default = "default_pipeline_batch")]
    pub pipeline_batch: u32,
    /// The chance a task crashes after writing a transaction's outputs (before its offsets
    /// and EndTxn), restarting from the committed offset.
    #[serde(default = "default_pipeline_crash_ratio")]
    pub pipeline_crash_ratio: f64,
    /// The transaction protocol the clients speak: 1 (KIP-98: AddPartitionsToTxn,
    /// AddOffsetsToTxn, EndTxn v1; librdkafka's path) or 2 (KIP-890 part 2: Produce v12 and
    /// TxnOffsetCommit v5 add partitions implicitly, EndTxn v5 answers the bumped epoch the
    /// client goes on with; Java 4.x's path). With 2 the cluster is formatted with
    /// `transaction.version=2` finalized, as `weir format` does, and a client speaks v2 only
    /// when ApiVersions says so (as Java's).
    #[serde(default = "one_version")]
    pub version: u8,
    /// The chance that an EndTxn's first send is held in the network (KAFKA-17754's delayed
    /// EndTxn): the client gets no answer within `end_txn_timeout_ms`, retries on a new
    /// connection and goes on to its next transaction; the held request reaches the
    /// coordinator once that next transaction has written a record (or after
    /// `end_txn_hold_max_ms`). 0: never.
    #[serde(default)]
    pub end_txn_hold_ratio: f64,
    /// How long a client waits for a held EndTxn's answer before it retries (its request
    /// time-out for that request; the producers' `request_timeout_ms` when absent).
    #[serde(default)]
    pub end_txn_timeout_ms: Option<u64>,
    #[serde(default = "default_end_txn_hold_max")]
    pub end_txn_hold_max_ms: u64,
    /// The transactional clients' request time-out at the coordinators (InitProducerId,
    /// AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn, OffsetFetch): Java's
    /// `request.timeout.ms`, 30 s (librdkafka's `socket.timeout.ms` is 60 s) — far longer than
    /// the nemesis's partitions, so a request a partition holds is answered late on its own
    /// connection, in order, not abandoned. Shorter, a client gives up on a held request and
    /// sends it again on a new connection while the first is still in the network: under
    /// transactions v1 an abandoned TxnOffsetCommit may then reach the group coordinator
    /// inside a later transaction of the same epoch (`txn_check`'s stale offset commit).
    #[serde(default = "default_txn_request_timeout")]
    pub request_timeout_ms: u64,
    /// The chance that a pipeline task's TxnOffsetCommit's first send is held in the network
    /// (its group coordinator's node cut off from that connection): the client waits
    /// `request_timeout_ms` for the answer; past it, it retries on a new connection and goes
    /// on, and the held request reaches the coordinator once a later transaction of the task
    /// has had its own offsets accepted (or after `end_txn_hold_max_ms`). 0: never.
    #[serde(default)]
    pub offset_commit_hold_ratio: f64,
}

fn default_txn_request_timeout() -> u64 {
    30_000
}

fn one_version() -> u8 {
    1
}
fn default_end_txn_hold_max() -> u64 {
    5000
}

fn default_output_partitions() -> i32 {
    3
}
fn default_pipeline_batch() -> u32 {
    4
}
fn default_pipeline_crash_ratio() -> f64 {
    0.1
}

fn default_txn_producers() -> u32 {
    2
}
fn default_txn_partitions() -> i32 {
    3
}
fn default_partitions_per_txn() -> u32 {
    2
}
fn default_abort_ratio() -> f64 {
    0.3
}
fn default_txn_interval() -> u64 {
    50
}
fn default_read_interval() -> u64 {
    20
}
fn default_txn_timeout() -> i32 {
    5000
}
fn default_txn_drain() -> u64 {
    10
}

impl Transactions {
    fn validate(&self) -> Result<(), String> {
        if self.producers == 0 || self.producers > 16 || !(1..=64).contains(&self.partitions) {
            return Err("transactions: producers 1..=16, partitions 1..=64".into());
        }
        if self.partitions_per_txn == 0 || !(0.0..=1.0).contains(&self.abort_ratio) {
            return Err("transactions: partitions_per_txn ≥ 1, abort_ratio 0..=1".into());
        }
        if self.transaction_timeout_ms <= 0
            || self.drain_secs * 1000 <= self.transaction_timeout_ms as u64
        {
            return Err("transactions: drain_secs must outlast transaction_timeout_ms".into());
        }
        if !(1..=64).contains(&self.output_partitions)
            || self.pipeline_batch == 0
            || !(0.0..=1.0).contains(&self.pipeline_crash_ratio)
        {
            return Err(
                "transactions: output_partitions 1..=64, pipeline_batch ≥ 1, \
                 pipeline_crash_ratio 0..=1"
                    .into(),
            );
        }
        if !(1..=2).contains(&self.version) || !(0.0..=1.0).contains(&self.end_txn_hold_ratio) {
            return Err("transactions: version 1 or 2, end_txn_hold_ratio 0..=1".into());
        }
        if self.request_timeout_ms == 0 || !(0.0..=1.0).contains(&self.offset_commit_hold_ratio) {
            return Err(
                "transactions: request_timeout_ms ≥ 1, offset_commit_hold_ratio 0..=1".into(),
            );
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum GroupProtocol {
    /// JoinGroup/SyncGroup/Heartbeat (Kafka's `group.protocol=classic`).
    #[default]
    Classic,
    /// ConsumerGroupHeartbeat (KIP-848, `group.protocol=consumer`).
    Consumer,
    /// Even-numbered groups classic, odd ones consumer, side by side on one coordinator.
    Mixed,
}

fn default_members() -> u32 {
    3
}
fn default_session() -> u64 {
    6000
}
fn default_rebalance() -> u64 {
    10_000
}
fn default_heartbeat() -> u64 {
    1000
}
fn default_drain() -> u64 {
    40
}

impl Groups {
    /// The protocol group `group`'s members speak.
    pub fn protocol_of(&self, group: u32) -> GroupProtocol {
        match self.protocol {
            GroupProtocol::Mixed if group.is_multiple_of(2) => GroupProtocol::Classic,
            GroupProtocol::Mixed => GroupProtocol::Consumer,
            p => p,
        }
    }

    /// Whether some group speaks KIP-848 (the broker's `group.consumer.*` timers then follow
    /// this section's).
    pub fn any_consumer(&self) -> bool {
        (0..self.count).any(|g| self.protocol_of(g) == GroupProtocol::Consumer)
    }

    pub fn settle_bound_ms(&self) -> u64 {
        self.settle_bound_ms
            .unwrap_or(self.session_timeout_ms + 2 * self.rebalance_timeout_ms + 10_000)
    }

    fn validate(&self) -> Result<(), String> {
        if self.count == 0 || self.count > 16 || self.members == 0 || self.members > 16 {
            return Err("groups.count and groups.members must be 1..=16".into());
        }
        if self.heartbeat_interval_ms == 0
            || self.heartbeat_interval_ms >= self.session_timeout_ms
            || self.session_timeout_ms > 600_000
            || self.rebalance_timeout_ms == 0
            || self.rebalance_timeout_ms > 600_000
        {
            return Err(
                "groups: 0 < heartbeat_interval_ms < session_timeout_ms ≤ 600000, 0 < rebalance_timeout_ms ≤ 600000"
                    .into(),
            );
        }
        let rates = [
            self.leaves_per_min,
            self.crashes_per_min,
            self.stalls_per_min,
        ];
        if rates.iter().any(|r| !(0.0..=60.0).contains(r)) {
            return Err("groups churn rates must be 0..=60 per minute".into());
        }
        if self.revoke_ms >= self.rebalance_timeout_ms.min(self.session_timeout_ms) {
            return Err("groups.revoke_ms must be below the rebalance and session timeouts".into());
        }
        if let Some(a) = &self.assignor {
            if a != "uniform" && a != "range" {
                return Err(format!("groups.assignor '{a}': uniform or range"));
            }
        }
        if self.drain_secs == 0 || self.drain_secs > 600 {
            return Err("groups.drain_secs must be 1..=600".into());
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Admin {
    /// Time between admin operations (create, delete, add partitions, alter configs).
    #[serde(default = "default_admin_interval")]
    pub interval_ms: u64,
    #[serde(default = "default_request_timeout")]
    pub request_timeout_ms: u64,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reassign {
    /// Time between reassignments of a random partition to random brokers.
    pub interval_ms: u64,
    /// One operation in this many cancels the partition's reassignment instead (0: never).
    #[serde(default)]
    pub cancel_one_in: u32,
    #[serde(default = "default_request_timeout")]
    pub request_timeout_ms: u64,
}

/// The `[deleter]` section (`record_deleter.rs`): DeleteRecords on the workload topic.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Deleter {
    /// At most this many deletions a run.
    #[serde(default = "default_deleter_count")]
    pub count: u32,
    /// Delete only records older than this: below a high watermark the deleter saw at least
    /// `keep_ms` earlier (0: below the current one).
    #[serde(default)]
    pub keep_ms: u64,
    /// Bounds of the pause before each deletion (drawn uniformly).
    #[serde(default = "default_deleter_interval")]
    pub interval_ms: [u64; 2],
    /// Each attempt's bound; the request asks the leader to answer within half of it.
    #[serde(default = "default_deleter_timeout")]
    pub request_timeout_ms: u64,
    /// The whole call's bound, retries included (the Java AdminClient's
    /// `default.api.timeout.ms`, 60 s, scaled by 1/10 as the clients' other time-outs are).
    #[serde(default = "default_deleter_api_timeout")]
    pub api_timeout_ms: u64,
}

fn default_deleter_count() -> u32 {
    20
}
fn default_deleter_interval() -> [u64; 2] {
    [500, 2000]
}
fn default_deleter_timeout() -> u64 {
    5000
}
fn default_deleter_api_timeout() -> u64 {
    6000
}

fn default_admin_interval() -> u64 {
    1000
}

/// How a multi-node cluster splits the roles among its nodes.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Roles {
    /// Every node is `process.roles=broker,controller` and a voter.
    #[default]
    Combined,
    /// `controllers` pure controllers (the voters) and `brokers` pure brokers (observers).
    Split,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cluster {
    /// Nodes with the broker role. With `roles = "combined"` this is the node count.
    #[serde(default = "one")]
    pub brokers: u32,
    #[serde(default)]
    pub roles: Roles,
    /// With `roles = "split"`: how many pure controllers (node ids 1..=controllers; the
    /// brokers follow).
    #[serde(default)]
    pub controllers: u32,
    /// Each node's wall clock is offset by up to this much (either way) at start.
    #[serde(default)]
    pub clock_offset_ms: u64,
    /// Each node's clock runs fast or slow by up to this many parts per million.
    #[serde(default)]
    pub clock_drift_ppm: u64,
    /// How long an fsync takes, in simulated microseconds: [min, max].
    #[serde(default = "default_fsync_latency")]
    pub fsync_latency_us: [u64; 2],
    /// Each broker in a rack of its own: `broker.rack=RACK<node id>` (KIP-392 follower reads
    /// with `replica.selector.class` and consumers' `racks`).
    #[serde(default)]
    pub racks: bool,
    /// The controller listener (quorum, broker sessions, relayed admin requests) is SASL_SSL
    /// with PLAIN, so every inter-node link does a TLS handshake and a SASL login, under the
    /// scenario's faults too (`world::secure_controller_properties`).
    #[serde(default)]
    pub secure_controller: bool,
    /// Every inter-node link is secured: the controller listener as with `secure_controller`,
    /// and the inter-broker listener (replica fetchers, transaction markers) a third one,
    /// INTERNAL, SASL_SSL with OAUTHBEARER (unsecured tokens of [`Cluster::token_secs`]), so
    /// sessions end with their tokens and links re-authenticate (KIP-368) under the faults;
    /// clients stay on PLAINTEXT (`world::secure_links_properties`).
    #[serde(default)]
    pub secure_links: bool,
    /// With `secure_links`: the lifetime of the nodes' OAUTHBEARER tokens, in seconds.
    #[serde(default = "default_token_secs")]
    pub token_secs: u64,
}

fn default_token_secs() -> u64 {
    3600
}

fn default_fsync_latency() -> [u64; 2] {
    [500, 5000]
}

impl Default for Cluster {
    fn default() -> Self {
        Cluster {
            brokers: 1,
            roles: Roles::Combined,
            controllers: 0,
            clock_offset_ms: 0,
            clock_drift_ppm: 0,
            fsync_latency_us: default_fsync_latency(),
            racks: false,
            secure_controller: false,
            secure_links: false,
            token_secs: default_token_secs(),
        }
    }
}

fn one() -> u32 {
    1
}

impl Cluster {
    /// Every simulated node (machine), brokers and pure controllers.
    pub fn nodes(&self) -> u32 {
        match self.roles {
            Roles::Combined => self.brokers,
            Roles::Split => self.controllers + self.brokers,
        }
    }

    /// More than one node: the nodes form a quorum from generated cluster configs.
    pub fn is_multi_node(&self) -> bool {
        self.nodes() > 1 || self.roles == Roles::Split
    }

    /// Whether node `index` (0-based) has the broker role.
    pub fn is_broker(&self, index: u32) -> bool {
        match self.roles {
            Roles::Combined => true,
            Roles::Split => index >= self.controllers,
        }
    }

    /// Whether node `index` (0-based) is a voter of the metadata quorum.
    pub fn is_voter(&self, index: u32) -> bool {
        match self.roles {
            Roles::Combined => true,
            Roles::Split => index < self.controllers,
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topic {
    #[serde(default = "default_topic")]
    pub name: String,
    #[serde(default = "default_partitions")]
    pub partitions: i32,
    #[serde(default = "one_i16")]
    pub replication_factor: i16,
    #[serde(default)]
    pub configs: BTreeMap<String, String>,
}

impl Default for Topic {
    fn default() -> Self {
        Topic {
            name: default_topic(),
            partitions: default_partitions(),
            replication_factor: 1,
            configs: BTreeMap::new(),
        }
    }
}

fn default_topic() -> String {
    "events".into()
}
fn default_partitions() -> i32 {
    3
}
fn one_i16() -> i16 {
    1
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Producers {
    #[serde(default = "one")]
    pub count: u32,
    /// "0", "1" or "all".
    #[serde(default = "default_acks")]
    pub acks: String,
    #[serde(default = "yes")]
    pub idempotent: bool,
    /// Produce requests per simulated second, per producer.
    #[serde(default = "default_rate")]
    pub rate: u32,
    #[serde(default = "default_batch")]
    pub batch_records: u32,
    /// Attempts after the first for a batch that failed with a retriable error (librdkafka's
    /// `retries`, unbounded by default: `delivery_timeout_ms` bounds a batch).
    #[serde(default = "default_retries")]
    pub retries: u32,
    /// `request.timeout.ms`, scaled like the other client time-outs (librdkafka: 30 s).
    #[serde(default = "default_request_timeout")]
    pub request_timeout_ms: u64,
    /// `delivery.timeout.ms`: how long after it was produced a batch is retried before its
    /// delivery report says `_MSG_TIMED_OUT` (librdkafka: 300 s, scaled by 1/10).
    #[serde(default = "default_delivery_timeout")]
    pub delivery_timeout_ms: u64,
    /// `retry.backoff.ms` and `retry.backoff.max.ms` (librdkafka: 100 ms and 1 s): the wait
    /// before a retry doubles with every failure in a row, up to the maximum.
    #[serde(default = "default_retry_backoff")]
    pub retry_backoff_ms: u64,
    #[serde(default = "default_retry_backoff_max")]
    pub retry_backoff_max_ms: u64,
    /// `topic.metadata.refresh.interval.ms`: how long a client trusts a cached leader without
    /// an error saying it moved (librdkafka: 300 s, scaled by 1/10).
    #[serde(default = "default_metadata_refresh")]
    pub metadata_refresh_interval_ms: u64,
    /// Produce requests a producer keeps in flight on its connection (Kafka clients'
    /// `max.in.flight.requests.per.connection`, default 5; idempotence allows at most 5).
    #[serde(default = "default_in_flight")]
    pub max_in_flight: u32,
}

fn default_in_flight() -> u32 {
    5
}

impl Default for Producers {
    fn default() -> Self {
        Producers {
            count: 1,
            acks: default_acks(),
            idempotent: true,
            rate: default_rate(),
            batch_records: default_batch(),
            retries: default_retries(),
            request_timeout_ms: default_request_timeout(),
            delivery_timeout_ms: default_delivery_timeout(),
            retry_backoff_ms: default_retry_backoff(),
            retry_backoff_max_ms: default_retry_backoff_max(),
            metadata_refresh_interval_ms: default_metadata_refresh(),
            max_in_flight: default_in_flight(),
        }
    }
}

fn default_acks() -> String {
    "all".into()
}
fn yes() -> bool {
    true
}
fn default_rate() -> u32 {
    50
}
fn default_batch() -> u32 {
    5
}
fn default_retries() -> u32 {
    i32::MAX as u32
}
fn default_delivery_timeout() -> u64 {
    30_000
}
fn default_retry_backoff() -> u64 {
    100
}
fn default_retry_backoff_max() -> u64 {
    1000
}
fn default_metadata_refresh() -> u64 {
    30_000
}
fn default_request_timeout() -> u64 {
    3000
}

impl Producers {
    pub fn acks_value(&self) -> Result<i16, String> {
        match self.acks.as_str() {
            "all" | "-1" => Ok(-1),
            "1" => Ok(1),
            "0" => Ok(0),
            other => Err(format!("producers.acks must be 0, 1 or all, not '{other}'")),
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Consumers {
    #[serde(default = "one")]
    pub count: u32,
    #[serde(default = "default_poll")]
    pub max_wait_ms: u64,
    /// How they fetch (`validating_consumer.rs` for `librdkafka`).
    #[serde(default)]
    pub client: ConsumerClient,
    /// `client.rack` of consumer i: `racks[i % len]` (none when empty).
    #[serde(default)]
    pub racks: Vec<String>,
}

impl Default for Consumers {
    fn default() -> Self {
        Consumers {
            count: 1,
            max_wait_ms: default_poll(),
            client: ConsumerClient::default(),
            racks: Vec::new(),
        }
    }
}

/// The consumers' fetch path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConsumerClient {
    /// Fetch v10 from the leader Metadata names; no leader epoch, no rack, no validation.
    #[default]
    Basic,
    /// As librdkafka: Fetch v11 with the current leader epoch and the rack, position
    /// validation after leader changes (KIP-320), follower reads (KIP-392). Clusters only.
    Librdkafka,
}

fn default_poll() -> u64 {
    200
}

/// Faults: random ones drawn from the seed (weights below; 0 disables a kind), plus an
/// explicit timeline. All heal before the final check.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Nemesis {
    /// Time between random faults, in simulated ms: [min, max].
    #[serde(default = "default_interval")]
    pub interval_ms: [u64; 2],
    /// How long a fault with a duration lasts, in simulated ms: [min, max].
    #[serde(default = "default_fault_duration")]
    pub duration_ms: [u64; 2],
    /// Relative weights of random fault kinds.
    #[serde(default)]
    pub weights: BTreeMap<FaultKind, u32>,
    /// Independent streams of random faults running at once (each drawing its own faults and
    /// intervals), so that faults overlap: a leader isolated while the previous one still is.
    #[serde(default = "one")]
    pub streams: u32,
    #[serde(default)]
    pub timeline: Vec<TimedFault>,
    /// Replay a recorded schedule with the seed's own draws (shrunk files): each timeline fault
    /// that names a `stream` is injected by that random stream, which makes the draws it made
    /// when it drew the fault (interval, kind among `weights`, node, duration). madsim draws
    /// everything (network delays, the broker's entropy) from one generator, so without those
    /// draws the rest of the run falls differently; with them a full recorded schedule replays
    /// the very run it came from (the same trace hash). No fresh random faults are drawn.
    #[serde(default)]
    pub replay_draws: bool,
    /// Rates used by the disk faults while they are active.
    #[serde(default = "default_disk_rate")]
    pub disk_error_rate: f64,
    /// Latency added by the `latency` fault, in ms: [min, max].
    #[serde(default = "default_latency")]
    pub latency_ms: [u64; 2],
    /// Packet loss rate during the `loss` fault.
    #[serde(default = "default_loss")]
    pub loss_rate: f64,
    /// Narrow-window disk faults (see `buggify.rs`).
    #[serde(default)]
    pub buggify: crate::buggify::Buggify,
    /// Aimed faults in the replication path (see `aimed.rs`); off when absent.
    #[serde(default)]
    pub aimed: Option<crate::aimed::Aimed>,
}

impl Default for Nemesis {
    fn default() -> Self {
        Nemesis {
            interval_ms: default_interval(),
            duration_ms: default_fault_duration(),
            weights: BTreeMap::new(),
            streams: 1,
            timeline: Vec::new(),
            replay_draws: false,
            disk_error_rate: default_disk_rate(),
            latency_ms: default_latency(),
            loss_rate: default_loss(),
            buggify: crate::buggify::Buggify::default(),
            aimed: None,
        }
    }
}

fn default_interval() -> [u64; 2] {
    [1000, 4000]
}
fn default_fault_duration() -> [u64; 2] {
    [200, 2000]
}
fn default_disk_rate() -> f64 {
    0.05
}
fn default_latency() -> [u64; 2] {
    [5, 200]
}
fn default_loss() -> f64 {
    0.1
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// Kill the broker process and restart it: the OS keeps every write.
    Kill,
    /// Cut the machine's power and restart it: unsynced writes may vanish or tear.
    PowerLoss,
    /// Freeze the process (GC pause, SIGSTOP) for a while.
    Pause,
    /// Cut a node off from everyone (both directions).
    Isolate,
    /// Cut one direction only: the node hears but cannot speak.
    IsolateOut,
    /// Split the nodes into a majority and a minority.
    Split,
    /// Add network latency.
    Latency,
    /// Drop packets (TCP turns loss into delay).
    Loss,
    /// Jump a node's wall clock.
    ClockJump,
    /// Reads and writes fail with EIO at `disk_error_rate`.
    DiskEio,
    /// The disk is full.
    DiskFull,
    /// fsync fails with EIO at `disk_error_rate`.
    SyncEio,
    /// A bit flips at rest (CRC must catch it on read).
    BitFlip,
    /// A write is acknowledged by the disk but never lands.
    LostWrite,
    /// A write lands at the wrong offset.
    MisdirectedWrite,
    /// The last of the node's `log.dirs` dies (every I/O under it fails with EIO) for the
    /// fault's duration (JBOD, KIP-858); then the node restarts with the disk back.
    FailLogDir,
    /// `kill`, of the node that leads the metadata quorum (found by asking every node).
    KillLeader,
    /// `power_loss`, of the quorum leader.
    PowerLossLeader,
    /// `pause`, of the quorum leader.
    PauseLeader,
    /// `isolate`, of the quorum leader.
    IsolateLeader,
    /// Split the nodes so that the quorum leader is on the minority side (with fewer than
    /// half of the voters) and the clients on either side.
    SplitLeaderMinority,
    /// Every node loses power at the same instant (a data-centre outage) and restarts after
    /// the fault's duration; the chosen node is only where the schedule records it.
    PowerLossAll,
    /// Cut a node off from every controller (every other voter of the quorum) both ways,
    /// while clients and pure brokers still reach it.
    CutFromControllers,
    /// `kill`, of the leader of a random partition of the workload's topic (from the freshest
    /// metadata image among the running brokers).
    KillPartitionLeader,
    /// `power_loss`, of a partition leader.
    PowerLossPartitionLeader,
    /// `pause`, of a partition leader.
    PausePartitionLeader,
    /// `isolate`, of a partition leader (cut off from everyone, clients included).
    IsolatePartitionLeader,
    /// `cut_from_controllers`, of a partition leader: a zombie leader that clients still
    /// reach (notes §7.6).
    CutPartitionLeaderFromControllers,
}

impl FaultKind {
    /// For a fault aimed at the quorum leader: the fault it applies to that node.
    pub fn at_leader(self) -> Option<FaultKind> {
        match self {
            FaultKind::KillLeader => Some(FaultKind::Kill),
            FaultKind::PowerLossLeader => Some(FaultKind::PowerLoss),
            FaultKind::PauseLeader => Some(FaultKind::Pause),
            FaultKind::IsolateLeader => Some(FaultKind::Isolate),
            FaultKind::SplitLeaderMinority => Some(FaultKind::Split),
            _ => None,
        }
    }

    /// For a fault aimed at a partition leader: the fault it applies to that node.
    pub fn at_partition_leader(self) -> Option<FaultKind> {
        match self {
            FaultKind::KillPartitionLeader => Some(FaultKind::Kill),
            FaultKind::PowerLossPartitionLeader => Some(FaultKind::PowerLoss),
            FaultKind::PausePartitionLeader => Some(FaultKind::Pause),
            FaultKind::IsolatePartitionLeader => Some(FaultKind::Isolate),
            FaultKind::CutPartitionLeaderFromControllers => Some(FaultKind::CutFromControllers),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TimedFault {
    pub at_ms: u64,
    pub fault: FaultKind,
    /// Broker index (0-based); defaults to 0.
    #[serde(default)]
    pub node: u32,
    /// For faults that last; defaults to a random draw from `duration_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// For a fault aimed at a partition leader: the partition (else one drawn at random). In a
    /// recorded schedule, `node` is then the leader it hit (the fallback when none is known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<i32>,
    /// In a recorded schedule, the random stream that drew the fault (see
    /// `nemesis.replay_draws`); none for a timeline fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<u32>,
}

impl Scenario {
    pub fn load(path: &Path) -> Result<Scenario, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut scenario: Scenario =
            toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        if scenario.name.is_empty() {
            scenario.name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
        }
        scenario
            .validate()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(scenario)
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.cluster.brokers == 0 || self.cluster.nodes() > 9 {
            return Err("cluster.brokers must be ≥ 1 and the cluster at most 9 nodes".into());
        }
        match self.cluster.roles {
            Roles::Combined if self.cluster.controllers != 0 => {
                return Err("cluster.controllers needs roles = \"split\"".into());
            }
            Roles::Split if self.cluster.controllers == 0 => {
                return Err("roles = \"split\" needs cluster.controllers ≥ 1".into());
            }
            _ => {}
        }
        if self.cluster.is_multi_node() {
            // The data workload routes by Metadata: producer k writes partition k mod P
            // through that partition's leader (with fewer producers than partitions, the
            // rest get only the liveness probe's record).
            if self.topic.replication_factor as u32 > self.cluster.brokers {
                return Err("topic.replication_factor exceeds cluster.brokers".into());
            }
        }
        if self.duration_secs == 0 || self.duration_secs > 3600 {
            return Err("duration_secs must be 1..=3600".into());
        }
        if self.topic.partitions < 1 || self.topic.partitions > 64 {
            return Err("topic.partitions must be 1..=64".into());
        }
        self.producers.acks_value()?;
        if self.producers.count > 32 || self.producers.rate == 0 || self.producers.rate > 10_000 {
            return Err("producers.count must be ≤ 32 and producers.rate 1..=10000".into());
        }
        if let Some(r) = &self.reassign {
            if r.interval_ms < 10 || r.request_timeout_ms == 0 {
                return Err(
                    "reassign.interval_ms must be ≥ 10 and reassign.request_timeout_ms > 0".into(),
                );
            }
            if self.topic.replication_factor as u32 > self.cluster.brokers {
                return Err("reassign needs topic.replication_factor ≤ cluster.brokers".into());
            }
        }
        if let Some(d) = &self.deleter {
            let [lo, hi] = d.interval_ms;
            if lo < 10 || hi < lo || d.count > 10_000 {
                return Err(
                    "deleter.interval_ms must be [lo, hi] with 10 ≤ lo ≤ hi, deleter.count ≤ 10000"
                        .into(),
                );
            }
            if d.request_timeout_ms < 2 || d.api_timeout_ms < d.request_timeout_ms {
                return Err(
                    "deleter.request_timeout_ms must be ≥ 2 and ≤ deleter.api_timeout_ms".into(),
                );
            }
            if self.producers.acks_value()? == 0 {
                // Unanswered writes have no offset: a deleted one would look lost (`sent`).
                return Err("deleter needs producers.acks other than 0".into());
            }
        }
        if let Some(admin) = &self.admin {
            if admin.interval_ms < 10 || admin.request_timeout_ms == 0 {
                return Err(
                    "admin.interval_ms must be ≥ 10 and admin.request_timeout_ms > 0".into(),
                );
            }
        }
        let p = &self.producers;
        if p.delivery_timeout_ms == 0
            || p.retry_backoff_ms == 0
            || p.retry_backoff_max_ms < p.retry_backoff_ms
            || p.metadata_refresh_interval_ms == 0
        {
            return Err(
                "producers: delivery_timeout_ms, retry_backoff_ms and \
                 metadata_refresh_interval_ms must be > 0, retry_backoff_max_ms ≥ retry_backoff_ms"
                    .into(),
            );
        }
        let in_flight = self.producers.max_in_flight;
        if in_flight == 0 || in_flight > 64 || (self.producers.idempotent && in_flight > 5) {
            return Err(
                "producers.max_in_flight must be 1..=64, and at most 5 with idempotence (as Kafka requires)"
                    .into(),
            );
        }
        if self.producers.batch_records == 0 || self.producers.batch_records > 10_000 {
            return Err("producers.batch_records must be 1..=10000".into());
        }
        if let Some(groups) = &self.groups {
            groups.validate()?;
            if groups.client == ConsumerClient::Librdkafka && !self.cluster.is_multi_node() {
                return Err("groups.client = \"librdkafka\" needs a cluster (brokers > 1)".into());
            }
        }
        if let Some(t) = &self.transactions {
            t.validate()?;
        }
        if self.consumers.client == ConsumerClient::Librdkafka && !self.cluster.is_multi_node() {
            return Err("consumers.client = \"librdkafka\" needs a cluster (brokers > 1)".into());
        }
        if self.consumers.count > 32 {
            return Err("consumers.count must be ≤ 32".into());
        }
        let [lo, hi] = self.nemesis.interval_ms;
        if lo == 0 || lo > hi {
            return Err("nemesis.interval_ms must be [min, max] with 0 < min ≤ max".into());
        }
        let [lo, hi] = self.nemesis.duration_ms;
        if lo > hi {
            return Err("nemesis.duration_ms must be [min, max] with min ≤ max".into());
        }
        // Transactions v1 cannot tell an abandoned TxnOffsetCommit from one of the producer's
        // next transaction at the same epoch: a safe v1 pipeline needs clients that wait a
        // partition out (a clogged link's data arrives up to about twice the cut's length
        // after it began) rather than abandon requests to it, as real clients' time-outs do.
        if let Some(t) = self.transactions.as_ref().filter(|t| {
            self.expect == Expect::Safe
                && t.version == 1
                && t.pipeline
                && !self.nemesis.weights.is_empty()
        }) {
            if t.request_timeout_ms <= 2 * hi {
                return Err(format!(
                    "transactions.request_timeout_ms {} must exceed twice nemesis.duration_ms's \
                     {hi} in a safe v1 pipeline (Kafka v1's stale TxnOffsetCommit; see \
                     transactions-v1-stale-offset-commit)",
                    t.request_timeout_ms
                ));
            }
        }
        for fault in &self.nemesis.timeline {
            if fault.node >= self.cluster.nodes() {
                return Err(format!(
                    "timeline fault at {} ms names node {}",
                    fault.at_ms, fault.node
                ));
            }
            if fault.stream.is_some_and(|s| s >= self.nemesis.streams) {
                return Err(format!(
                    "timeline fault at {} ms names stream {:?} of {}",
                    fault.at_ms, fault.stream, self.nemesis.streams
                ));
            }
            if fault
                .partition
                .is_some_and(|p| p < 0 || p >= self.topic.partitions)
            {
                return Err(format!(
                    "timeline fault at {} ms names partition {:?}",
                    fault.at_ms, fault.partition
                ));
            }
        }
        if self.nemesis.replay_draws && self.nemesis.weights.values().all(|&w| w == 0) {
            return Err("nemesis.replay_draws needs the weights the faults were drawn with".into());
        }
        // Planted bugs exist only in the simulator build (`cfg(madsim)`) of the broker.
        #[cfg(madsim)]
        if let Some(bug) = &self.planted_bug {
            weir::config::PlantedBug::parse(bug)?;
        }
        self.nemesis.buggify.validate()?;
        if !(1..=8).contains(&self.nemesis.streams) {
            return Err(format!(
                "nemesis.streams: {} is not in 1..=8",
                self.nemesis.streams
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_scenario_parses() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                Scenario::load(&path).unwrap();
                seen += 1;
            }
        }
        assert!(seen > 0);
    }

    #[test]
    fn a_safe_v1_pipeline_needs_clients_that_wait_a_partition_out() {
        let load = |expect: &str, version: u8, timeout: &str| {
            let s = toml::from_str::<Scenario>(&format!(
                "expect = \"{expect}\"\n[transactions]\npipeline = true\nversion = {version}\n\
                 {timeout}\n[nemesis]\nduration_ms = [500, 3000]\nweights = {{ split = 1 }}\n"
            ))
            .unwrap();
            s.validate()
        };
        assert!(load("safe", 1, "").is_ok(), "real clients' 30 s");
        let short = load("safe", 1, "request_timeout_ms = 3000").unwrap_err();
        assert!(short.contains("request_timeout_ms"), "{short}");
        // Transactions v2 fences what a short time-out leaves in the network; an unsafe
        // scenario shows v1's limit on purpose.
        assert!(load("safe", 2, "request_timeout_ms = 3000").is_ok());
        assert!(load("unsafe", 1, "request_timeout_ms = 300").is_ok());
    }

    #[test]
    fn group_protocols_and_their_keys() {
        let groups = |body: &str| {
            let s = toml::from_str::<Scenario>(&format!("[groups]\ncount = 3\n{body}")).unwrap();
            let v = s.validate();
            (s.groups.unwrap(), v)
        };
        let (g, v) = groups("");
        assert!(v.is_ok());
        assert_eq!(g.protocol_of(1), GroupProtocol::Classic);
        assert!(!g.any_consumer());
        let (g, _) = groups("protocol = \"mixed\"");
        let of: Vec<GroupProtocol> = (0..3).map(|i| g.protocol_of(i)).collect();
        use GroupProtocol::{Classic, Consumer};
        assert_eq!(of, vec![Classic, Consumer, Classic]);
        assert!(g.any_consumer());
        assert!(groups("assignor = \"sticky\"")
            .1
            .unwrap_err()
            .contains("assignor"));
        assert!(groups("revoke_ms = 6000")
            .1
            .unwrap_err()
            .contains("revoke_ms"));
        assert!(groups("protocol = \"consumer\"\nrevoke_ms = 1500")
            .1
            .is_ok());
    }

    #[test]
    fn unknown_fields_are_refused() {
        let err = toml::from_str::<Scenario>("durration_secs = 3").unwrap_err();
        assert!(err.to_string().contains("durration_secs"));
    }

    #[test]
    fn fault_streams_are_bounded() {
        let parse = |streams: u32| {
            toml::from_str::<Scenario>(&format!("[nemesis]\nstreams = {streams}"))
                .unwrap()
                .validate()
        };
        assert!(parse(1).is_ok());
        assert!(parse(8).is_ok());
        assert!(parse(0).unwrap_err().contains("nemesis.streams"));
        assert!(parse(9).unwrap_err().contains("nemesis.streams"));
        assert_eq!(toml::from_str::<Scenario>("").unwrap().nemesis.streams, 1);
    }
}
