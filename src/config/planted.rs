//! Bugs the simulator plants on purpose, to show that its checker catches them.
//!
//! This module exists only in the simulator build (`cfg(madsim)`) and in unit tests
//! (`cfg(test)`): the production binary has no switch, no field and no name for any of them.
//! No config file can turn one on; only code that builds a [`ServerConfig`] by hand can. The one
//! exception is a test binary built with the `planted` feature (the real-process fault suite's
//! teeth): its `weir serve` plants the bug the `WEIR_PLANTED_BUG` environment variable names,
//! among those its broker-level sites check (the variants without `cfg(any(madsim, test))`).
//!
//! One way in: a bug reaches the code that acts on it only through that code's own
//! configuration. [`ServerConfig::planted_bug`] is where the simulator (or the `planted` build)
//! names it; whoever builds a core's or component's configuration from the broker's copies it
//! into a [`Planted`] field there (`RaftConfig`, `FetcherConfig`, `IsrConfig`, `GroupConfig`,
//! `ConsumerConfig`, `LogConfig`, the controller's), and the plant site asks
//! `config.planted.is(PlantedBug::X)` under `#[cfg(any(madsim, test))]`. The broker's own sites
//! ask [`planted!`] of its `ServerConfig`. There is no global or per-thread switch
//! (`tests/source_rules.rs` keeps it so), so a core's unit tests plant a bug by building its
//! config, and two brokers in one process could run different bugs.
//!
//! [`ServerConfig`]: super::ServerConfig
//! [`ServerConfig::planted_bug`]: super::ServerConfig::planted_bug

/// One plantable bug; its scenario name (kebab-case) is in [`PlantedBug::NAMES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PlantedBug {
    /// With `weir.fsync.before.ack=true`, acknowledge a batch after syncing only what came
    /// before it (an off-by-one-batch durability bug).
    AckBeforeFsync,
    /// Serve stored batches without checking their CRC (bit rot reaches clients).
    NoReadCrc,
    /// Never fsync a log's directory after creating or removing a segment in it (a new
    /// segment's name may vanish at power loss, with its fsynced data). Planted in the flush
    /// plan, so it reaches every log, the metadata log too.
    SkipDirFsync,
    /// Advance the recovery point (and so the high watermark and group commit) before the
    /// fsync it stands for, instead of after.
    RecoveryPointBeforeFsync,
    /// Keep serving after a failed fsync (the fsyncgate mistake: a later fsync "succeeds"
    /// over pages the failure dropped).
    ServeAfterFsyncError,
    /// Replication (pre-KIP-101): a follower cuts its log to its high watermark when it starts
    /// following (at start, to the one it checkpointed), which lags the leader's by a fetch:
    /// an acknowledged record it dropped is gone if it is elected before fetching it again.
    TruncateToHwOnRestart,
    /// Replication (pre-KIP-279): on a diverging epoch a follower cuts to the leader's end
    /// offset without its own end of that epoch, then fetches on without epoch checks; after a
    /// fast double failover it keeps a record the new leader does not have (notes §7.3).
    NoDivergingEpochCheck,
    /// Idempotence: remember only the last four batches per producer instead of five, so a
    /// retry of the fifth-newest batch is refused (or worse, re-appended) instead of answered.
    #[cfg(any(madsim, test))]
    DedupWindowFour,
    /// Idempotence: a retried batch recognised as a duplicate is appended again.
    #[cfg(any(madsim, test))]
    DuplicateAppended,
    /// Reads: serve up to the log end instead of the high watermark.
    #[cfg(any(madsim, test))]
    ReadPastHighWatermark,
    /// Follower reads (KIP-392): a follower serves consumers up to its log end, past its own
    /// high watermark (a leader still stops at its high watermark).
    #[cfg(any(madsim, test))]
    FollowerReadPastHighWatermark,
    /// Retention: delete segments regardless of the high watermark.
    #[cfg(any(madsim, test))]
    RetentionPastHighWatermark,
    /// Metadata: a commit is applied and acknowledged without its fsync.
    #[cfg(any(madsim, test))]
    MetadataNotSynced,
    /// Flushing: a flush syncs only the active segment, forgetting segments rolled since the
    /// last flush.
    #[cfg(any(madsim, test))]
    FlushActiveSegmentOnly,
    /// Recovery: the cut of a torn tail is not fsynced before new data is written after it.
    #[cfg(any(madsim, test))]
    RecoveryCutNotSynced,
    /// Recovery: a producer-state snapshot is trusted even when it covers offsets the
    /// recovered log no longer holds.
    #[cfg(any(madsim, test))]
    SnapshotBeyondLog,
    /// Reads: the offset index lookup returns the entry after the target instead of before.
    #[cfg(any(madsim, test))]
    IndexLookupPastTarget,
    /// Quorum: answer votes and act on a new epoch before `quorum-state` is durable, and never
    /// fsync its directory after the rename: a node that loses power may come back with an
    /// older `quorum-state`, forget its vote and vote twice in one epoch.
    QuorumVoteBeforePersist,
    /// Quorum: the leader advances the high watermark to what it alone has flushed, without a
    /// majority of voters.
    QuorumCommitOnMinority,
    /// Quorum: the leader serves every fetch without checking its last fetched epoch, so a
    /// follower whose log diverges is never told to truncate.
    QuorumNoDivergingEpoch,
    /// Quorum: grant votes without comparing the candidate's log with ours.
    QuorumGrantShorterLog,
    /// Replication: a pending ISR shrink takes effect in the high watermark at once, before the
    /// controller commits it (notes §1.7): the survivors alone commit offsets while the
    /// controller may still elect the follower being removed.
    #[cfg(any(madsim, test))]
    IsrShrinkAdvancesHw,
    /// Controller: elections without eligible leader replicas (Kafka before KIP-966): the
    /// last ISR member is never removed, so a broker that comes back from an unclean
    /// shutdown with a lost suffix is re-elected from that ISR, and the replicas that held
    /// the committed data truncate to it ("last replica standing").
    #[cfg(any(madsim, test))]
    NoEligibleLeaderReplicas,
    /// Groups: a member commit from an earlier generation is accepted (the member may even
    /// have been removed), so a fenced consumer's late commit overwrites the new owner's.
    #[cfg(any(madsim, test))]
    GroupCommitStaleGeneration,
    /// Groups: a removed member (left or expired) stays in the member list handed to the
    /// leader, so later rebalances assign its partitions to nobody alive.
    #[cfg(any(madsim, test))]
    GroupKeepsDepartedMember,
    /// Consumer groups (KIP-848): a member commit at an epoch older than the member's, or from
    /// a member no longer in the group (its session expired), is accepted, so a fenced
    /// consumer's late commit lands on a partition that has moved to another member.
    #[cfg(any(madsim, test))]
    ConsumerGroupCommitStaleEpoch,
    /// Consumer groups (KIP-848): reconciliation takes a member's revocation as done the moment
    /// it is asked for (the member moves to the new epoch and its revoked partitions are free
    /// for their next owner) instead of waiting for a heartbeat that leaves them out, so a
    /// partition reaches its new owner while the old one is still committing it.
    #[cfg(any(madsim, test))]
    ConsumerGroupAssignBeforeRevoke,
    /// Transactions: the last stable offset ignores open transactions (it is the high
    /// watermark), so read_committed readers get records of transactions not yet decided.
    #[cfg(any(madsim, test))]
    LsoPastOpenTransaction,
    /// Transactions v2 (KAFKA-17754's tooth): EndTxn v5 ends a transaction without bumping the
    /// producer epoch, so a late EndTxn or produce of an ended transaction lands in the next.
    #[cfg(any(madsim, test))]
    TxnV2NoEpochBump,
    /// Transactions: the coordinator writes a COMMIT's marker to every partition of the
    /// transaction but the last and takes them all as written, so that partition's part stays
    /// open (and is decided by whatever marker of the producer comes next). A broker-level
    /// site, so the `planted` build has it too (the real-process suite's transaction tooth).
    CommitMarkerSomePartitions,
    /// Transactions: an ABORT marker on `__consumer_offsets` makes the transaction's pending
    /// offsets (TxnOffsetCommit) the committed ones instead of dropping them, so a
    /// consume-transform-produce task skips the inputs of its aborted transaction.
    #[cfg(any(madsim, test))]
    TxnOffsetsOnAbort,
    /// Replication (issue 21's mutation run): the leader admits a follower to the ISR when the
    /// answer to its fetch will carry it to the high watermark (the leader's end at that fetch),
    /// one fetch round trip before the follower holds those records; elected in that round
    /// trip, it lacks committed records.
    #[cfg(any(madsim, test))]
    IsrExpandOneFetchEarly,
    /// Replication (pre-KIP-320, leader side): the leader never answers a follower's fetch with
    /// a diverging epoch; a follower with a tail from an older epoch keeps it and the leader
    /// counts it as replicated.
    #[cfg(any(madsim, test))]
    LeaderSkipsDivergingEpoch,
    /// Replication, right after an election: the high watermark skips followers whose log end
    /// the new leader does not know yet (instead of waiting for their first fetch), so it
    /// commits its whole log, and new appends, on its own say-so.
    #[cfg(any(madsim, test))]
    NewLeaderHwSkipsUnknown,
    /// Replication with `weir.fsync.before.ack`: a follower fetches on (telling the leader it
    /// holds everything below its log end) before fsyncing what it appended.
    #[cfg(any(madsim, test))]
    FollowerFetchBeforeFsync,
    /// Elections: with no topic or dynamic override, `unclean.leader.election.enable` is true
    /// (Kafka's default before 0.11; the static setting is not read), so a partition with no
    /// eligible replica elects any live one.
    #[cfg(any(madsim, test))]
    UncleanElectionByDefault,
    /// Quorum (Raft's "figure 8"): the leader commits an offset a majority holds even when it
    /// lies before the start of its own epoch, instead of waiting for a majority past it.
    #[cfg(any(madsim, test))]
    QuorumCommitOldEpoch,
    /// Quorum: a voter that already voted in an epoch grants a second candidate in it too.
    #[cfg(any(madsim, test))]
    QuorumDoubleVote,
    /// Quorum: a voter compares logs by end offset alone, not (last epoch, end offset), so a
    /// longer log of a stale epoch wins over a shorter one holding committed entries.
    #[cfg(any(madsim, test))]
    QuorumVoteComparesOffsetOnly,
    /// Groups: requests for a group on an offsets partition still loading are served (from
    /// what is loaded so far) instead of COORDINATOR_LOAD_IN_PROGRESS.
    #[cfg(any(madsim, test))]
    GroupServeWhileLoading,
    /// Groups: a new coordinator replays `__consumer_offsets` only up to its high watermark
    /// (which trails the log end on a new leader), the bug the cluster scenario found.
    #[cfg(any(madsim, test))]
    GroupLoadToHighWatermark,
    /// Admin: a controller that took over (active in a quorum epoch after the first) never
    /// carries out CreatePartitions and answers REQUEST_TIMED_OUT, while produce, fetch and
    /// every other change still work (a request queue only the first controller drains). A
    /// broker-level site, so the `planted` build has it too.
    CreatePartitionsStuckAfterFailover,
    /// Produce: a broker that does not lead the partition answers UNKNOWN_SERVER_ERROR instead
    /// of NOT_LEADER_OR_FOLLOWER (an internal "not leader" mapped to the generic code), which
    /// librdkafka surfaces instead of refreshing its metadata and retrying. Nothing is lost
    /// or written twice; only the availability check of what producers surface sees it. A
    /// broker-level site, so the `planted` build has it too.
    NotLeaderAnsweredUnknownServerError,
    /// Produce: once a partition's registration changed without an election (an ISR shrink
    /// or expand: its partition epoch passed its leader epoch), its leader never completes an
    /// acks=all wait on it (a purgatory keyed by the partition epoch the wait was registered
    /// under, never woken after the epoch moved): the request is held to its deadline and
    /// answered REQUEST_TIMED_OUT, which librdkafka retries until `delivery.timeout.ms`. Nothing
    /// is lost or refused; a user sees only delivery timeouts (`producer-availability`, the
    /// timeout half). A broker-level site, so the `planted` build has it too.
    AcksAllStuckAfterIsrChange,
    /// Admin: a broker whose relay of a client's admin request to the controller fails (the
    /// controller died or lost its leadership with the request in flight) answers the client
    /// UNKNOWN_SERVER_ERROR at once instead of holding the request for the next controller.
    /// librdkafka hands that error to the application (`admin-availability`). A broker-level
    /// site, so the `planted` build has it too.
    ForwardFailureAnsweredUnknownServerError,
    /// DeleteRecords (the bug found by reading on 7 December 2026, fixed in 518a673..7416dcf):
    /// a follower ignores the log start in its leader's fetch answers (it never adopts it), and
    /// DeleteRecords answers as soon as the leader moved its own log start, without waiting for
    /// the low watermark. After a leader change the deleted records are readable again.
    #[cfg(any(madsim, test))]
    FollowerIgnoresLogStart,
}

impl PlantedBug {
    /// Every bug with the name a scenario file uses for it.
    pub const NAMES: &'static [(&'static str, PlantedBug)] = &[
        ("ack-before-fsync", PlantedBug::AckBeforeFsync),
        ("no-read-crc", PlantedBug::NoReadCrc),
        ("skip-dir-fsync", PlantedBug::SkipDirFsync),
        (
            "recovery-point-before-fsync",
            PlantedBug::RecoveryPointBeforeFsync,
        ),
        ("serve-after-fsync-error", PlantedBug::ServeAfterFsyncError),
        (
            "truncate-to-hw-on-restart",
            PlantedBug::TruncateToHwOnRestart,
        ),
        (
            "no-diverging-epoch-check",
            PlantedBug::NoDivergingEpochCheck,
        ),
        #[cfg(any(madsim, test))]
        ("dedup-window-four", PlantedBug::DedupWindowFour),
        #[cfg(any(madsim, test))]
        ("duplicate-appended", PlantedBug::DuplicateAppended),
        #[cfg(any(madsim, test))]
        ("read-past-hw", PlantedBug::ReadPastHighWatermark),
        #[cfg(any(madsim, test))]
        (
            "follower-read-past-hw",
            PlantedBug::FollowerReadPastHighWatermark,
        ),
        #[cfg(any(madsim, test))]
        ("retention-past-hw", PlantedBug::RetentionPastHighWatermark),
        #[cfg(any(madsim, test))]
        ("metadata-not-synced", PlantedBug::MetadataNotSynced),
        #[cfg(any(madsim, test))]
        (
            "flush-active-segment-only",
            PlantedBug::FlushActiveSegmentOnly,
        ),
        #[cfg(any(madsim, test))]
        ("recovery-cut-not-synced", PlantedBug::RecoveryCutNotSynced),
        #[cfg(any(madsim, test))]
        ("snapshot-beyond-log", PlantedBug::SnapshotBeyondLog),
        #[cfg(any(madsim, test))]
        (
            "index-lookup-past-target",
            PlantedBug::IndexLookupPastTarget,
        ),
        (
            "quorum-vote-before-persist",
            PlantedBug::QuorumVoteBeforePersist,
        ),
        (
            "quorum-commit-on-minority",
            PlantedBug::QuorumCommitOnMinority,
        ),
        (
            "quorum-no-diverging-epoch",
            PlantedBug::QuorumNoDivergingEpoch,
        ),
        (
            "quorum-grant-shorter-log",
            PlantedBug::QuorumGrantShorterLog,
        ),
        #[cfg(any(madsim, test))]
        ("isr-shrink-advances-hw", PlantedBug::IsrShrinkAdvancesHw),
        #[cfg(any(madsim, test))]
        (
            "no-eligible-leader-replicas",
            PlantedBug::NoEligibleLeaderReplicas,
        ),
        #[cfg(any(madsim, test))]
        (
            "group-commit-stale-generation",
            PlantedBug::GroupCommitStaleGeneration,
        ),
        #[cfg(any(madsim, test))]
        (
            "group-keeps-departed-member",
            PlantedBug::GroupKeepsDepartedMember,
        ),
        #[cfg(any(madsim, test))]
        (
            "consumer-group-commit-stale-epoch",
            PlantedBug::ConsumerGroupCommitStaleEpoch,
        ),
        #[cfg(any(madsim, test))]
        (
            "consumer-group-assign-before-revoke",
            PlantedBug::ConsumerGroupAssignBeforeRevoke,
        ),
        #[cfg(any(madsim, test))]
        (
            "lso-past-open-transaction",
            PlantedBug::LsoPastOpenTransaction,
        ),
        #[cfg(any(madsim, test))]
        ("txn-v2-no-epoch-bump", PlantedBug::TxnV2NoEpochBump),
        (
            "commit-marker-some-partitions",
            PlantedBug::CommitMarkerSomePartitions,
        ),
        #[cfg(any(madsim, test))]
        ("txn-offsets-on-abort", PlantedBug::TxnOffsetsOnAbort),
        #[cfg(any(madsim, test))]
        (
            "isr-expand-one-fetch-early",
            PlantedBug::IsrExpandOneFetchEarly,
        ),
        #[cfg(any(madsim, test))]
        (
            "leader-skips-diverging-epoch",
            PlantedBug::LeaderSkipsDivergingEpoch,
        ),
        #[cfg(any(madsim, test))]
        (
            "new-leader-hw-skips-unknown",
            PlantedBug::NewLeaderHwSkipsUnknown,
        ),
        #[cfg(any(madsim, test))]
        (
            "follower-fetch-before-fsync",
            PlantedBug::FollowerFetchBeforeFsync,
        ),
        #[cfg(any(madsim, test))]
        (
            "unclean-election-by-default",
            PlantedBug::UncleanElectionByDefault,
        ),
        #[cfg(any(madsim, test))]
        ("quorum-commit-old-epoch", PlantedBug::QuorumCommitOldEpoch),
        #[cfg(any(madsim, test))]
        ("quorum-double-vote", PlantedBug::QuorumDoubleVote),
        #[cfg(any(madsim, test))]
        (
            "quorum-vote-compares-offset-only",
            PlantedBug::QuorumVoteComparesOffsetOnly,
        ),
        #[cfg(any(madsim, test))]
        (
            "group-serve-while-loading",
            PlantedBug::GroupServeWhileLoading,
        ),
        #[cfg(any(madsim, test))]
        (
            "group-load-to-high-watermark",
            PlantedBug::GroupLoadToHighWatermark,
        ),
        (
            "create-partitions-stuck-after-failover",
            PlantedBug::CreatePartitionsStuckAfterFailover,
        ),
        (
            "not-leader-answered-unknown-server-error",
            PlantedBug::NotLeaderAnsweredUnknownServerError,
        ),
        (
            "acks-all-stuck-after-isr-change",
            PlantedBug::AcksAllStuckAfterIsrChange,
        ),
        (
            "forward-failure-answered-unknown-server-error",
            PlantedBug::ForwardFailureAnsweredUnknownServerError,
        ),
        #[cfg(any(madsim, test))]
        (
            "follower-ignores-log-start",
            PlantedBug::FollowerIgnoresLogStart,
        ),
    ];

    pub fn parse(name: &str) -> Result<PlantedBug, String> {
        match PlantedBug::NAMES.iter().find(|(n, _)| *n == name) {
            Some(&(_, bug)) => Ok(bug),
            None => {
                let known: Vec<&str> = PlantedBug::NAMES.iter().map(|(n, _)| *n).collect();
                Err(format!(
                    "unknown planted bug '{name}' (known: {})",
                    known.join(", ")
                ))
            }
        }
    }

    pub fn name(self) -> &'static str {
        let found = PlantedBug::NAMES.iter().find(|(_, b)| *b == self);
        found.map(|(n, _)| *n).expect("every variant is in NAMES")
    }
}

/// The bug planted in a core, carried by the core's own configuration (`Planted::default()`:
/// none). A core asks `self.config.planted.is(PlantedBug::X)` at its plant site; its driver
/// copies [`ServerConfig::planted_bug`](super::ServerConfig) into it, and a core's unit tests
/// plant a bug by building the config. The field, like this type, exists only in the simulator
/// and test builds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Planted(Option<PlantedBug>);

impl Planted {
    pub fn new(bug: Option<PlantedBug>) -> Planted {
        Planted(bug)
    }

    pub fn is(self, bug: PlantedBug) -> bool {
        self.0 == Some(bug)
    }
}

/// `planted!(config, Variant)`: is this bug planted in this broker? `config` is a
/// [`ServerConfig`](super::ServerConfig) (or a reference to one).
#[macro_export]
macro_rules! planted {
    ($config:expr, $bug:ident) => {
        $config.planted_bug == Some($crate::config::PlantedBug::$bug)
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for &(name, bug) in PlantedBug::NAMES {
            assert_eq!(PlantedBug::parse(name), Ok(bug));
            assert_eq!(bug.name(), name);
        }
        let e = PlantedBug::parse("nope").unwrap_err();
        assert!(e.contains("ack-before-fsync, no-read-crc"), "{e}");
    }

    #[test]
    fn macro_reads_the_config() {
        let mut config = crate::config::ServerConfig::default_single_node();
        assert!(!planted!(config, NoReadCrc));
        config.planted_bug = Some(PlantedBug::NoReadCrc);
        assert!(planted!(config, NoReadCrc));
        assert!(!planted!(&config, AckBeforeFsync));
    }
}
