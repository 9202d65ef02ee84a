//! Awaiting delayed operations: until the condition, the deadline (on the `io` clock) or the
//! connection's end, whichever comes first.

use std::time::Duration;

use super::connection::ConnectionGone;
use super::lists::{FetchWake, ProduceWait};
use super::outcome::{Committed, WaitError};
use crate::io::Clock;

/// Waits for every produce waiter of one request, all under the same deadline (a monotonic
/// instant): each gets its outcome, [`WaitError::TimedOut`] once the deadline passed without
/// it, or [`WaitError::Cancelled`] when the connection went away. An outcome already known at
/// the deadline still counts.
pub async fn wait_produce(
    clock: &dyn Clock,
    waits: &mut [ProduceWait],
    deadline: Duration,
    gone: &ConnectionGone,
) -> Vec<Result<Committed, WaitError>> {
    let mut out = Vec::with_capacity(waits.len());
    for wait in waits.iter_mut() {
        if let Some(result) = wait.try_result() {
            out.push(result);
            continue;
        }
        let left = deadline.saturating_sub(clock.monotonic());
        if left.is_zero() {
            out.push(Err(WaitError::TimedOut));
            continue;
        }
        if gone.is_gone() {
            out.push(Err(WaitError::Cancelled));
            continue;
        }
        let started = clock.monotonic();
        let result = tokio::select! {
            biased;
            r = wait.result() => Some(r),
            _ = clock.sleep(left) => None,
            _ = gone.gone() => Some(Err(WaitError::Cancelled)),
        };
        gone.add_waited(clock.monotonic().saturating_sub(started));
        // At the deadline, an outcome that arrived meanwhile still counts.
        let result = result
            .or_else(|| wait.try_result())
            .unwrap_or(Err(WaitError::TimedOut));
        out.push(result);
    }
    out
}

/// Waits until one of the fetch's partitions wakes it, the deadline passes
/// ([`WaitError::TimedOut`]) or the connection goes away ([`WaitError::Cancelled`]).
pub async fn wait_fetch(
    clock: &dyn Clock,
    wake: &FetchWake,
    deadline: Duration,
    gone: &ConnectionGone,
) -> Result<(), WaitError> {
    let left = deadline.saturating_sub(clock.monotonic());
    if left.is_zero() {
        return Err(WaitError::TimedOut);
    }
    let started = clock.monotonic();
    let result = tokio::select! {
        biased;
        _ = wake.woken() => Ok(()),
        _ = clock.sleep(left) => Err(WaitError::TimedOut),
        _ = gone.gone() => Err(WaitError::Cancelled),
    };
    gone.add_waited(clock.monotonic().saturating_sub(started));
    result
}
