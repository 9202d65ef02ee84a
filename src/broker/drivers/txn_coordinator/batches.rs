//! The driver of `txn::add_batches` (Kafka's `AddPartitionsToTxnManager`): a partition
//! leader's asks to transaction coordinators on other nodes (KIP-890's verification and
//! implicit add) queue per node; each batch goes as one AddPartitionsToTxn in its own task, and
//! its answer releases the waiters and the node's next batch. The core sits beside the
//! coordinator's under the same short-held lock.

use tokio::sync::oneshot;

use crate::broker::shared::Broker;
use crate::txn::add_batches::{BatchAction, BatchEvent, TxnAsk};
use crate::txn::TxnError;

impl Broker {
    /// Asks the coordinator on `node` (not this one) about one producer's partitions: one
    /// result per partition, in order.
    pub(crate) async fn txn_ask_node(&self, node: i32, ask: TxnAsk) -> Vec<Result<(), TxnError>> {
        let n = ask.partitions.len();
        let (tx, rx) = oneshot::channel();
        let actions = {
            let mut inner = self.txns.lock();
            let waiter = inner.next_waiter;
            inner.next_waiter += 1;
            inner.add_waiters.insert(waiter, tx);
            inner.adds.step(BatchEvent::Ask { waiter, node, ask })
        };
        self.run_batch_actions(actions);
        rx.await
            .unwrap_or_else(|_| vec![Err(TxnError::CoordinatorNotAvailable); n])
    }

    fn run_batch_actions(&self, actions: Vec<BatchAction>) {
        for action in actions {
            match action {
                BatchAction::Answer { waiter, results } => {
                    let tx = self.txns.lock().add_waiters.remove(&waiter);
                    if let Some(tx) = tx {
                        let _ = tx.send(results);
                    }
                }
                BatchAction::Send { node, asks } => match self.this.upgrade() {
                    Some(broker) => {
                        self.io.spawn(async move {
                            let answer = broker.add_partitions_remote(node, &asks).await;
                            let actions = broker
                                .txns
                                .lock()
                                .adds
                                .step(BatchEvent::Answered { node, answer });
                            broker.run_batch_actions(actions);
                        });
                    }
                    // Shutting down: nothing will be sent; the waiters are told so.
                    None => {
                        let actions = self.txns.lock().adds.step(BatchEvent::Answered {
                            node,
                            answer: Err(TxnError::CoordinatorNotAvailable),
                        });
                        self.run_batch_actions(actions);
                    }
                },
            }
        }
    }
}
