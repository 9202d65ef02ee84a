//! The mover core, message by message.

use std::time::Duration;

use uuid::Uuid;

use super::*;

const CHUNK: usize = 1000;

fn mover() -> DirMover {
    DirMover::new(MoveConfig {
        chunk_bytes: CHUNK,
        retry_backoff: Duration::from_millis(100),
    })
}

fn key() -> Key {
    ("t".to_string(), 0)
}

fn dir(n: u64) -> Uuid {
    Uuid::from_u64_pair(9, n)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A move of `key()` from dir 1 to dir 2, opened with an empty future; returns its id.
fn started(m: &mut DirMover) -> u64 {
    let actions = m.request(ms(0), key(), dir(2), dir(1));
    let [Action::OpenFuture { id, key: k, dest }] = actions.as_slice() else {
        panic!("{actions:?}")
    };
    assert_eq!((k, *dest), (&key(), dir(2)));
    m.opened(ms(0), *id, 0);
    *id
}

#[test]
fn a_move_copies_until_caught_up_then_swaps() {
    let mut m = mover();
    let id = started(&mut m);
    assert_eq!(
        m.poll(ms(0)),
        vec![Action::Copy {
            id,
            key: key(),
            max_bytes: CHUNK
        }]
    );
    // Nothing more while the copy is out.
    assert!(m.poll(ms(1)).is_empty());
    assert!(m.copied(ms(1), id, 1000, 10, 30).is_empty());
    assert_eq!(m.views()[0].future_end, 10);
    assert_eq!(m.views()[0].current_end, 30);
    assert_eq!(m.poll(ms(1)).len(), 1);
    assert_eq!(
        m.copied(ms(2), id, 2000, 30, 30),
        vec![Action::FlushAndSwap { id, key: key() }]
    );
    assert!(m.poll(ms(3)).is_empty(), "no copy while swapping");
    m.swapped(id);
    assert!(m.views().is_empty());
    assert_eq!(m.copied_bytes(), 3000);
    assert_eq!(m.next_deadline(), None);
}

#[test]
fn a_lost_swap_race_copies_on() {
    let mut m = mover();
    let id = started(&mut m);
    m.poll(ms(0));
    assert_eq!(m.copied(ms(1), id, 10, 5, 5).len(), 1);
    m.not_swapped(ms(2), id);
    assert_eq!(m.poll(ms(2)).len(), 1);
    assert!(m.views().len() == 1);
}

#[test]
fn the_throttle_paces_copies() {
    let mut m = mover();
    m.set_limit(Some(1000)); // bytes/s
    let id = started(&mut m);
    m.poll(ms(0));
    m.copied(ms(0), id, 500, 5, 100);
    // 500 bytes at 1000 B/s: the next copy waits half a second.
    assert_eq!(m.next_deadline(), Some(ms(500)));
    assert!(m.poll(ms(499)).is_empty());
    assert_eq!(m.poll(ms(500)).len(), 1);
    m.copied(ms(600), id, 1000, 15, 100);
    assert_eq!(m.next_deadline(), Some(ms(1600)));
    // Unlimited again: the next copy may start at once.
    m.set_limit(None);
    m.copied(ms(600), id, 0, 15, 100); // stale: the move is Ready, not Busy
    assert_eq!(m.poll(ms(1600)).len(), 1);
    m.set_limit(Some(0));
    m.copied(ms(1601), id, 1_000_000, 20, 100);
    assert_eq!(
        m.next_deadline(),
        Some(ms(1600)),
        "0 means unlimited: no more pacing"
    );
}

#[test]
fn a_request_to_the_current_directory_cancels_and_another_replaces() {
    let mut m = mover();
    let id = started(&mut m);
    // Same destination again: nothing.
    assert!(m.request(ms(1), key(), dir(2), dir(1)).is_empty());
    // Another destination: the first future goes, a new move starts.
    let actions = m.request(ms(1), key(), dir(3), dir(1));
    assert_eq!(
        actions[0],
        Action::Abandon {
            id,
            key: key(),
            dest: dir(2)
        }
    );
    let Action::OpenFuture { id: id2, dest, .. } = actions[1].clone() else {
        panic!("{actions:?}")
    };
    assert_ne!(id2, id);
    assert_eq!(dest, dir(3));
    // A late result of the replaced move is ignored.
    assert!(m.copied(ms(2), id, 10, 10, 10).is_empty());
    // Back to where it is: cancelled.
    assert_eq!(
        m.request(ms(3), key(), dir(1), dir(1)),
        vec![Action::Abandon {
            id: id2,
            key: key(),
            dest: dir(3)
        }]
    );
    assert!(m.views().is_empty());
    // To where it is with no move: nothing at all.
    assert!(m.request(ms(4), key(), dir(1), dir(1)).is_empty());
}

#[test]
fn a_failed_step_is_tried_again_after_the_backoff() {
    let mut m = mover();
    let actions = m.request(ms(0), key(), dir(2), dir(1));
    let Action::OpenFuture { id, .. } = actions[0].clone() else {
        panic!()
    };
    // The replica is not open here yet: ask again later.
    m.retry(ms(0), id);
    assert!(m.poll(ms(50)).is_empty());
    assert_eq!(m.next_deadline(), Some(ms(100)));
    assert_eq!(
        m.poll(ms(100)),
        vec![Action::OpenFuture {
            id,
            key: key(),
            dest: dir(2)
        }]
    );
    m.opened(ms(100), id, 7);
    assert_eq!(m.views()[0].future_end, 7);
    m.poll(ms(100));
    m.retry(ms(100), id);
    assert!(m.poll(ms(150)).is_empty());
    assert_eq!(m.poll(ms(200)).len(), 1);
}

#[test]
fn a_cancelled_move_deletes_its_future_once() {
    let mut m = mover();
    let id = started(&mut m);
    assert_eq!(m.ids_into(dir(2)), vec![id]);
    assert_eq!(m.move_of(&key()), Some((id, dir(2))));
    assert_eq!(
        m.cancel(id),
        vec![Action::Abandon {
            id,
            key: key(),
            dest: dir(2)
        }]
    );
    assert!(m.cancel(id).is_empty());
    assert!(m.ids_into(dir(2)).is_empty());
    m.swapped(id);
    m.opened(ms(0), id, 0);
    assert!(m.poll(ms(0)).is_empty());
}

#[test]
fn moves_of_several_replicas_copy_side_by_side() {
    let mut m = mover();
    let a = m.request(ms(0), ("a".into(), 0), dir(2), dir(1));
    let b = m.request(ms(0), ("b".into(), 1), dir(1), dir(2));
    let id = |v: &[Action]| match v[0] {
        Action::OpenFuture { id, .. } => id,
        _ => panic!(),
    };
    m.opened(ms(0), id(&a), 0);
    m.opened(ms(0), id(&b), 0);
    assert_eq!(m.poll(ms(0)).len(), 2);
    assert_eq!(m.views().len(), 2);
}
