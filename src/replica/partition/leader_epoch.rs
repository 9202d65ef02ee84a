//! The leader-epoch checks requests make against a partition (KIP-101, KIP-279, KIP-320):
//! OffsetForLeaderEpoch's answer, a request's `CurrentLeaderEpoch` fencing, and a Fetch's
//! `LastFetchedEpoch` divergence check, as Kafka's `Partition.scala` does them.

use super::Partition;
use crate::log::leader_epochs::EpochEnd;

/// Why a request is refused by its epochs or this replica's role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EpochRefusal {
    /// The request's current leader epoch is older than ours (FENCED_LEADER_EPOCH).
    Fenced,
    /// The request's current leader epoch is newer than ours: we have not seen that metadata
    /// yet (UNKNOWN_LEADER_EPOCH).
    Unknown,
    /// Only the leader answers (NOT_LEADER_OR_FOLLOWER).
    NotLeader,
    /// The fetch position cannot be validated: the last fetched epoch's end is undefined, or the
    /// offset is below the log start (OFFSET_OUT_OF_RANGE).
    OffsetOutOfRange,
}

impl Partition {
    /// Checks a request's `CurrentLeaderEpoch` (-1: not sent, no check) and, with
    /// `require_leader`, that this replica leads.
    pub fn check_current_leader_epoch(
        &self,
        current_leader_epoch: i32,
        require_leader: bool,
    ) -> Result<(), EpochRefusal> {
        self.state
            .check_current_leader_epoch(current_leader_epoch, require_leader)
    }

    /// OffsetForLeaderEpoch: the largest epoch at or below `leader_epoch` and its end offset
    /// (undefined for an epoch above every one here), after the `current_leader_epoch` check.
    pub fn offset_for_leader_epoch(
        &self,
        current_leader_epoch: i32,
        leader_epoch: i32,
    ) -> Result<EpochEnd, EpochRefusal> {
        self.check_current_leader_epoch(current_leader_epoch, true)?;
        Ok(self.log.end_offset_for_epoch(leader_epoch))
    }

    /// A Fetch's position check: `Ok(None)` to read from `fetch_offset`, `Ok(Some(end))` when
    /// the fetcher's log diverges from ours (no records then; it truncates to at most `end`,
    /// KIP-320 `DivergingEpoch`). `last_fetched_epoch` -1 means not sent: no check.
    pub fn check_fetch_position(
        &self,
        current_leader_epoch: i32,
        fetch_offset: i64,
        last_fetched_epoch: i32,
    ) -> Result<Option<EpochEnd>, EpochRefusal> {
        self.check_read_position(current_leader_epoch, fetch_offset, last_fetched_epoch, true)
    }

    /// [`Partition::check_fetch_position`] for a read that any replica may serve when
    /// `require_leader` is false: a consumer fetching from a follower (KIP-392). The epochs are
    /// checked against this replica's own leader epoch, as Kafka's `Partition` does.
    pub fn check_read_position(
        &self,
        current_leader_epoch: i32,
        fetch_offset: i64,
        last_fetched_epoch: i32,
        require_leader: bool,
    ) -> Result<Option<EpochEnd>, EpochRefusal> {
        self.check_current_leader_epoch(current_leader_epoch, require_leader)?;
        if last_fetched_epoch < 0 {
            return Ok(None);
        }
        // The planted pre-KIP-320 leader: a follower's last fetched epoch is never checked.
        #[cfg(any(madsim, test))]
        if require_leader && self.planted(crate::config::PlantedBug::LeaderSkipsDivergingEpoch) {
            return Ok(None);
        }
        let end = self.log.end_offset_for_epoch(last_fetched_epoch);
        if end.is_undefined() || fetch_offset < self.log.start_offset() {
            return Err(EpochRefusal::OffsetOutOfRange);
        }
        if end.epoch < last_fetched_epoch || end.end_offset < fetch_offset {
            return Ok(Some(end));
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::super::follower::tests::{open_at, pair, tail};
    use super::super::LeaderView;
    use super::*;
    use crate::io::memdisk::MemDisk;
    use crate::log::batch;

    /// Leader log: epoch 3 at 0..18, then (as leader of 5) epoch 5 from 18 to 20.
    fn leader(disk: &MemDisk) -> Partition {
        let (mut leader, _) = pair(disk);
        leader
            .become_leader(LeaderView::replicated_for_tests(5), 0)
            .unwrap();
        leader
            .append(&batch::testing::batch(&[b"a", b"b"], 1, None), 1)
            .unwrap();
        leader
    }

    #[test]
    fn offset_for_leader_epoch_answers_and_fences() {
        let disk = MemDisk::new(1);
        let p = leader(&disk);
        let end = |e| p.offset_for_leader_epoch(-1, e).unwrap();
        assert_eq!(
            end(5),
            EpochEnd {
                epoch: 5,
                end_offset: 20
            }
        );
        assert_eq!(
            end(4),
            EpochEnd {
                epoch: 3,
                end_offset: 18
            }
        );
        assert_eq!(
            end(3),
            EpochEnd {
                epoch: 3,
                end_offset: 18
            }
        );
        assert_eq!(
            end(2),
            EpochEnd {
                epoch: 2,
                end_offset: 0
            }
        );
        assert!(end(6).is_undefined());
        assert_eq!(p.offset_for_leader_epoch(5, 5).unwrap().end_offset, 20);
        assert_eq!(p.offset_for_leader_epoch(4, 5), Err(EpochRefusal::Fenced));
        assert_eq!(p.offset_for_leader_epoch(6, 5), Err(EpochRefusal::Unknown));
        let mut f = open_at(&disk, "/data/c/t-0");
        f.become_follower(5).unwrap();
        assert_eq!(
            f.offset_for_leader_epoch(5, 5),
            Err(EpochRefusal::NotLeader)
        );
    }

    #[test]
    fn fetch_positions_diverge_as_kip_320_says() {
        let disk = MemDisk::new(2);
        let p = leader(&disk);
        // A follower in step: no divergence.
        assert_eq!(p.check_fetch_position(5, 20, 5), Ok(None));
        assert_eq!(p.check_fetch_position(5, 10, 3), Ok(None));
        assert_eq!(p.check_fetch_position(-1, 7, -1), Ok(None));
        // Ahead of our epoch 3, which ended at 18.
        assert_eq!(
            p.check_fetch_position(5, 19, 3),
            Ok(Some(EpochEnd {
                epoch: 3,
                end_offset: 18
            }))
        );
        // An epoch we never had (4): the largest below it.
        assert_eq!(
            p.check_fetch_position(5, 18, 4),
            Ok(Some(EpochEnd {
                epoch: 3,
                end_offset: 18
            }))
        );
        assert_eq!(
            p.check_fetch_position(5, 20, 9),
            Err(EpochRefusal::OffsetOutOfRange)
        );
        assert_eq!(p.check_fetch_position(3, 20, 5), Err(EpochRefusal::Fenced));
        assert_eq!(p.check_fetch_position(7, 20, 5), Err(EpochRefusal::Unknown));
    }

    #[test]
    fn a_follower_checks_a_consumer_read_against_its_own_epoch() {
        let disk = MemDisk::new(4);
        let (leader, mut follower) = pair(&disk);
        follower.append_as_follower(&tail(&leader, 0), 1).unwrap();
        follower.become_follower(5).unwrap();
        // KIP-392: a follower serves a consumer whose epoch matches its own.
        assert_eq!(follower.check_read_position(5, 10, -1, false), Ok(None));
        assert_eq!(follower.check_read_position(-1, 10, -1, false), Ok(None));
        assert_eq!(
            follower.check_read_position(4, 10, -1, false),
            Err(EpochRefusal::Fenced)
        );
        assert_eq!(
            follower.check_read_position(6, 10, -1, false),
            Err(EpochRefusal::Unknown)
        );
        // Replication fetches and older consumers still need the leader.
        assert_eq!(
            follower.check_fetch_position(5, 10, -1),
            Err(EpochRefusal::NotLeader)
        );
    }

    #[test]
    fn the_fast_double_failover_is_caught() {
        // Notes §7.3 end to end through two partitions: the follower took one epoch-2 batch
        // the new leader (epoch 3) never had; the leader's answer makes it cut exactly that.
        let disk = MemDisk::new(3);
        let (leader, mut follower) = pair(&disk);
        follower.append_as_follower(&tail(&leader, 0), 1).unwrap();
        let mut stray = batch::testing::batch(&[b"x"], 1, None);
        batch::set_base_offset(&mut stray, 18);
        batch::set_partition_leader_epoch(&mut stray, 4);
        follower.become_follower(4).unwrap();
        follower.append_as_follower(&stray, 1).unwrap();
        let mut leader = leader;
        leader
            .become_leader(LeaderView::replicated_for_tests(6), 0)
            .unwrap();
        leader
            .append(&batch::testing::batch(&[b"y", b"z"], 1, None), 1)
            .unwrap();
        follower.become_follower(6).unwrap();
        let last = follower.log().latest_epoch();
        let diverging = leader
            .check_fetch_position(6, follower.log_end_offset(), last)
            .unwrap()
            .expect("diverges");
        assert_eq!(
            diverging,
            EpochEnd {
                epoch: 3,
                end_offset: 18
            }
        );
        // The follower's own end for that epoch bounds the cut (notes §3.6).
        let own = follower.log().end_offset_for_epoch(diverging.epoch);
        assert_eq!(own.epoch, 3);
        let cut = diverging.end_offset.min(own.end_offset);
        let plan = follower.truncate_to(cut).unwrap().unwrap();
        crate::io::memdisk::block_on(plan.make_durable()).unwrap();
        follower.truncation_durable(&plan, 1);
        assert_eq!(follower.log_end_offset(), 18);
        assert_eq!(
            leader.check_fetch_position(6, 18, follower.log().latest_epoch()),
            Ok(None)
        );
        follower.append_as_follower(&tail(&leader, 18), 1).unwrap();
        assert_eq!(tail(&follower, 0), tail(&leader, 0));
    }
}
