//! Snapshots (KIP-630) in the core: which snapshot a lagging fetcher must load, FetchSnapshot
//! on both sides, a snapshot the driver took (the log start moves), and a fetched snapshot
//! installed in place of the log. The bytes never pass through the core: the driver reads and
//! writes the files; the core decides what is asked, what is valid and what the log becomes.

use bytes::Bytes;

use super::action::{Action, DropReason};
use super::epochs::EpochCache;
use super::message::{FetchSnapshotRequest, FetchSnapshotResponse, Message, RaftError};
use super::node::{Raft, MAX_OBSERVERS};
use super::role::{InflightFetch, Role, SnapshotFetch};
use super::types::{NodeId, Offset, OffsetAndEpoch, SnapshotMeta};

impl Raft {
    /// KRaft's `validateOffsetAndEpoch`, snapshot part: a fetch below the log start, at it
    /// with another epoch than the snapshot there, or with an epoch older than that snapshot's
    /// must load the latest snapshot instead.
    pub(super) fn snapshot_for_fetch(
        &self,
        fetch_offset: Offset,
        last_fetched_epoch: u32,
    ) -> Option<OffsetAndEpoch> {
        let earliest = self.earliest_snapshot?.id;
        let behind = fetch_offset < earliest.offset
            || (fetch_offset == earliest.offset && last_fetched_epoch != earliest.epoch)
            || last_fetched_epoch < earliest.epoch;
        behind.then(|| self.latest_snapshot.expect("a latest snapshot").id)
    }

    /// The leader heard from `from` (a fetch or a FetchSnapshot in its epoch): check-quorum
    /// counts it; an observer is remembered for DescribeQuorum.
    pub(super) fn note_fetch(&mut self, from: NodeId, offset: Option<Offset>) {
        let now = self.now;
        let is_voter = self.cfg.voters.contains(&from);
        let Role::Leader(state) = &mut self.role else {
            return;
        };
        let progress = if is_voter {
            state.voters.get_mut(&from)
        } else {
            if !state.observers.contains_key(&from) && state.observers.len() >= MAX_OBSERVERS {
                let stalest = state
                    .observers
                    .iter()
                    .min_by_key(|(id, p)| (p.last_fetch_at, **id))
                    .map(|(id, _)| *id);
                if let Some(id) = stalest {
                    state.observers.remove(&id);
                }
            }
            Some(state.observers.entry(from).or_default())
        };
        if let Some(p) = progress {
            p.last_fetch_at = Some(now);
            if is_voter {
                p.acked = true;
            }
            if let Some(o) = offset {
                p.match_offset = Some(o);
            }
        }
    }

    pub(super) fn on_fetch_snapshot_request(&mut self, from: NodeId, req: FetchSnapshotRequest) {
        let mut response = FetchSnapshotResponse {
            error: None,
            leader_epoch: self.epoch,
            leader_id: self.advertised_leader(),
            snapshot_id: req.snapshot_id,
            size: 0,
            position: req.position,
            bytes: Bytes::new(),
        };
        response.error = if req.current_leader_epoch < self.epoch {
            Some(RaftError::FencedLeaderEpoch)
        } else if req.current_leader_epoch > self.epoch {
            Some(RaftError::UnknownLeaderEpoch)
        } else if !matches!(self.role, Role::Leader(_)) {
            Some(RaftError::NotLeaderOrFollower)
        } else {
            None
        };
        if response.error.is_some() {
            return self.send(from, Message::FetchSnapshotResponse(response));
        }
        self.note_fetch(from, None);
        let known = [self.latest_snapshot, self.earliest_snapshot]
            .into_iter()
            .flatten()
            .find(|s| s.id == req.snapshot_id);
        let Some(meta) = known else {
            response.error = Some(RaftError::SnapshotNotFound);
            return self.send(from, Message::FetchSnapshotResponse(response));
        };
        response.size = meta.size;
        if req.position >= meta.size {
            response.error = Some(RaftError::PositionOutOfRange);
            return self.send(from, Message::FetchSnapshotResponse(response));
        }
        self.send_action(Action::SendSnapshotChunk {
            to: from,
            response,
            start: req.position,
        });
    }

    /// The leader answered our fetch with a snapshot id: fetch that snapshot from byte 0.
    pub(super) fn start_snapshot_fetch(&mut self, from: NodeId, id: OffsetAndEpoch) {
        if id.offset < self.high_watermark || id.offset == 0 || id.epoch == 0 {
            return self.drop_input(Some(from), DropReason::TruncationBelowHighWatermark);
        }
        if id.epoch > self.epoch {
            return self.drop_input(Some(from), DropReason::InvalidBatches);
        }
        let now = self.now;
        if let Role::Follower(f) = &mut self.role {
            f.inflight = None;
            f.next_fetch_at = now;
            f.snapshot = Some(SnapshotFetch {
                id,
                position: 0,
                size: None,
                completing: false,
            });
        }
        self.maybe_fetch();
    }

    /// Sends the next FetchSnapshot of the snapshot being fetched. Returns false if no
    /// snapshot is being fetched (then the log is fetched).
    pub(super) fn maybe_fetch_snapshot(&mut self) -> bool {
        let now = self.now;
        let epoch = self.epoch;
        let Some(leader) = self.leader else {
            return false;
        };
        let Role::Follower(f) = &mut self.role else {
            return false;
        };
        let Some(s) = f.snapshot else {
            return false;
        };
        if s.completing || f.inflight.is_some() || now < f.next_fetch_at {
            return true;
        }
        f.inflight = Some(InflightFetch {
            sent_at: now,
            fetch_offset: s.position,
            last_fetched_epoch: s.id.epoch,
        });
        let request = FetchSnapshotRequest {
            current_leader_epoch: epoch,
            snapshot_id: s.id,
            position: s.position,
        };
        self.send(leader, Message::FetchSnapshotRequest(request));
        true
    }

    pub(super) fn on_fetch_snapshot_response(&mut self, from: NodeId, resp: FetchSnapshotResponse) {
        match resp.error {
            Some(RaftError::SnapshotNotFound | RaftError::PositionOutOfRange) => {
                // The leader moved on (a newer snapshot) or we asked nonsense: start over
                // with a fetch, which names the snapshot to load now.
                if resp.leader_epoch == self.epoch && self.leader == Some(from) {
                    self.abandon_snapshot_fetch();
                    self.maybe_fetch();
                }
                return;
            }
            Some(_) => {
                if resp.leader_epoch > self.epoch {
                    self.adopt_epoch(resp.leader_epoch, resp.leader_id);
                } else if resp.leader_epoch == self.epoch {
                    if let Some(l) = resp.leader_id.filter(|l| Some(*l) != self.leader) {
                        self.learn_leader(from, l);
                    }
                }
                if let Role::Follower(f) = &mut self.role {
                    if self.leader == Some(from) {
                        f.inflight = None;
                    }
                }
                return;
            }
            None => {}
        }
        if !self.on_response_epoch(from, resp.leader_epoch, resp.leader_id) {
            return;
        }
        let now = self.now;
        let fetch_timeout = self.cfg.fetch_timeout_ms;
        let leader = self.leader;
        let Role::Follower(f) = &mut self.role else {
            return self.drop_input(Some(from), DropReason::Unexpected);
        };
        let Some(s) = f.snapshot.as_mut() else {
            return self.drop_input(Some(from), DropReason::Unexpected);
        };
        if leader != Some(from)
            || s.completing
            || s.id != resp.snapshot_id
            || s.position != resp.position
        {
            return self.drop_input(Some(from), DropReason::StaleFetchResponse);
        }
        let len = resp.bytes.len() as u64;
        let fits = len > 0
            && resp.position + len <= resp.size
            && s.size.is_none_or(|size| size == resp.size);
        if !fits {
            return self.drop_input(Some(from), DropReason::InvalidBatches);
        }
        f.inflight = None;
        f.fetched_ok = true;
        f.fetch_deadline = now + fetch_timeout;
        f.next_fetch_at = now;
        s.size = Some(resp.size);
        s.position += len;
        let (id, position, size) = (s.id, resp.position, resp.size);
        let done = s.position == size;
        s.completing = done;
        self.push(Action::WriteSnapshotChunk {
            id,
            position,
            bytes: resp.bytes,
        });
        if done {
            self.push(Action::CompleteSnapshot { id, size });
        } else {
            self.maybe_fetch();
        }
    }

    /// Forgets the snapshot being fetched and deletes what arrived of it.
    fn abandon_snapshot_fetch(&mut self) {
        if let Role::Follower(f) = &mut self.role {
            if let Some(s) = f.snapshot.take() {
                f.inflight = None;
                self.push(Action::DeleteSnapshot { id: s.id });
            }
        }
    }

    /// The driver verified the fetched snapshot `id`: install it in place of the log.
    pub(super) fn snapshot_fetched(&mut self, id: OffsetAndEpoch, valid: bool) {
        let fetching = match &self.role {
            Role::Follower(f) => f.snapshot.filter(|s| s.id == id && s.completing),
            _ => None,
        };
        let Some(fetch) = fetching else {
            // We stopped following (or fetched another) meanwhile: it is not ours to load.
            self.push(Action::DeleteSnapshot { id });
            return self.drop_input(None, DropReason::InvalidReport);
        };
        if !valid || id.offset < self.high_watermark {
            // The driver logged why; fetch again, which names the snapshot to load.
            self.abandon_snapshot_fetch();
            return self.maybe_fetch();
        }
        let meta = SnapshotMeta {
            id,
            size: fetch.size.unwrap_or(0),
        };
        // Everything we had is replaced: our log ends below the snapshot (or diverges from the
        // leader's there), and the snapshot holds committed state only.
        self.cache = EpochCache::from_entries(&[id]);
        self.end_offset = id.offset;
        self.durable_end = id.offset;
        self.high_watermark = self.high_watermark.max(id.offset);
        self.earliest_snapshot = Some(meta);
        self.latest_snapshot = Some(meta);
        if let Role::Follower(f) = &mut self.role {
            f.snapshot = None;
        }
        self.push(Action::InstallSnapshot(meta));
        self.maybe_fetch();
    }

    /// The driver took a snapshot at `meta.id`: it becomes the latest, and the log start
    /// moves to the previous latest (whose older predecessor is deleted).
    pub(super) fn snapshot_taken(&mut self, meta: SnapshotMeta) {
        let id = meta.id;
        let newer = self.latest_snapshot.is_none_or(|l| id.offset > l.id.offset);
        let fits = id.offset <= self.high_watermark
            && id.offset > self.log_start()
            && self.cache.epoch_at(id.offset - 1) == Some(id.epoch);
        if !newer || !fits {
            if !self.is_retained(id) {
                self.push(Action::DeleteSnapshot { id });
            }
            return self.drop_input(None, DropReason::InvalidReport);
        }
        let previous = self.latest_snapshot.replace(meta);
        if let Some(prev) = previous {
            if let Some(old) = self.earliest_snapshot.filter(|e| e.id != prev.id) {
                self.push(Action::DeleteSnapshot { id: old.id });
            }
            if prev.id.offset > self.log_start() {
                self.cache
                    .truncate_from_start(prev.id.offset, prev.id.epoch);
                self.earliest_snapshot = Some(prev);
                self.push(Action::AdvanceLogStart {
                    offset: prev.id.offset,
                });
            }
        }
    }

    fn is_retained(&self, id: OffsetAndEpoch) -> bool {
        [self.earliest_snapshot, self.latest_snapshot]
            .into_iter()
            .flatten()
            .any(|s| s.id == id)
    }
}
