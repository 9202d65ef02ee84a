//! Data-driven tests of the follower's fetcher core, in the ISR core's style: each file in
//! `testdata/` is a script of commands, each followed by `----` and the expected output (the
//! actions, then the state). `REWRITE=1 cargo test` rewrites the expectations (review the diff
//! before keeping it). Every step also checks the core's invariants.
//!
//! Partitions are written `TOPIC-INDEX`; a topic's id is derived from its name. Times in ms.
//! - `config backoff=MS max=N [planted=NAME]` (a planted bug's scenario name)
//! - `assign t-0 epoch=E` | `unassign t-0`
//! - `poll now=MS`
//! - `positions now=MS t-0:OFFSET[:START[:LAST_EPOCH[:EPOCH]]] ...` (start 0, last epoch 0,
//!   epoch the assigned one by default)
//! - `failed now=MS` (the whole fetch)
//! - `fetched now=MS t-0=records:HW[:LOG_START] t-1=diverging:EPOCH@END t-2=out-of-range t-3=error:CODE
//!   t-4=metadata:CODE`
//! - `epoch now=MS t-0 own=EPOCH@END end=N` (own -1@-1: never had that epoch)
//! - `offsets now=MS t-0 start=S end=E local=N` | `offsets now=MS t-0 none local=N`
//! - `done now=MS t-0 ok|stale|failed`

use std::fmt::Write;

use super::*;
use crate::data_driven::{args, num};

struct Runner {
    core: Fetcher,
}

fn key(word: &str) -> Key {
    let (topic, index) = word.rsplit_once('-').expect("TOPIC-INDEX");
    (topic.to_string(), index.parse().expect("a partition index"))
}

fn topic_id(topic: &str) -> Uuid {
    Uuid::from_u64_pair(0, topic.bytes().fold(0u64, |h, b| h * 31 + b as u64))
}

fn topic_of(id: Uuid, core: &Fetcher) -> String {
    core.partitions
        .keys()
        .map(|k| k.0.clone())
        .find(|t| topic_id(t) == id)
        .unwrap_or_else(|| format!("{id}"))
}

fn epoch_end(text: &str) -> EpochEnd {
    let (epoch, end) = text.split_once('@').expect("EPOCH@END");
    EpochEnd {
        epoch: epoch.parse().unwrap(),
        end_offset: end.parse().unwrap(),
    }
}

fn ms(d: Duration) -> u128 {
    d.as_millis()
}

impl Runner {
    fn new() -> Runner {
        Runner {
            core: Fetcher::new(FetcherConfig {
                backoff: Duration::from_millis(1000),
                max_partitions: 500,
                planted: Default::default(),
            }),
        }
    }

    fn run(&mut self, line: &str) -> String {
        let words: Vec<&str> = line.split_whitespace().collect();
        let a = args(&words[1..]);
        // Bare words after the command (the partition, then an outcome).
        let bare: Vec<&str> = words[1..]
            .iter()
            .copied()
            .filter(|w| !w.contains('='))
            .collect();
        let now = Duration::from_millis(a.get("now").map_or(0, |_| num(&a, "now")) as u64);
        let now = now.max(self.core.now);
        let epoch_of = |core: &Fetcher, k: &Key| core.leader_epoch(k).map_or(0, |(_, e)| e);
        let event = match words[0] {
            "config" => {
                let planted = a.get("planted").map_or("", |s| s.as_str());
                self.core = Fetcher::new(FetcherConfig {
                    backoff: Duration::from_millis(num(&a, "backoff") as u64),
                    max_partitions: num(&a, "max") as usize,
                    planted: crate::config::planted::Planted::new(match planted {
                        "" => None,
                        name => Some(crate::config::PlantedBug::parse(name).unwrap()),
                    }),
                });
                return self.state();
            }
            "assign" => {
                let k = key(bare[0]);
                Event::Assign {
                    topic_id: topic_id(&k.0),
                    key: k,
                    leader_epoch: num(&a, "epoch") as i32,
                }
            }
            "unassign" => Event::Unassign { key: key(bare[0]) },
            "poll" => Event::Poll,
            "failed" => Event::FetchFailed,
            "positions" => Event::Positions(
                words[1..]
                    .iter()
                    .filter(|w| !w.starts_with("now="))
                    .map(|w| {
                        let parts: Vec<&str> = w.split(':').collect();
                        let k = key(parts[0]);
                        let field = |i: usize, default: i64| {
                            parts.get(i).map_or(default, |v| v.parse().unwrap())
                        };
                        Position {
                            topic_id: topic_id(&k.0),
                            leader_epoch: field(4, epoch_of(&self.core, &k) as i64) as i32,
                            fetch_offset: field(1, 0),
                            log_start_offset: field(2, 0),
                            last_fetched_epoch: field(3, 0) as i32,
                            topic: k.0,
                            partition: k.1,
                        }
                    })
                    .collect(),
            ),
            "fetched" => Event::Fetched(
                words[1..]
                    .iter()
                    .filter(|w| !w.starts_with("now="))
                    .map(|w| {
                        let (k, answer) = w.split_once('=').expect("t-0=ANSWER");
                        let k = key(k);
                        let (kind, value) = answer.split_once(':').unwrap_or((answer, ""));
                        let answer = match kind {
                            "records" => {
                                let (hw, start) = value.split_once(':').unwrap_or((value, "0"));
                                Answer::Records {
                                    records: Bytes::from_static(b"batches"),
                                    high_watermark: hw.parse().unwrap(),
                                    log_start_offset: start.parse().unwrap(),
                                }
                            }
                            "diverging" => Answer::Diverging(epoch_end(value)),
                            "out-of-range" => Answer::OutOfRange,
                            "error" => Answer::Retry(value.parse().unwrap()),
                            "metadata" => Answer::WaitForMetadata(value.parse().unwrap()),
                            other => panic!("unknown answer {other}"),
                        };
                        (topic_id(&k.0), k.1, answer)
                    })
                    .collect(),
            ),
            "epoch" => {
                let k = key(bare[0]);
                Event::EpochLookedUp {
                    leader_epoch: epoch_of(&self.core, &k),
                    key: k,
                    own: epoch_end(&a["own"]),
                    log_end: num(&a, "end"),
                }
            }
            "offsets" => {
                let k = key(bare[0]);
                Event::LeaderOffsets {
                    leader_epoch: epoch_of(&self.core, &k),
                    key: k,
                    offsets: (bare.get(1) != Some(&"none"))
                        .then(|| (num(&a, "start"), num(&a, "end"))),
                    local_end: num(&a, "local"),
                }
            }
            "done" => {
                let k = key(bare[0]);
                Event::Done {
                    leader_epoch: epoch_of(&self.core, &k),
                    key: k,
                    result: match bare[1] {
                        "ok" => StepResult::Done,
                        "stale" => StepResult::Stale,
                        "failed" => StepResult::Failed,
                        other => panic!("unknown result {other}"),
                    },
                }
            }
            other => panic!("unknown command {other}"),
        };
        self.core.step(now, event);
        let mut out = String::new();
        for action in self.core.take_actions() {
            writeln!(out, "action: {}", self.describe(&action)).unwrap();
        }
        out + &self.state()
    }

    fn describe(&self, action: &Action) -> String {
        let pos = |p: &Position| {
            format!(
                "{}-{}@{} (epoch {}, last {}, start {})",
                p.topic,
                p.partition,
                p.fetch_offset,
                p.leader_epoch,
                p.last_fetched_epoch,
                p.log_start_offset
            )
        };
        match action {
            Action::ReadPositions(list) => {
                let names: Vec<String> = list
                    .iter()
                    .map(|r| {
                        format!(
                            "{}-{}{}",
                            r.key.0,
                            r.key.1,
                            if r.truncate_to_hw_first {
                                " (cut to hw first)"
                            } else {
                                ""
                            }
                        )
                    })
                    .collect();
                format!("read positions [{}]", names.join(", "))
            }
            Action::SendFetch(list) => {
                let names: Vec<String> = list.iter().map(pos).collect();
                format!("send fetch [{}]", names.join(", "))
            }
            Action::Append {
                position,
                high_watermark,
                log_start,
                ..
            } => format!(
                "append {} then hw {high_watermark}{}",
                pos(position),
                log_start.map_or(String::new(), |s| format!(", log start {s}"))
            ),
            Action::LookUpEpoch { position, epoch } => {
                format!("look up own end of epoch {epoch} for {}", pos(position))
            }
            Action::AskLeaderOffsets { position } => {
                format!("ask leader offsets for {}", pos(position))
            }
            Action::Truncate {
                key,
                leader_epoch,
                from,
                to,
            } => format!(
                "truncate {}-{} (epoch {leader_epoch}) from {from} to {to}",
                key.0, key.1
            ),
            Action::BackOff { key, until } => {
                format!("back off {}-{} until {}", key.0, key.1, ms(*until))
            }
            Action::StartAt {
                key,
                leader_epoch,
                from,
                at,
            } => format!(
                "start over {}-{} (epoch {leader_epoch}) at the leader's log start {at}, log end {from}",
                key.0, key.1
            ),
        }
    }

    fn state(&self) -> String {
        let c = &self.core;
        let round = match (&c.reading, &c.in_flight) {
            (Some(r), _) => format!("reading {}", r.len()),
            (_, Some(f)) => {
                let names: Vec<String> = f
                    .keys()
                    .map(|(id, i)| format!("{}-{i}", topic_of(*id, c)))
                    .collect();
                format!("in flight [{}]", names.join(", "))
            }
            _ => "none".to_string(),
        };
        let partitions: Vec<String> = c
            .partitions
            .iter()
            .map(|(k, a)| {
                let mut s = format!("{}-{}:e={}", k.0, k.1, a.leader_epoch);
                if let Some(t) = a.retry_at {
                    write!(s, ",retry={}", ms(t)).unwrap();
                }
                if let Some(o) = a.open {
                    write!(s, ",open={o:?}").unwrap();
                }
                if let Some(l) = a.last_fetch_offset {
                    write!(s, ",last={l}").unwrap();
                }
                if a.epoch_unchecked {
                    s.push_str(",unchecked");
                }
                s
            })
            .collect();
        format!(
            "round={round} deadline={} partitions=[{}]\n",
            c.next_deadline()
                .map_or("none".to_string(), |d| ms(d).to_string()),
            partitions.join(" ")
        )
    }
}

#[test]
fn data_driven() {
    crate::data_driven::check_dir("src/replica/fetcher/testdata", Runner::new, |r, c| r.run(c));
}

#[test]
#[should_panic(expected = "went back")]
fn a_fetch_offset_going_back_without_a_truncation_is_caught() {
    let mut r = Runner::new();
    r.run("assign t-0 epoch=1");
    r.run("poll now=0");
    r.run("positions now=0 t-0:10");
    r.run("fetched now=1 t-0=records:10");
    r.run("done now=1 t-0 ok");
    r.run("poll now=2");
    r.run("positions now=2 t-0:7");
}
