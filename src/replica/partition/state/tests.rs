//! The state core alone: no disk, no log. The driver's part (the log's offsets after each
//! write) is played by hand, so each test says what the log did and checks what the state
//! decided.

use super::*;
use crate::log::batch::{self, testing::batch};
use crate::replica::partition::LeaderView;

fn config() -> TopicConfig {
    crate::config::ServerConfig::default_single_node().topic_defaults
}

fn ends(start: i64, end: i64) -> LogEnds {
    LogEnds {
        start,
        end,
        durable: end,
    }
}

fn opened(end: i64) -> ReplicaState {
    ReplicaState::opened(
        config(),
        ends(0, end),
        0,
        ProducerStates::default(),
        None,
        Default::default(),
    )
}

/// The header of a batch of `count` records from producer `producer` (id, epoch, sequence) as
/// the log stores it at `base_offset`.
fn stored(count: usize, producer: Option<(i64, i16, i32)>, base_offset: i64) -> BatchHeader {
    let values: Vec<&[u8]> = (0..count).map(|_| b"v".as_slice()).collect();
    let mut header = batch::check(&batch(&values, 10, producer)).unwrap();
    header.base_offset = base_offset;
    header
}

#[test]
fn a_leader_alone_moves_its_high_watermark_with_the_log_end() {
    let mut s = opened(0);
    let h = stored(2, Some((7, 0, 0)), 0);
    assert_eq!(
        s.admit(&h, Origin::Client, Verification::Skipped).unwrap(),
        Admission::Append
    );
    s.appended(&h, &h, ends(0, 2), 1);
    assert_eq!(s.high_watermark(), 2);
    // The same batch again is a duplicate answered with its first offsets.
    assert!(matches!(
        s.admit(&h, Origin::Client, Verification::Skipped).unwrap(),
        Admission::Duplicate {
            base_offset: 0,
            last_offset: 1,
            ..
        }
    ));
}

#[test]
fn with_durable_reads_the_high_watermark_waits_for_the_fsync() {
    let mut s = opened(0);
    s.set_durable_reads(true, ends(0, 0));
    let h = stored(3, None, 0);
    s.appended(
        &h,
        &h,
        LogEnds {
            start: 0,
            end: 3,
            durable: 0,
        },
        1,
    );
    assert_eq!(s.high_watermark(), 0);
    s.flushed(ends(0, 3));
    assert_eq!(s.high_watermark(), 3);
}

#[test]
fn a_replicated_leader_waits_for_its_followers() {
    let mut s = opened(0);
    s.lead(LeaderView::replicated_for_tests(1), ends(0, 0), 0);
    let h = stored(1, None, 0);
    s.appended(&h, &h, ends(0, 1), 1);
    assert_eq!(s.high_watermark(), 0, "no follower has fetched yet");
    s.follower_fetched(2, 1, 0, 10, ends(0, 1), 2).unwrap();
    s.follower_fetched(3, 1, 0, 10, ends(0, 1), 2).unwrap();
    assert_eq!(s.high_watermark(), 1);
}

#[test]
fn a_follower_follows_the_leaders_high_watermark_within_its_log() {
    let mut s = opened(5);
    s.follow(1, ends(0, 5));
    s.follow_high_watermark(9, ends(0, 5));
    assert_eq!(s.high_watermark(), 5, "capped at the local log end");
    assert!(matches!(
        s.check_leader_append(),
        Err(ProduceError::NotLeader)
    ));
}

#[test]
fn nothing_is_appended_until_a_truncation_is_durable() {
    let mut s = opened(8);
    s.follow(1, ends(0, 8));
    s.truncated(ends(0, 4), ProducerStates::default(), None);
    assert_eq!(s.high_watermark(), 4);
    assert!(matches!(
        s.check_follower_append(),
        Err(crate::replica::partition::FollowerAppendError::TruncationPending { at: 4 })
    ));
    s.truncation_durable(4, ends(0, 4));
    assert!(s.check_follower_append().is_ok());
}

#[test]
fn delete_records_stays_below_the_high_watermark() {
    let mut s = opened(6);
    assert_eq!(
        s.delete_records_target(super::super::DELETE_TO_HIGH_WATERMARK, ends(0, 6)),
        Ok(Some(6))
    );
    assert_eq!(
        s.delete_records_target(7, ends(0, 6)),
        Err(DeleteRecordsError::OffsetOutOfRange {
            offset: 7,
            high_watermark: 6
        })
    );
    s.log_start_moved(ends(6, 6));
    assert_eq!(s.delete_records_target(3, ends(6, 6)), Ok(None));
}

#[test]
#[should_panic(expected = "beyond the log end")]
fn a_high_watermark_past_the_log_end_breaks_the_invariants() {
    // The log lost its tail behind the state's back.
    opened(10).check_invariants(ends(0, 5));
}

#[test]
#[should_panic(expected = "appended after a truncation not yet durable")]
fn an_append_after_an_undurable_truncation_breaks_the_invariants() {
    let mut s = opened(8);
    s.follow(1, ends(0, 8));
    s.truncated(ends(0, 4), ProducerStates::default(), None);
    s.replicated(ends(0, 6));
}

#[test]
#[should_panic(expected = "only a follower follows a high watermark")]
fn a_leader_does_not_follow_a_high_watermark() {
    opened(3).follow_high_watermark(3, ends(0, 3));
}

#[test]
#[should_panic(expected = "the high watermark never goes back")]
fn a_leaders_high_watermark_never_goes_back() {
    let mut s = opened(4);
    s.advance_high_watermark(2, ends(0, 4));
}
