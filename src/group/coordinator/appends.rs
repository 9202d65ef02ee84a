//! Appends to `__consumer_offsets` in flight: what each one's completion must do, and the
//! dispatch of a completion to the file that owns its request. State that must survive a
//! restart (commits, assignments, deletes) takes effect, and is answered, only once its append
//! has committed.

use bytes::Bytes;

use super::offsets::txn::TxnWritten;
use super::*;
use crate::group::consumer;
use crate::group::records;

/// What a completed append should do.
#[derive(Debug)]
pub(super) enum Pending {
    Commit {
        request: RequestId,
        group: String,
        /// Index into `response.partitions` with the value written there.
        accepted: Vec<(usize, OffsetValue)>,
        response: CommitResponse,
        seq: u64,
    },
    Assignment {
        group: String,
        generation: i32,
        assignments: BTreeMap<String, Bytes>,
    },
    StaticReplace {
        request: RequestId,
        group: String,
        old: Box<Member>,
        new_id: String,
        was_leader: bool,
        skip_assignment: bool,
        generation: i32,
    },
    GroupRecord {
        group: String,
    },
    /// A consumer heartbeat whose group epoch moved: answered once the epoch is written.
    ConsumerHeartbeat {
        request: RequestId,
        group: String,
        response: consumer::HeartbeatResponse,
    },
    Delete {
        request: RequestId,
        group: String,
        /// `None`: the whole group (DeleteGroups).
        keys: Option<Vec<(String, i32)>>,
        results: Vec<(String, i32, Option<GroupError>)>,
    },
    Expire {
        group: String,
        keys: Vec<((String, i32), u64)>,
    },
    /// A TxnOffsetCommit: answered once written; its offsets stay pending until the marker.
    TxnCommit {
        request: RequestId,
        group: String,
        producer_id: i64,
        seq: u64,
        written: Vec<TxnWritten>,
        response: CommitResponse,
        /// Indexes into `response.partitions` of the offsets written.
        accepted: Vec<usize>,
    },
}

impl Pending {
    pub(super) fn group(&self) -> &str {
        match self {
            Pending::Commit { group, .. }
            | Pending::Assignment { group, .. }
            | Pending::StaticReplace { group, .. }
            | Pending::GroupRecord { group }
            | Pending::ConsumerHeartbeat { group, .. }
            | Pending::Delete { group, .. }
            | Pending::Expire { group, .. }
            | Pending::TxnCommit { group, .. } => group,
        }
    }

    /// The request waiting on this append, if one is.
    pub(super) fn request(&self) -> Option<RequestId> {
        match self {
            Pending::Commit { request, .. }
            | Pending::StaticReplace { request, .. }
            | Pending::ConsumerHeartbeat { request, .. }
            | Pending::Delete { request, .. }
            | Pending::TxnCommit { request, .. } => Some(*request),
            Pending::Assignment { .. } | Pending::GroupRecord { .. } | Pending::Expire { .. } => {
                None
            }
        }
    }

    /// The classic generation this append was made for, if it is tied to one.
    pub(super) fn generation(&self) -> Option<i32> {
        match self {
            Pending::Assignment { generation, .. } | Pending::StaticReplace { generation, .. } => {
                Some(*generation)
            }
            _ => None,
        }
    }
}

impl Coordinator {
    /// Asks the driver to append `records` to `partition`; `pending` runs on completion. The
    /// caller has counted the append in its group's `appends_in_flight`.
    pub(super) fn append(
        &mut self,
        partition: i32,
        records: Vec<OffsetRecord>,
        pending: Pending,
        out: &mut Vec<Action>,
    ) {
        self.append_as(partition, records, pending, None, out);
    }

    /// [`Self::append`], as a transactional batch of `transaction` when one is given.
    pub(super) fn append_as(
        &mut self,
        partition: i32,
        records: Vec<OffsetRecord>,
        pending: Pending,
        transaction: Option<TxnProducer>,
        out: &mut Vec<Action>,
    ) {
        assert!(!records.is_empty(), "an empty append");
        let token = self.next_token;
        self.next_token += 1;
        self.pending.insert(token, pending);
        out.push(Action::Append {
            partition,
            token,
            records,
            transaction,
        });
    }

    /// Counts and appends records of `g` (taken out of the map by `with_group`).
    pub(super) fn append_for(
        &mut self,
        g: &mut Group,
        records: Vec<OffsetRecord>,
        pending: Pending,
        out: &mut Vec<Action>,
    ) {
        assert_eq!(pending.group(), g.id, "append filed under another group");
        let partition = self.partition_of(&g.id).expect("group without a partition");
        g.appends_in_flight += 1;
        self.append(partition, records, pending, out);
    }

    /// Persists the group's classic record (its value as of now).
    pub(super) fn append_group_record(
        &mut self,
        g: &mut Group,
        now: i64,
        pending: Pending,
        out: &mut Vec<Action>,
    ) {
        let record = (
            records::group_key(&g.id),
            Some(records::group_value(&g.value(now))),
        );
        self.append_for(g, vec![record], pending, out);
    }

    pub(super) fn on_append_done(
        &mut self,
        token: AppendToken,
        result: Result<(), AppendError>,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        let pending = self.pending.remove(&token).expect("unknown append token");
        let group_id = pending.group().to_string();
        let found = self.with_group(&group_id, |c, g| {
            assert!(g.appends_in_flight > 0);
            g.appends_in_flight -= 1;
            c.complete(g, pending, result, now, out);
        });
        assert!(found.is_some(), "a group with appends in flight is kept");
    }

    fn complete(
        &mut self,
        g: &mut Group,
        pending: Pending,
        result: Result<(), AppendError>,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        let error = result.err().map(AppendError::to_group_error);
        match pending {
            Pending::Commit { .. } => Self::commit_written(g, pending, error, out),
            Pending::Assignment { .. } => self.assignment_written(g, pending, error, now, out),
            Pending::StaticReplace { .. } => {
                Self::static_replace_written(g, pending, error, now, out)
            }
            // Nothing waits on it: a lost record only means a restart finds the previous state.
            Pending::GroupRecord { .. } => {}
            Pending::ConsumerHeartbeat { .. } => Self::consumer_change_written(pending, error, out),
            Pending::Delete { .. } => Self::delete_written(g, pending, error, now, out),
            Pending::Expire { .. } => Self::expiry_written(g, pending, error, now),
            Pending::TxnCommit { .. } => Self::txn_commit_written(g, pending, error, out),
        }
    }
}
