//! Data-driven tests of the active controller's core, in the fetcher's and the ISR's style:
//! each file in `testdata/` is a script of commands, each followed by `----` and the expected
//! output (the actions, then the state). `REWRITE=1 cargo test` rewrites the expectations
//! (review the diff before keeping it). Every step also checks the core's invariants.
//!
//! The runner keeps the committed image: `commit` applies the proposal in flight to it.
//! Times are monotonic ms; `now=` never goes back (a missing one repeats the last).
//! - `config timeout=MS leaderless=MS retry=MS [rebalance=MS]` (before anything else)
//! - `active epoch=E` | `lost`
//! - `register id=N inc=N [prev=EPOCH] [durable]`
//! - `heartbeat id=N [epoch=E] [offset=N] [fence] [shutdown]` (epoch: the registered one;
//!   offset: the image's last applied)
//! - `producer-id` | `tick`
//! - `commit` | `fail` (the write in flight committed, or did not)
//! - `topic NAME replicas=1,2,3 [leader=N]` (another writer: a topic with one partition, ISR
//!   all, led by its first replica or `leader`; the core is told of the new image)
//! - `reserve next=N` (another writer reserved producer ids up to N)

use std::fmt::Write;

use super::*;
use crate::config::TopicConfig;
use crate::controller::image::{PartitionRecord, NO_LEADER};
use crate::data_driven::{args, num};

struct Runner {
    core: ActiveController,
    image: MetadataImage,
    /// The proposal in flight.
    proposed: Option<Vec<MetadataRecord>>,
    now: i64,
}

fn rules() -> Controller {
    Controller::new(1, 1, true, TopicConfig::default())
}

fn config(a: &std::collections::BTreeMap<String, String>) -> ActiveConfig {
    let or = |key: &str, default: i64| a.get(key).map_or(default, |_| num(a, key));
    ActiveConfig {
        session_timeout_ms: or("timeout", 9000),
        leaderless_retry_ms: or("leaderless", 1000),
        rebalance_every_ms: a.get("rebalance").map(|_| num(a, "rebalance")),
        retry_ms: or("retry", 250),
    }
}

fn topic_id(name: &str) -> Uuid {
    Uuid::from_u64_pair(0, name.bytes().fold(0u64, |h, b| h * 31 + b as u64))
}

fn ids(list: &[i32]) -> String {
    let words: Vec<String> = list.iter().map(|i| i.to_string()).collect();
    format!("[{}]", words.join(","))
}

impl Runner {
    fn new() -> Runner {
        Runner {
            core: ActiveController::new(config(&Default::default()), rules()),
            image: MetadataImage::default(),
            proposed: None,
            now: 0,
        }
    }

    fn topic_name(&self, id: Uuid) -> String {
        self.image
            .topic_by_id(id)
            .map_or_else(|| id.to_string(), |t| t.name.clone())
    }

    fn record(&self, r: &MetadataRecord) -> String {
        match r {
            MetadataRecord::RegisterBroker { id, fenced, .. } => {
                format!("register broker {id} fenced={fenced}")
            }
            MetadataRecord::BrokerChange {
                id,
                epoch,
                fenced,
                in_controlled_shutdown,
            } => {
                let mut s = format!("broker {id}@{epoch}");
                if let Some(f) = fenced {
                    let _ = write!(s, " fenced={f}");
                }
                if let Some(c) = in_controlled_shutdown {
                    let _ = write!(s, " shutdown={c}");
                }
                s
            }
            MetadataRecord::PartitionChange(c) => {
                let mut s = format!("partition {}-{}", self.topic_name(c.topic_id), c.partition);
                if let Some(l) = c.leader {
                    let _ = write!(s, " leader={l}");
                }
                if let Some(isr) = &c.isr {
                    let _ = write!(s, " isr={}", ids(isr));
                }
                if let Some(elr) = &c.elr {
                    let _ = write!(s, " elr={}", ids(elr));
                }
                s
            }
            MetadataRecord::ProducerIds { next } => format!("producer ids below {next}"),
            other => format!("{other:?}"),
        }
    }

    fn commit(&mut self, records: &[MetadataRecord]) {
        for r in records {
            let at = self.image.applied();
            self.image.apply(at, r);
        }
    }

    /// Another writer's records, committed to the runner's image.
    fn other_writer(
        &mut self,
        command: &str,
        words: &[&str],
        a: &std::collections::BTreeMap<String, String>,
    ) {
        if command == "reserve" {
            self.commit(&[MetadataRecord::ProducerIds {
                next: num(a, "next"),
            }]);
            return;
        }
        let name = words[1];
        let replicas: Vec<i32> = a["replicas"]
            .split(',')
            .map(|r| r.parse().expect("a broker id"))
            .collect();
        let id = topic_id(name);
        self.commit(&[
            MetadataRecord::topic(name, id, Default::default()),
            MetadataRecord::Partition(PartitionRecord {
                directories: Vec::new(),
                topic_id: id,
                partition: 0,
                leader: a
                    .get("leader")
                    .map_or(replicas.first().copied().unwrap_or(NO_LEADER), |_| {
                        num(a, "leader") as i32
                    }),
                isr: replicas.clone(),
                replicas,
                elr: vec![],
                last_known_elr: vec![],
                leader_epoch: 0,
                partition_epoch: 0,
                leader_recovering: false,
            }),
        ]);
    }

    fn state(&self) -> String {
        let Some(term) = &self.core.term else {
            return format!("inactive next-pid={}\n", self.core.next_producer_id);
        };
        let deadline = self
            .core
            .next_deadline()
            .map_or("none".to_string(), |d| d.to_string());
        let sessions: Vec<i32> = term.sessions.ids().collect();
        let brokers: Vec<String> = self
            .image
            .brokers()
            .map(|b| {
                let state = if b.fenced {
                    "fenced"
                } else if b.in_controlled_shutdown {
                    "shutdown"
                } else {
                    "up"
                };
                format!("{}@{}:{state}", b.id, b.epoch)
            })
            .collect();
        let writing = match &term.writing {
            None => "none".to_string(),
            Some(w) => format!("{w:?}"),
        };
        format!(
            "term={} writing={writing} deadline={deadline} sessions={} brokers=[{}] next-pid={}\n",
            term.epoch,
            ids(&sessions),
            brokers.join(" "),
            self.core.next_producer_id
        )
    }

    fn run(&mut self, line: &str) -> String {
        let words: Vec<&str> = line.split_whitespace().collect();
        let a = args(&words[1..]);
        let flag = |f: &str| words[1..].contains(&f);
        if a.contains_key("now") {
            self.now = num(&a, "now");
        }
        let image = |r: &Runner| Arc::new(r.image.clone());
        let event = match words[0] {
            "config" => {
                self.core = ActiveController::new(config(&a), rules());
                return self.state();
            }
            "active" => Event::BecameActive {
                epoch: num(&a, "epoch") as u32,
                image: image(self),
            },
            "lost" => Event::LostLeadership,
            "register" => Event::Register(RegistrationRequest {
                log_dirs: Vec::new(),
                id: num(&a, "id") as i32,
                incarnation: Uuid::from_u128(num(&a, "inc") as u128),
                listeners: Vec::new(),
                rack: None,
                previous_epoch: a.get("prev").map_or(-1, |_| num(&a, "prev")),
                durable: flag("durable"),
            }),
            "heartbeat" => {
                let id = num(&a, "id") as i32;
                Event::Heartbeat(HeartbeatRequest {
                    offline_dirs: Vec::new(),
                    cordoned_dirs: None,
                    id,
                    epoch: a.get("epoch").map_or_else(
                        || self.image.broker(id).map_or(-1, |b| b.epoch),
                        |_| num(&a, "epoch"),
                    ),
                    metadata_offset: a
                        .get("offset")
                        .map_or(self.image.applied() - 1, |_| num(&a, "offset")),
                    want_fence: flag("fence"),
                    want_shutdown: flag("shutdown"),
                    replica_logs: Vec::new(),
                })
            }
            "producer-id" => Event::AllocateProducerId,
            "tick" => Event::Tick,
            "commit" | "fail" if self.proposed.is_none() => {
                return format!("error: nothing proposed\n{}", self.state());
            }
            "commit" => {
                let records = self.proposed.take().expect("nothing proposed");
                self.commit(&records);
                Event::Committed(image(self))
            }
            "fail" => {
                self.proposed.take().expect("nothing proposed");
                Event::NotCommitted
            }
            "topic" | "reserve" if self.core.epoch().is_none() => {
                self.other_writer(words[0], &words, &a);
                return self.state();
            }
            "topic" | "reserve" => {
                self.other_writer(words[0], &words, &a);
                Event::Applied(image(self))
            }
            other => panic!("unknown command {other}"),
        };
        self.core.step(self.now, event);
        let mut out = String::new();
        for action in self.core.take_actions() {
            match action {
                Action::Propose(records) => {
                    let shown: Vec<String> = records.iter().map(|r| self.record(r)).collect();
                    let _ = writeln!(out, "propose: {}", shown.join("; "));
                    assert!(self.proposed.is_none(), "two proposals in flight");
                    self.proposed = Some(records);
                }
                Action::Answer(answer) => {
                    let _ = writeln!(out, "answer: {answer:?}");
                }
            }
        }
        out.push_str(&self.state());
        out
    }
}

#[test]
fn scripts() {
    crate::data_driven::check_dir("src/controller/active/testdata", Runner::new, Runner::run);
}

#[test]
#[should_panic(expected = "while a write is in flight")]
fn a_decision_while_a_write_is_in_flight_is_a_driver_bug() {
    let mut r = Runner::new();
    r.run("active epoch=1 now=0");
    r.run("register id=1 inc=1");
    r.run("producer-id");
}

#[test]
#[should_panic(expected = "time went back")]
fn time_never_goes_back() {
    let mut core = ActiveController::new(config(&Default::default()), rules());
    core.step(10, Event::LostLeadership);
    core.step(9, Event::LostLeadership);
}

#[test]
#[should_panic(expected = "term 3 after term 4")]
fn terms_only_move_forward() {
    let mut r = Runner::new();
    r.run("active epoch=4 now=0");
    r.run("active epoch=3");
}
