//! Fault points: BUGGIFY inside the broker (issue 21's mutation run). Some bugs hide in a window
//! no fault from outside can open on purpose: the simulator's nemesis sees the cluster only
//! through its metadata, a fetch round trip late. A fault point is a named place in the
//! broker's own code where, with a chance the simulator sets, something a real cluster may do
//! happens at the worst moment — an answer lost, a load slowed down. Each does only what a
//! network or a disk may do anyway, so correct code must survive it; it only makes the moment
//! common instead of rare.
//!
//! Like planted bugs, the points exist only in the simulator build (`cfg(madsim)`) and in unit
//! tests: production has no field, no draw and no name for them. They reach the code through
//! [`ServerConfig::fault_points`](super::ServerConfig), which the simulator fills from a
//! scenario's `[nemesis.aimed]` table; every chance is 0 otherwise, and a point at 0 draws
//! nothing, so scenarios without it keep their schedules and trace hashes.

use crate::io::Rng;

/// The chance of each point, per time its moment comes (0: off).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FaultPoints {
    /// Replica fetcher (follower side): the leader's answer for a partition this follower is
    /// catching up on (out of the ISR, fetching below the high watermark) is lost, records and
    /// all; the partition waits `replica.fetch.backoff.ms` and fetches again. The window of a
    /// leader that admits a follower to the ISR on what its answer will carry
    /// (`isr-expand-one-fetch-early`): the follower is in the ISR without the records.
    pub catch_up_answer_lost: f64,
    /// Group coordinator: a newly led `__consumer_offsets` partition waits
    /// [`COORDINATOR_LOAD_STALL_MS`] (a drawn time in it) before its replay starts, as on a
    /// slow disk; its groups stay loading meanwhile (`group-serve-while-loading`).
    pub coordinator_load_stall: f64,
    /// Quorum driver (leader): a fetch answer carries only its first batch, as a small fetch
    /// size makes it. The follower's next fetch then acknowledges exactly that batch's end:
    /// an old epoch's entry reaches a majority while the new leader's LeaderChange does not
    /// (the middle of Raft's figure 8, `quorum-commit-old-epoch`).
    pub quorum_answer_one_batch: f64,
    /// Quorum driver (leader): the fsync of a proposal the leader just appended stalls
    /// [`QUORUM_STALL_MS`], as on a disk that hangs; the quorum thread answers nothing
    /// meanwhile, so the followers elect another leader and the entry stays on this node
    /// alone (figure 8's first step; a stale, longer log for `quorum-vote-compares-offset-only`;
    /// a late voter that two candidates of one epoch both ask, for `quorum-double-vote`).
    pub quorum_leader_flush_stall: f64,
    /// Quorum driver: a new leader's fsync of its own LeaderChange stalls [`QUORUM_STALL_MS`]:
    /// a leader struck right after it appends in its new epoch, before it commits, that comes
    /// back later with that entry (figure 8's leader between).
    pub quorum_new_leader_flush_stall: f64,
    /// Quorum driver (leader): at the first commit of its epoch the quorum thread stalls
    /// [`QUORUM_STALL_MS`] before it answers the fetch that moved the high watermark, so the
    /// follower that made the majority never gets the answer (figure 8's last step: the leader
    /// gone before its own epoch's entry reaches a majority).
    pub quorum_first_commit_stall: f64,
    /// The same stall, for a leader elected with an uncommitted tail of an epoch older than
    /// the one before its own (an epoch came and went without it): the moment of figure 8,
    /// where the first commit decides whether that tail is counted.
    pub quorum_old_tail_commit_stall: f64,
    /// Quorum driver: a candidate's vote request leaves [`QUORUM_VOTE_DELAY_MS`] late (a slow
    /// link), so a second candidate can stand in the same epoch before it arrives
    /// (`quorum-double-vote`).
    pub quorum_vote_request_delay: f64,
    /// Quorum driver: a candidate holds a vote request from a rival candidate of its own epoch
    /// [`QUORUM_RIVAL_VOTE_HOLD_MS`] before it reads it (a slow link between the two, as a
    /// partial partition makes it). One vote per epoch refuses it whenever it comes; a voter
    /// that grants twice (`quorum-double-vote`) would otherwise let the first rival request
    /// it reads end its own candidacy, and now both stand until the voters they share decide.
    pub quorum_rival_vote_hold: f64,
    /// The quorum points strike only inside this window of the node's monotonic clock
    /// ([`Clock::monotonic`](crate::io::Clock::monotonic), ms; [0, 0]: always), which a
    /// wall-clock offset or jump does not move. The simulator sets the scenario's fault phase
    /// after the cluster's start-up, so the world gets its topic and the quorum heals when the
    /// nemesis does: the checks after healing judge a quiet cluster.
    pub quorum_window_ms: [u64; 2],
}

/// How late a delayed vote request leaves: [min, max] ms.
pub const QUORUM_VOTE_DELAY_MS: [u64; 2] = [50, 500];

/// How long a candidate holds a rival's vote request: [min, max] ms. Under the peers' request
/// timeout (2 s), so the refusal still reaches the rival.
pub const QUORUM_RIVAL_VOTE_HOLD_MS: [u64; 2] = [300, 1500];

/// How long a quorum stall lasts: [min, max] ms. Longer than a peer's request timeout (2 s),
/// so answers held back by the stall arrive to no one.
pub const QUORUM_STALL_MS: [u64; 2] = [2500, 6000];

/// How long a stalled coordinator load waits before its replay: [min, max] ms.
pub const COORDINATOR_LOAD_STALL_MS: [u64; 2] = [200, 2000];

impl FaultPoints {
    /// Whether a point of `chance` strikes now. Draws from `rng` only when `chance > 0`.
    pub fn strikes(chance: f64, rng: &dyn Rng) -> bool {
        if chance <= 0.0 {
            return false;
        }
        // 53 random bits: a uniform draw in [0, 1).
        let draw = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        draw < chance
    }

    /// A uniform draw in `range` ([min, max], min ≤ max).
    pub fn draw(range: [u64; 2], rng: &dyn Rng) -> u64 {
        range[0] + rng.next_u64() % (range[1] - range[0] + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(u64);
    impl Rng for Fixed {
        fn next_u64(&self) -> u64 {
            self.0
        }
    }

    #[test]
    fn a_point_at_zero_never_draws_and_a_chance_splits_the_draws() {
        struct Panics;
        impl Rng for Panics {
            fn next_u64(&self) -> u64 {
                panic!("an unarmed point drew")
            }
        }
        assert!(!FaultPoints::strikes(0.0, &Panics));
        assert!(FaultPoints::strikes(0.5, &Fixed(0)));
        assert!(!FaultPoints::strikes(0.5, &Fixed(u64::MAX)));
        assert!(FaultPoints::strikes(1.0, &Fixed(u64::MAX)));
        assert_eq!(FaultPoints::draw([200, 2000], &Fixed(0)), 200);
        assert_eq!(FaultPoints::draw([200, 2000], &Fixed(1800)), 2000);
        assert_eq!(FaultPoints::draw([5, 5], &Fixed(77)), 5);
    }
}
