//! Data-driven tests of the replica-set core, in raft-rs style: each file in `testdata/` is a
//! script of commands, each followed by `----` and the expected output (the actions, then the
//! state). `REWRITE=1 cargo test` rewrites the expectations (review the diff before keeping
//! it). Every step also asserts the core's own invariants (HW ≤ leader end, HW monotonic).
//!
//! Commands (leader is broker 1):
//! - `config lag=MS min-isr=N`
//! - `brokers ID:EPOCH[:fenced] ...`
//! - `leader epoch=E pe=PE replicas=1,2,3 isr=1,2 end=N [durable=N] hw=N now=MS`
//! - `append end=N [durable=N]`
//! - `fetch r=ID off=N now=MS [be=EPOCH] [start=N]` (the follower's log start, 0 by default)
//! - `low-watermark start=N`: DeleteRecords' low watermark with the leader's log start at N
//! - `tick now=MS`
//! - `alter committed le=E pe=PE isr=1,2` | `alter refused` | `alter stale` | `alter retry`
//! - `produce-check`: the min.insync.replicas checks before and after an append

use std::collections::BTreeMap;
use std::fmt::Write;

use super::*;
use crate::data_driven::{args, num};

struct Runner {
    set: ReplicaSet,
    log_end: i64,
}

fn ids(a: &BTreeMap<String, String>, key: &str) -> Vec<i32> {
    a.get(key)
        .map(|v| {
            v.split(',')
                .filter(|s| !s.is_empty())
                .map(|s| s.parse().unwrap())
                .collect()
        })
        .unwrap_or_default()
}

impl Runner {
    fn new() -> Runner {
        let config = IsrConfig {
            replica_lag_time_max_ms: 30_000,
            min_insync_replicas: 2,
            planted: Default::default(),
        };
        Runner {
            set: ReplicaSet::new(1, config),
            log_end: 0,
        }
    }

    fn run(&mut self, line: &str) -> String {
        let words: Vec<&str> = line.split_whitespace().collect();
        let a = args(&words[1..]);
        let event = match words[0] {
            "config" => {
                self.set.set_config(IsrConfig {
                    replica_lag_time_max_ms: num(&a, "lag"),
                    min_insync_replicas: num(&a, "min-isr") as usize,
                    planted: Default::default(),
                });
                return self.state();
            }
            "produce-check" => {
                return format!(
                    "before append: {:?}\nafter append: {}\n",
                    self.set.check_min_isr(),
                    match self.set.enough_replicas_after_append() {
                        true => "NONE",
                        false => "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
                    }
                );
            }
            "brokers" => Event::Brokers(
                words[1..]
                    .iter()
                    .map(|w| {
                        let parts: Vec<&str> = w.split(':').collect();
                        let view = BrokerView {
                            broker_epoch: parts[1].parse().unwrap(),
                            eligible: parts.get(2) != Some(&"fenced"),
                        };
                        (parts[0].parse().unwrap(), view)
                    })
                    .collect(),
            ),
            "leader" => {
                self.log_end = num(&a, "end");
                Event::BecomeLeader {
                    leadership: Leadership {
                        leader_epoch: num(&a, "epoch") as i32,
                        partition_epoch: num(&a, "pe") as i32,
                        replicas: ids(&a, "replicas"),
                        isr: ids(&a, "isr"),
                    },
                    log_end: self.log_end,
                    durable_end: a
                        .get("durable")
                        .map_or(self.log_end, |_| num(&a, "durable")),
                    high_watermark: num(&a, "hw"),
                    now: num(&a, "now"),
                }
            }
            "append" => {
                self.log_end = num(&a, "end");
                Event::LeaderEnd {
                    log_end: self.log_end,
                    durable_end: a
                        .get("durable")
                        .map_or(self.log_end, |_| num(&a, "durable")),
                }
            }
            "low-watermark" => {
                return format!(
                    "low watermark {}\n",
                    self.set.low_watermark(num(&a, "start"))
                );
            }
            "fetch" => Event::FollowerFetch {
                replica: num(&a, "r") as i32,
                fetch_offset: num(&a, "off"),
                log_start_offset: a.get("start").map_or(0, |_| num(&a, "start")),
                broker_epoch: a.get("be").map_or(-1, |_| num(&a, "be")),
                now: num(&a, "now"),
            },
            "tick" => Event::Tick {
                now: num(&a, "now"),
            },
            "alter" => Event::AlterPartitionDone(match words[1] {
                "committed" => AlterOutcome::Committed {
                    leader_epoch: num(&a, "le") as i32,
                    partition_epoch: num(&a, "pe") as i32,
                    isr: ids(&a, "isr"),
                },
                "refused" => AlterOutcome::Refused,
                "stale" => AlterOutcome::Stale,
                "retry" => AlterOutcome::Retry,
                other => panic!("unknown alter outcome {other}"),
            }),
            other => panic!("unknown command {other}"),
        };
        let mut out = String::new();
        match self.set.step(event) {
            Ok(actions) => {
                for action in actions {
                    writeln!(out, "action: {action:?}").unwrap();
                }
            }
            Err(refused) => writeln!(out, "refused: {refused:?}").unwrap(),
        }
        out + &self.state()
    }

    fn state(&self) -> String {
        let s = &self.set;
        let followers: Vec<String> = s
            .followers
            .iter()
            .map(|(r, f)| {
                let caught = match f.last_caught_up_ms {
                    NEVER => "never".to_string(),
                    t => t.to_string(),
                };
                format!("{r}:leo={},caught={caught}", f.log_end)
            })
            .collect();
        format!(
            "hw={} isr={:?} maximal={:?} pending={} followers=[{}]\n",
            s.high_watermark(),
            s.committed_isr(),
            s.maximal_isr(),
            match &s.pending {
                None => "none".to_string(),
                Some(p) => format!(
                    "{:?}{}",
                    p.isr,
                    if p.waiting_for_metadata {
                        " (waiting for metadata)"
                    } else if p.in_flight {
                        ""
                    } else {
                        " (to resend)"
                    }
                ),
            },
            followers.join(" ")
        )
    }
}

#[test]
fn data_driven() {
    crate::data_driven::check_dir("src/replica/isr/testdata", Runner::new, |r, c| r.run(c));
}

mod random {
    use proptest::prelude::*;

    use super::super::*;

    #[derive(Clone, Debug)]
    enum Op {
        Append(i64),
        Fetch(i32, i64, bool),
        Tick(i64),
        Alter(u8),
        Fence(i32, bool),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (1..20i64).prop_map(Op::Append),
            6 => (2..5i32, 0..30i64, any::<bool>()).prop_map(|(r, back, stale)| Op::Fetch(r, back, stale)),
            2 => (1..20_000i64).prop_map(Op::Tick),
            2 => (0..4u8).prop_map(Op::Alter),
            1 => (2..5i32, any::<bool>()).prop_map(|(r, f)| Op::Fence(r, f)),
        ]
    }

    proptest! {
        /// Whatever happens, the HW only moves when the committed ISR meets min.insync.replicas,
        /// and then to at most the minimum log end over the leader and the maximal ISR (never
        /// on a pending shrink's say-so, notes §8 invariant 7).
        #[test]
        fn the_high_watermark_is_sound(ops in proptest::collection::vec(op(), 1..120)) {
            let config = IsrConfig {
                replica_lag_time_max_ms: 10_000,
                min_insync_replicas: 2,
                planted: Default::default(),
            };
            let mut set = ReplicaSet::new(1, config);
            let mut brokers: BTreeMap<i32, BrokerView> = (1..5)
                .map(|r| (r, BrokerView { broker_epoch: r as i64 * 10, eligible: true }))
                .collect();
            set.step(Event::Brokers(brokers.clone())).unwrap();
            let leadership = Leadership {
                leader_epoch: 1, partition_epoch: 1, replicas: vec![1, 2, 3, 4], isr: vec![1, 2, 3],
            };
            set.step(Event::BecomeLeader {
                leadership, log_end: 0, durable_end: 0, high_watermark: 0, now: 0,
            }).unwrap();
            let (mut end, mut now) = (0i64, 0i64);
            let mut last_alter: Option<(i32, Vec<i32>)> = None;
            for op in ops {
                let before = set.high_watermark();
                let event = match op {
                    Op::Append(n) => {
                        end += n;
                        Event::LeaderEnd { log_end: end, durable_end: end }
                    }
                    Op::Fetch(r, back, stale) => {
                        now += 100;
                        let epoch = brokers[&r].broker_epoch - stale as i64;
                        Event::FollowerFetch {
                            replica: r, fetch_offset: (end - back).max(0), log_start_offset: 0,
                            broker_epoch: epoch, now,
                        }
                    }
                    Op::Tick(dt) => {
                        now += dt;
                        Event::Tick { now }
                    }
                    Op::Alter(kind) => Event::AlterPartitionDone(match (kind, &last_alter) {
                        (0, Some((pe, isr))) => AlterOutcome::Committed {
                            leader_epoch: 1, partition_epoch: pe + 1, isr: isr.clone(),
                        },
                        (1, _) => AlterOutcome::Refused,
                        (2, _) => AlterOutcome::Stale,
                        _ => AlterOutcome::Retry,
                    }),
                    Op::Fence(r, fenced) => {
                        brokers.get_mut(&r).unwrap().eligible = !fenced;
                        Event::Brokers(brokers.clone())
                    }
                };
                let Ok(actions) = set.step(event) else { continue };
                for action in &actions {
                    if let Action::AlterPartition { partition_epoch, isr, .. } = action {
                        last_alter = Some((*partition_epoch, isr.iter().map(|m| m.0).collect::<Vec<_>>()));
                    }
                }
                let hw = set.high_watermark();
                prop_assert!(hw >= before);
                prop_assert!(hw <= end);
                if hw > before {
                    prop_assert!(set.committed_isr().len() >= 2, "HW moved under min ISR");
                    // Committed ISR ∪ pending additions, computed here, not by the core.
                    let mut members = set.committed_isr();
                    members.extend(set.maximal_isr());
                    for r in members {
                        if r != 1 {
                            prop_assert!(set.follower_log_end(r).unwrap() >= hw,
                                "HW {} past member {}'s log end", hw, r);
                        }
                    }
                }
            }
        }
    }
}
