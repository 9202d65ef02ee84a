//! The waiter lists event by event, then the waits with a real clock (short deadlines).

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::io::os::TokioClock;
use crate::io::Clock;

fn at(hw: i64, end: i64) -> Observed {
    Observed {
        high_watermark: hw,
        log_end: end,
        log_start: 0,
        low_watermark: 0,
        enough_replicas: true,
    }
}

fn partition(budget: &Arc<WaitBudget>) -> Arc<PartitionWaiters> {
    PartitionWaiters::new(budget.clone(), at(0, 0))
}

/// Registers a produce waiter for `required` the way the broker does (reserve, then wait).
fn produce(p: &Arc<PartitionWaiters>, required: i64) -> ProduceWait {
    p.reserve_produce().unwrap().wait_for(required)
}

/// Whether a fetch wake is pending (consumes it).
fn woken(wake: &FetchWake) -> bool {
    let clock = TokioClock::new();
    let deadline = clock.monotonic() + Duration::from_millis(1);
    futures_lite(wait_fetch(&clock, wake, deadline, &ConnectionGone::never())).is_ok()
}

/// Runs a future on a fresh current-thread runtime (the tests are synchronous).
fn futures_lite<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn a_high_watermark_advance_completes_only_the_produces_it_reaches() {
    let budget = WaitBudget::new(100);
    let p = partition(&budget);
    let mut w5 = produce(&p, 5);
    let mut w8 = produce(&p, 8);
    assert_eq!(p.counts().produce, 2);
    p.observe(at(4, 10));
    assert!(w5.try_result().is_none());
    p.observe(at(5, 10));
    assert_eq!(w5.try_result(), Some(Ok(Committed::InSync)));
    assert!(w8.try_result().is_none());
    p.observe(Observed {
        enough_replicas: false,
        ..at(9, 10)
    });
    assert_eq!(w8.try_result(), Some(Ok(Committed::BelowMinIsr)));
    assert_eq!(p.counts().produce, 0);
    drop((w5, w8));
    assert_eq!(budget.used(), 0);
}

#[test]
fn an_offset_already_reached_completes_at_registration() {
    let budget = WaitBudget::new(100);
    let p = PartitionWaiters::new(budget.clone(), at(7, 7));
    let mut w = produce(&p, 7);
    assert_eq!(w.try_result(), Some(Ok(Committed::InSync)));
    assert_eq!(p.counts().produce, 0);
    assert_eq!(budget.used(), 0);
}

#[test]
fn events_of_one_partition_do_not_touch_another() {
    let budget = WaitBudget::new(100);
    let (a, b) = (partition(&budget), partition(&budget));
    let mut on_a = produce(&a, 3);
    let mut on_b = produce(&b, 3);
    let (wake_a, wake_b) = (FetchWake::new(), FetchWake::new());
    let _fa = a
        .register_fetch(0, Isolation::HighWatermark, &wake_a)
        .unwrap();
    let _fb = b
        .register_fetch(0, Isolation::HighWatermark, &wake_b)
        .unwrap();
    a.observe(at(3, 3));
    assert_eq!(on_a.try_result(), Some(Ok(Committed::InSync)));
    assert!(on_b.try_result().is_none());
    assert!(woken(&wake_a));
    assert!(!woken(&wake_b));
    assert_eq!(b.counts().fetch_wakes, 0);
}

#[test]
fn a_consumer_fetch_wakes_when_the_high_watermark_passes_its_offset_only() {
    let budget = WaitBudget::new(100);
    let p = PartitionWaiters::new(budget.clone(), at(5, 5));
    let wake = FetchWake::new();
    let _r = p
        .register_fetch(5, Isolation::HighWatermark, &wake)
        .unwrap();
    // An append the high watermark does not cover yet is invisible to consumers.
    p.observe(at(5, 9));
    assert!(!woken(&wake));
    p.observe(at(6, 9));
    assert!(woken(&wake));
    // A follower (log-end isolation) sees the append itself.
    let follower = FetchWake::new();
    let _f = p.register_fetch(9, Isolation::LogEnd, &follower).unwrap();
    p.observe(at(6, 10));
    assert!(woken(&follower));
    assert!(!woken(&wake), "the high watermark did not move");
}

#[test]
fn a_delete_records_waiter_wakes_when_the_low_watermark_reaches_its_offset_only() {
    let budget = WaitBudget::new(100);
    let low = |low_watermark: i64| Observed {
        low_watermark,
        ..at(10, 10)
    };
    let p = PartitionWaiters::new(budget.clone(), low(-1));
    let wake = FetchWake::new();
    let r = p.register_fetch(6, Isolation::LowWatermark, &wake).unwrap();
    // A follower reported a start below the offset: not yet.
    p.observe(low(4));
    assert!(!woken(&wake));
    // Appends and high-watermark moves are not its business.
    p.observe(Observed {
        high_watermark: 12,
        log_end: 12,
        ..low(4)
    });
    assert!(!woken(&wake));
    p.observe(Observed {
        high_watermark: 12,
        log_end: 12,
        ..low(6)
    });
    assert!(woken(&wake));
    drop(r);
    assert_eq!(budget.used(), 0);
}

#[test]
fn truncation_fails_the_produces_it_removed_and_wakes_fetches() {
    let budget = WaitBudget::new(100);
    let p = PartitionWaiters::new(budget.clone(), at(2, 10));
    let mut kept = produce(&p, 4);
    let mut lost = produce(&p, 9);
    let wake = FetchWake::new();
    let _r = p
        .register_fetch(2, Isolation::HighWatermark, &wake)
        .unwrap();
    p.observe(at(2, 5));
    assert_eq!(lost.try_result(), Some(Err(WaitError::NotLeader)));
    assert!(kept.try_result().is_none());
    assert!(woken(&wake));
}

#[test]
fn leadership_loss_and_close_end_every_wait() {
    let budget = WaitBudget::new(100);
    let p = partition(&budget);
    let mut w = produce(&p, 1);
    p.leadership_lost();
    assert_eq!(w.try_result(), Some(Err(WaitError::NotLeader)));
    // Leadership may come back: new waits are accepted.
    let mut w = produce(&p, 1);
    let wake = FetchWake::new();
    let _r = p
        .register_fetch(0, Isolation::HighWatermark, &wake)
        .unwrap();
    p.close(Closed::Deleted);
    assert_eq!(
        w.try_result(),
        Some(Err(WaitError::Closed(Closed::Deleted)))
    );
    assert!(woken(&wake));
    // Closed for good, with the first reason.
    p.close(Closed::Offline);
    assert_eq!(
        p.reserve_produce().err(),
        Some(WaitError::Closed(Closed::Deleted))
    );
    assert!(p
        .register_fetch(0, Isolation::HighWatermark, &wake)
        .is_err());
}

#[test]
fn bounds_per_partition_and_in_total_refuse_with_a_clear_error() {
    let budget = WaitBudget::new(3);
    let (a, b) = (partition(&budget), partition(&budget));
    let _w1 = produce(&a, 1);
    let wake = FetchWake::new();
    let _f = b
        .register_fetch(0, Isolation::HighWatermark, &wake)
        .unwrap();
    let held = a.reserve_produce().unwrap();
    let full = b
        .reserve_produce()
        .err()
        .expect("the total bound is reached");
    assert!(
        matches!(&full, WaitError::Full(m) if m.contains("3 requests")),
        "{full:?}"
    );
    // A dropped reservation gives its slot back.
    drop(held);
    assert_eq!(budget.used(), 2);
    let _w2 = produce(&b, 1);

    let big = WaitBudget::new(usize::MAX);
    let p = partition(&big);
    let waits: Vec<ProduceWait> = (0..MAX_WAITERS_PER_PARTITION)
        .map(|i| produce(&p, i as i64 + 1))
        .collect();
    let full = p.reserve_produce().err().expect("the partition's bound");
    assert!(
        matches!(&full, WaitError::Full(m) if m.contains("this partition")),
        "{full:?}"
    );
    drop(waits);
    assert_eq!(p.counts().produce, 0);
    assert_eq!(big.used(), 0);
}

#[test]
fn a_dropped_wait_leaves_its_partition() {
    let budget = WaitBudget::new(100);
    let p = partition(&budget);
    let w = produce(&p, 5);
    let wake = FetchWake::new();
    let r = p
        .register_fetch(0, Isolation::HighWatermark, &wake)
        .unwrap();
    assert_eq!(budget.used(), 2);
    drop((w, r));
    assert_eq!(
        p.counts(),
        WaiterCounts {
            produce: 0,
            fetch: 0,
            fetch_wakes: 0
        }
    );
    assert_eq!(budget.used(), 0);
    // Events after the drop find nobody.
    p.observe(at(9, 9));
    assert_eq!(p.counts().fetch_wakes, 0);
}

#[tokio::test]
async fn a_produce_wait_times_out_at_its_deadline_and_leaves_its_partition() {
    let clock = TokioClock::new();
    let budget = WaitBudget::new(100);
    let p = partition(&budget);
    let mut waits = vec![produce(&p, 1), produce(&p, 2)];
    let started = clock.monotonic();
    let p2 = p.clone();
    let advance = async move {
        tokio::time::sleep(Duration::from_millis(10)).await;
        p2.observe(at(1, 2));
    };
    let deadline = started + Duration::from_millis(80);
    let never = ConnectionGone::never();
    let (results, ()) = tokio::join!(wait_produce(&clock, &mut waits, deadline, &never), advance);
    assert_eq!(
        results,
        vec![Ok(Committed::InSync), Err(WaitError::TimedOut)]
    );
    assert!(clock.monotonic() >= deadline);
    drop(waits);
    assert_eq!(p.counts().produce, 0);
    assert_eq!(budget.used(), 0);
}

#[tokio::test]
async fn waits_end_when_the_connection_goes_away() {
    let clock = TokioClock::new();
    let budget = WaitBudget::new(100);
    let p = partition(&budget);
    let connection = ConnectionWatch::new();
    let gone = connection.signal();
    let mut waits = vec![produce(&p, 1)];
    let wake = FetchWake::new();
    let registration = p
        .register_fetch(0, Isolation::HighWatermark, &wake)
        .unwrap();
    let deadline = clock.monotonic() + Duration::from_secs(30);
    let hang_up = async {
        tokio::time::sleep(Duration::from_millis(10)).await;
        connection.mark_gone();
    };
    let (results, fetch, ()) = tokio::join!(
        wait_produce(&clock, &mut waits, deadline, &gone),
        wait_fetch(&clock, &wake, deadline, &gone),
        hang_up
    );
    assert_eq!(results, vec![Err(WaitError::Cancelled)]);
    assert_eq!(fetch, Err(WaitError::Cancelled));
    assert!(clock.monotonic() < deadline);
    drop((waits, registration));
    assert_eq!(budget.used(), 0);
}

#[tokio::test]
async fn a_fetch_wake_before_the_wait_is_not_lost() {
    let clock = TokioClock::new();
    let budget = WaitBudget::new(100);
    let p = partition(&budget);
    let wake = FetchWake::new();
    let _r = p
        .register_fetch(0, Isolation::HighWatermark, &wake)
        .unwrap();
    // The append lands between the fetch's read and its wait.
    p.observe(at(1, 1));
    let deadline = clock.monotonic() + Duration::from_secs(30);
    let woke = wait_fetch(&clock, &wake, deadline, &ConnectionGone::never()).await;
    assert_eq!(woke, Ok(()));
    assert!(clock.monotonic() < deadline);
}
