//! The transaction coordinator's state as `Broker` holds it: the core (once loaded) and the
//! driver's bookkeeping behind one short-held lock. Kept apart from the driver (`super`),
//! which takes the broker, so that the broker's definition (`shared`) holds it without
//! importing the driver.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use tokio::sync::oneshot;

use crate::txn::add_batches::{AddBatches, Waiter};
use crate::txn::coordinator::RequestId;
use crate::txn::{Reply, TxnCoordinator, TxnError};

#[derive(Default)]
pub(super) struct Inner {
    pub(super) core: Option<TxnCoordinator>,
    pub(super) waiting: BTreeMap<RequestId, oneshot::Sender<Reply>>,
    pub(super) next_request: RequestId,
    pub(super) loads: BTreeMap<i32, u64>,
    pub(super) next_load: u64,
    /// This node's AddPartitionsToTxn batches to coordinators elsewhere (as a partition
    /// leader), and who waits for each ask.
    pub(super) adds: AddBatches,
    pub(super) add_waiters: BTreeMap<Waiter, oneshot::Sender<Vec<Result<(), TxnError>>>>,
    pub(super) next_waiter: Waiter,
}

pub(crate) struct Txns {
    inner: Mutex<Inner>,
}

impl Txns {
    pub(crate) fn new() -> Txns {
        Txns {
            inner: Mutex::new(Inner {
                next_request: 1,
                next_load: 1,
                ..Inner::default()
            }),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}
