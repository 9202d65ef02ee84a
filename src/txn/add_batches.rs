//! A partition leader's AddPartitionsToTxn batches to transaction coordinators (Kafka's
//! `AddPartitionsToTxnManager`), as a pure core: the produce requests of many producers that
//! must ask a coordinator on another node (KIP-890 part 1's verification, part 2's implicit
//! add) wait in one batch per coordinator node, and each node has at most one request in flight;
//! when it is answered the next batch goes. Within a batch a transactional id appears once:
//! a newer ask for it replaces the queued one, which is answered at once — fenced
//! (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH to the producer) if the newer one has a higher
//! epoch, else retriable (Kafka's NETWORK_EXCEPTION; the client retries) — and an ask with a
//! lower epoch than the queued one is itself fenced.
//!
//! Events in (`Ask`, `Answered`), actions out (`Send` a batch to a node, `Answer` a waiter),
//! invariants checked after every step; the driver (`broker::drivers::txn_coordinator::batches`)
//! sends and delivers.

use std::collections::BTreeMap;

use super::{TopicPartition, TxnError};

/// Who waits for an ask's answer (the driver's id).
pub type Waiter = u64;

/// One producer's partitions to verify (`verify_only`) or add at its coordinator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnAsk {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub verify_only: bool,
    pub partitions: Vec<TopicPartition>,
}

/// A node's answer to a batch: per transactional id, per partition; or one error for all (the
/// request failed or was refused).
pub type BatchAnswer =
    Result<BTreeMap<String, BTreeMap<TopicPartition, Result<(), TxnError>>>, TxnError>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchEvent {
    Ask {
        waiter: Waiter,
        node: i32,
        ask: TxnAsk,
    },
    /// The node answered the batch in flight to it (or the request failed).
    Answered { node: i32, answer: BatchAnswer },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchAction {
    /// Send these asks to `node` in one AddPartitionsToTxn, then report `Answered`.
    Send { node: i32, asks: Vec<TxnAsk> },
    /// One result per partition of the waiter's ask, in its order.
    Answer {
        waiter: Waiter,
        results: Vec<Result<(), TxnError>>,
    },
}

#[derive(Default)]
struct Node {
    queued: BTreeMap<String, (Waiter, TxnAsk)>,
    in_flight: Option<BTreeMap<String, (Waiter, TxnAsk)>>,
}

#[derive(Default)]
pub struct AddBatches {
    nodes: BTreeMap<i32, Node>,
}

fn all(ask: &TxnAsk, e: TxnError) -> Vec<Result<(), TxnError>> {
    vec![Err(e); ask.partitions.len()]
}

impl AddBatches {
    pub fn step(&mut self, event: BatchEvent) -> Vec<BatchAction> {
        let mut out = Vec::new();
        match event {
            BatchEvent::Ask { waiter, node, ask } => self.ask(waiter, node, ask, &mut out),
            BatchEvent::Answered { node, answer } => self.answered(node, answer, &mut out),
        }
        self.check_invariants();
        out
    }

    fn ask(&mut self, waiter: Waiter, node: i32, ask: TxnAsk, out: &mut Vec<BatchAction>) {
        assert!(!ask.partitions.is_empty(), "an ask names partitions");
        let n = self.nodes.entry(node).or_default();
        if let Some((_, queued)) = n.queued.get(&ask.transactional_id) {
            if queued.producer_epoch > ask.producer_epoch {
                let results = all(&ask, TxnError::ProducerFenced);
                return out.push(BatchAction::Answer { waiter, results });
            }
            let error = if queued.producer_epoch < ask.producer_epoch {
                TxnError::ProducerFenced
            } else {
                TxnError::CoordinatorNotAvailable
            };
            let (old, queued) = n.queued.remove(&ask.transactional_id).expect("found");
            out.push(BatchAction::Answer {
                waiter: old,
                results: all(&queued, error),
            });
        }
        n.queued.insert(ask.transactional_id.clone(), (waiter, ask));
        Self::send_next(node, n, out);
    }

    fn answered(&mut self, node: i32, answer: BatchAnswer, out: &mut Vec<BatchAction>) {
        let Some(n) = self.nodes.get_mut(&node) else {
            return;
        };
        let Some(batch) = n.in_flight.take() else {
            return;
        };
        for (id, (waiter, ask)) in batch {
            let results = match &answer {
                Err(e) => all(&ask, *e),
                Ok(by_id) => ask
                    .partitions
                    .iter()
                    .map(|tp| {
                        by_id
                            .get(&id)
                            .and_then(|r| r.get(tp))
                            .copied()
                            // Left out of the answer: not verified, retriable.
                            .unwrap_or(Err(TxnError::CoordinatorNotAvailable))
                    })
                    .collect(),
            };
            out.push(BatchAction::Answer { waiter, results });
        }
        Self::send_next(node, n, out);
        if n.queued.is_empty() && n.in_flight.is_none() {
            self.nodes.remove(&node);
        }
    }

    fn send_next(node: i32, n: &mut Node, out: &mut Vec<BatchAction>) {
        if n.in_flight.is_some() || n.queued.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut n.queued);
        out.push(BatchAction::Send {
            node,
            asks: batch.values().map(|(_, a)| a.clone()).collect(),
        });
        n.in_flight = Some(batch);
    }

    /// How many asks wait (queued or in flight).
    pub fn waiting(&self) -> usize {
        self.nodes
            .values()
            .map(|n| n.queued.len() + n.in_flight.as_ref().map_or(0, BTreeMap::len))
            .sum()
    }

    /// Every waiter waits once; a node with a queued batch has one in flight (else it would
    /// have been sent); no node is kept with nothing to do.
    fn check_invariants(&self) {
        let mut seen = std::collections::BTreeSet::new();
        for n in self.nodes.values() {
            assert!(
                n.queued.is_empty() || n.in_flight.is_some(),
                "a batch waits only behind one in flight"
            );
            assert!(
                !n.queued.is_empty() || n.in_flight.is_some(),
                "an idle node is forgotten"
            );
            let in_flight = n.in_flight.iter().flat_map(|b| b.values());
            for (waiter, _) in n.queued.values().chain(in_flight) {
                assert!(seen.insert(*waiter), "a waiter waits once");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(id: &str, epoch: i16, partitions: &[i32]) -> TxnAsk {
        TxnAsk {
            transactional_id: id.to_string(),
            producer_id: 7,
            producer_epoch: epoch,
            verify_only: true,
            partitions: partitions
                .iter()
                .map(|&p| TopicPartition::new("t", p))
                .collect(),
        }
    }

    fn sent(actions: &[BatchAction]) -> Vec<(i32, Vec<String>)> {
        actions
            .iter()
            .filter_map(|a| match a {
                BatchAction::Send { node, asks } => Some((
                    *node,
                    asks.iter().map(|a| a.transactional_id.clone()).collect(),
                )),
                _ => None,
            })
            .collect()
    }

    fn answers(actions: &[BatchAction]) -> Vec<(Waiter, Vec<Result<(), TxnError>>)> {
        actions
            .iter()
            .filter_map(|a| match a {
                BatchAction::Answer { waiter, results } => Some((*waiter, results.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn one_request_in_flight_per_node_and_the_rest_batched() {
        let mut b = AddBatches::default();
        let out = b.step(BatchEvent::Ask {
            waiter: 1,
            node: 2,
            ask: ask("a", 0, &[0]),
        });
        assert_eq!(sent(&out), [(2, vec!["a".to_string()])]);
        // While node 2 answers, two more producers queue up; node 3 goes at once.
        assert!(b
            .step(BatchEvent::Ask {
                waiter: 2,
                node: 2,
                ask: ask("b", 0, &[1])
            })
            .is_empty());
        assert!(b
            .step(BatchEvent::Ask {
                waiter: 3,
                node: 2,
                ask: ask("c", 0, &[2])
            })
            .is_empty());
        assert_eq!(
            sent(&b.step(BatchEvent::Ask {
                waiter: 4,
                node: 3,
                ask: ask("d", 0, &[0])
            })),
            [(3, vec!["d".to_string()])]
        );
        let ok = BTreeMap::from([(
            "a".to_string(),
            BTreeMap::from([(TopicPartition::new("t", 0), Ok(()))]),
        )]);
        let out = b.step(BatchEvent::Answered {
            node: 2,
            answer: Ok(ok),
        });
        assert_eq!(answers(&out), [(1, vec![Ok(())])]);
        assert_eq!(sent(&out), [(2, vec!["b".to_string(), "c".to_string()])]);
        // The batch fails as a whole: every waiter in it is told, retriably.
        let out = b.step(BatchEvent::Answered {
            node: 2,
            answer: Err(TxnError::CoordinatorNotAvailable),
        });
        assert_eq!(
            answers(&out),
            [
                (2, vec![Err(TxnError::CoordinatorNotAvailable)]),
                (3, vec![Err(TxnError::CoordinatorNotAvailable)])
            ]
        );
        assert!(sent(&out).is_empty());
        assert_eq!(b.waiting(), 1, "node 3's");
    }

    #[test]
    fn a_newer_ask_for_the_same_transaction_replaces_the_queued_one() {
        let mut b = AddBatches::default();
        b.step(BatchEvent::Ask {
            waiter: 1,
            node: 2,
            ask: ask("x", 0, &[9]),
        });
        b.step(BatchEvent::Ask {
            waiter: 2,
            node: 2,
            ask: ask("a", 3, &[0]),
        });
        // The same epoch (a retry): the queued one is told to retry.
        let out = b.step(BatchEvent::Ask {
            waiter: 3,
            node: 2,
            ask: ask("a", 3, &[0, 1]),
        });
        assert_eq!(
            answers(&out),
            [(2, vec![Err(TxnError::CoordinatorNotAvailable)])]
        );
        // A higher epoch: the queued one was fenced.
        let out = b.step(BatchEvent::Ask {
            waiter: 4,
            node: 2,
            ask: ask("a", 4, &[0]),
        });
        assert_eq!(answers(&out), [(3, vec![Err(TxnError::ProducerFenced); 2])]);
        // A lower epoch than the queued one is fenced itself.
        let out = b.step(BatchEvent::Ask {
            waiter: 5,
            node: 2,
            ask: ask("a", 2, &[0]),
        });
        assert_eq!(answers(&out), [(5, vec![Err(TxnError::ProducerFenced)])]);
        assert_eq!(b.waiting(), 2);
        // A partition the answer leaves out is not verified.
        b.step(BatchEvent::Answered {
            node: 2,
            answer: Ok(BTreeMap::new()),
        });
        let out = b.step(BatchEvent::Answered {
            node: 2,
            answer: Ok(BTreeMap::new()),
        });
        assert_eq!(
            answers(&out),
            [(4, vec![Err(TxnError::CoordinatorNotAvailable)])]
        );
        assert_eq!(b.waiting(), 0);
    }
}
