use std::sync::{Arc, Mutex};

use super::*;

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    crate::io::memdisk::block_on(f)
}

#[test]
fn a_change_is_seen_once_and_a_new_receiver_has_seen_the_current_value() {
    let (tx, mut rx) = channel(1);
    assert_eq!(rx.has_changed(), Ok(false));
    tx.send(2).unwrap();
    assert_eq!(rx.has_changed(), Ok(true));
    assert!(rx.borrow().has_changed());
    block_on(rx.changed()).unwrap();
    assert_eq!(*rx.borrow(), 2);
    assert_eq!(rx.has_changed(), Ok(false));
    let late = tx.subscribe();
    assert_eq!(late.has_changed(), Ok(false));
    assert_eq!(tx.receiver_count(), 2);
}

#[test]
fn send_without_receivers_is_refused_but_replace_stores() {
    let (tx, rx) = channel(0);
    drop(rx);
    assert!(tx.is_closed());
    assert_eq!(tx.send(5), Err(SendError(5)));
    assert_eq!(*tx.borrow(), 0);
    assert_eq!(tx.send_replace(6), 0);
    assert_eq!(*tx.borrow(), 6);
    block_on(tx.closed());
}

#[test]
fn a_last_change_outlives_its_sender_then_the_channel_is_closed() {
    let (tx, mut rx) = channel("a");
    tx.send("b").unwrap();
    drop(tx);
    assert_eq!(rx.has_changed(), Err(RecvError));
    assert_eq!(block_on(rx.changed()), Ok(()));
    assert_eq!(*rx.borrow(), "b");
    assert_eq!(block_on(rx.changed()), Err(RecvError));
}

#[test]
fn wait_for_checks_the_current_value_first_and_fails_once_closed() {
    let (tx, mut rx) = channel(3);
    assert_eq!(*block_on(rx.wait_for(|v| *v == 3)).unwrap(), 3);
    assert!(!tx.send_if_modified(|_| false));
    assert_eq!(rx.has_changed(), Ok(false));
    tx.send_modify(|v| *v += 1);
    assert_eq!(rx.has_changed(), Ok(true));
    drop(tx);
    assert!(block_on(rx.wait_for(|v| *v == 10)).is_err());
}

/// The property tokio's watch lacks: waiters wake in the order they began to wait, every time.
#[test]
fn waiters_wake_in_the_order_they_began_waiting() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for _ in 0..20 {
        let order = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = channel(0u32);
        rt.block_on(async {
            let mut tasks = Vec::new();
            for i in 0..8 {
                let mut rx = rx.clone();
                let order = order.clone();
                tasks.push(tokio::spawn(async move {
                    rx.changed().await.unwrap();
                    order.lock().unwrap().push(i);
                }));
                // Each task registers before the next is spawned.
                tokio::task::yield_now().await;
            }
            tx.send(1).unwrap();
            for t in tasks {
                t.await.unwrap();
            }
        });
        assert_eq!(*order.lock().unwrap(), (0..8).collect::<Vec<_>>());
    }
}
