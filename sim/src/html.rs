//! A picture of one run (`cargo sim run … --html FILE`): one self-contained HTML page, inline
//! SVG and a little inline script, nothing fetched. A space-time diagram with a lane per broker
//! node and per client: produce invocations, acknowledgements (with their offsets) and
//! failures, fetches, faults (as spans on the node they hit) and heals, in simulated time. The
//! checker's violations are drawn in red on the events that witness them (the acknowledgement
//! of a lost write, with a dashed link to the first fault after it on the node; both reads of
//! an inconsistent offset; the read a crash took back), and listed above the diagram.
//!
//! Zoom with the wheel (or the buttons), drag to pan, double-click to reset, click a violation
//! to zoom to its witnesses; `page.html#15000-17000` opens on that window (simulated ms);
//! hovering a mark shows its details. The page marks itself `data-ready` once its script has run and counts
//! its violation marks in `data-violations`, which is what the headless-browser test checks.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::history::Event;
use crate::report::RunOutcome;
use crate::scenario::FaultKind;

/// A partition event without a node (an ISR change): drawn on the run lane.
const NO_NODE: i32 = -1;
const LANE: f64 = 26.0;
const TOP: f64 = 8.0;

/// Who an event belongs to: a lane of the diagram.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Lane {
    Run,
    Broker(u32),
    Producer(u64),
    Liveness,
    Consumer(u32),
    FinalRead,
    Admin,
}

impl Lane {
    fn label(&self) -> String {
        match self {
            Lane::Run => "run".into(),
            Lane::Broker(n) => format!("broker-{n}"),
            Lane::Producer(p) => format!("producer-{p}"),
            Lane::Liveness => "liveness probe".into(),
            Lane::Consumer(c) => format!("consumer-{c}"),
            Lane::FinalRead => "final read".into(),
            Lane::Admin => "admin".into(),
        }
    }
}

/// The liveness probe's operations carry this producer number (`world::liveness_check`).
const LIVENESS_PRODUCER: u64 = (u32::MAX as u64) >> 8;

fn producer_lane(op: u64) -> Lane {
    match op >> 40 {
        LIVENESS_PRODUCER => Lane::Liveness,
        p => Lane::Producer(p),
    }
}

fn consumer_lane(consumer: u32) -> Lane {
    if consumer == u32::MAX {
        Lane::FinalRead
    } else {
        Lane::Consumer(consumer)
    }
}

/// The broker a note names (`broker-N`), if any.
fn broker_named(text: &str) -> Option<u32> {
    let at = text.find("broker-")?;
    let digits: String = text[at + 7..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.parse().ok()
}

/// The number right after `key` in a checker message ("partition 3 offset 17: …").
fn number_after(text: &str, key: &str) -> Option<i64> {
    let at = text.find(key)? + key.len();
    let digits: String = text[at..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '-')
        .collect();
    digits.parse().ok()
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn kind_name(kind: FaultKind) -> String {
    toml::Value::try_from(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{kind:?}"))
}

/// One mark: a tick at `t` (or a span to `t2`), on a lane, with its hover text.
struct Mark {
    lane: Lane,
    t: u64,
    t2: Option<u64>,
    class: String,
    detail: String,
    /// Index into the violation list this mark witnesses.
    witness: Option<usize>,
}

/// Where each produce operation stands.
#[derive(Default)]
struct Op {
    invoked_ms: u64,
    partition: i32,
    values: Vec<String>,
    /// (time, offset) of its acknowledgement.
    ack: Option<(u64, i64)>,
    failed: Option<(u64, String)>,
}

/// One violation with the marks that witness it.
struct Violation {
    text: String,
    at_ms: u64,
}

pub fn page(outcome: &RunOutcome, brokers: u32, scenario_path: &str) -> String {
    let history = &outcome.history;
    let end_ms = history.iter().map(|e| e.at_ms).max().unwrap_or(0).max(1);
    let mut marks: Vec<Mark> = Vec::new();
    let mut lanes: std::collections::BTreeSet<Lane> =
        (0..brokers.max(1)).map(Lane::Broker).collect();
    lanes.insert(Lane::Run);
    let mut ops: BTreeMap<u64, Op> = BTreeMap::new();
    let mut faults: Vec<(u64, u64, u32, FaultKind, Option<i32>)> = Vec::new();
    // (partition, offset) → the marks of the reads there, and the value each read.
    let mut reads_at: BTreeMap<(i32, i64), Vec<(usize, String)>> = BTreeMap::new();
    // Fetches: consecutive reads by one consumer of one partition at one instant are one mark.
    let mut fetch: Option<(u32, i32, u64, i64, i64, i64, usize)> = None;
    let flush = |fetch: &mut Option<(u32, i32, u64, i64, i64, i64, usize)>,
                 marks: &mut Vec<Mark>| {
        if let Some((consumer, p, t, first, last, hw, _)) = fetch.take() {
            marks.push(Mark {
                lane: consumer_lane(consumer),
                t,
                t2: None,
                class: "read".into(),
                detail: format!(
                    "read partition {p} offsets {first}..={last} (high watermark {hw}) at {t} ms"
                ),
                witness: None,
            });
        }
    };
    for e in history {
        let t = e.at_ms;
        // A fetch's reads come one after another at one instant; anything else ends it.
        if !matches!(e.event, Event::Read { .. }) {
            flush(&mut fetch, &mut marks);
        }
        match &e.event {
            Event::Invoke {
                op,
                partition,
                values,
                ..
            } => {
                lanes.insert(producer_lane(*op));
                ops.insert(
                    *op,
                    Op {
                        invoked_ms: t,
                        partition: *partition,
                        values: values.clone(),
                        ..Op::default()
                    },
                );
            }
            Event::Ack { op, offset } => {
                if let Some(o) = ops.get_mut(op) {
                    o.ack.get_or_insert((t, *offset));
                }
            }
            Event::Fail { op, error, .. } => {
                if let Some(o) = ops.get_mut(op) {
                    o.failed.get_or_insert((t, error.clone()));
                }
            }
            Event::Read {
                consumer,
                partition,
                offset,
                value,
                high_watermark,
            } => {
                lanes.insert(consumer_lane(*consumer));
                let same = matches!(fetch, Some((c, p, ft, _, last, _, _))
                    if c == *consumer && p == *partition && ft == t && last + 1 == *offset);
                if same {
                    if let Some(f) = fetch.as_mut() {
                        f.4 = *offset;
                    }
                } else {
                    flush(&mut fetch, &mut marks);
                    fetch = Some((
                        *consumer,
                        *partition,
                        t,
                        *offset,
                        *offset,
                        *high_watermark,
                        marks.len(),
                    ));
                }
                // The fetch's mark: pushed when the fetch ends, at the index noted when it began
                // (no other mark comes between).
                let index = fetch.as_ref().map_or(marks.len(), |f| f.6);
                reads_at
                    .entry((*partition, *offset))
                    .or_default()
                    .push((index, value.clone()));
            }
            Event::Reset {
                consumer,
                partition,
                from,
                to,
            } => marks.push(Mark {
                lane: consumer_lane(*consumer),
                t,
                t2: None,
                class: "reset".into(),
                detail: format!("partition {partition}: position reset from {from} to {to}"),
                witness: None,
            }),
            Event::CorruptRead {
                consumer,
                partition,
                offset,
                error,
            } => {
                lanes.insert(consumer_lane(*consumer));
                marks.push(Mark {
                    lane: consumer_lane(*consumer),
                    t,
                    t2: None,
                    class: "corrupt".into(),
                    detail: format!("corrupt read: partition {partition} offset {offset}: {error}"),
                    witness: None,
                });
            }
            Event::AdminInvoke { op, change } => {
                lanes.insert(Lane::Admin);
                marks.push(Mark {
                    lane: Lane::Admin,
                    t,
                    t2: None,
                    class: "inv".into(),
                    detail: format!("admin op {op}: {change:?}"),
                    witness: None,
                });
            }
            Event::AdminAck { op } => marks.push(Mark {
                lane: Lane::Admin,
                t,
                t2: None,
                class: "ack".into(),
                detail: format!("admin op {op} acknowledged"),
                witness: None,
            }),
            Event::AdminFail {
                op,
                definite,
                error,
            } => marks.push(Mark {
                lane: Lane::Admin,
                t,
                t2: None,
                class: "fail".into(),
                detail: format!(
                    "admin op {op} {}: {error}",
                    if *definite { "refused" } else { "unanswered" }
                ),
                witness: None,
            }),
            Event::Scheduled(f) => {
                let d = f.duration_ms.unwrap_or(0);
                lanes.insert(Lane::Broker(f.node));
                faults.push((t, d, f.node, f.fault, f.partition));
                marks.push(Mark {
                    lane: Lane::Broker(f.node),
                    t,
                    t2: Some(t + d.max(1)),
                    class: format!("fault k-{}", kind_name(f.fault)),
                    detail: format!(
                        "fault {} on broker-{} at {t} ms for {d} ms",
                        kind_name(f.fault),
                        f.node
                    ),
                    witness: None,
                });
            }
            Event::Inject(_)
            | Event::Group(_)
            | Event::Txn(_)
            | Event::Consumer(_)
            | Event::Delete(_) => {}
            Event::Partition(p) => {
                // Node ids are 1-based; lanes are named by node index.
                use crate::partition_trace::PartitionEvent as P;
                let (node, class, detail) = match p {
                    P::Leader {
                        partition,
                        leader,
                        epoch,
                    } => (
                        *leader,
                        "lead",
                        format!("partition {partition}: leader {leader}, epoch {epoch}"),
                    ),
                    P::Isr {
                        partition,
                        isr,
                        elr,
                        partition_epoch,
                    } => (
                        NO_NODE,
                        "isr",
                        format!(
                            "partition {partition}: ISR {isr:?}, ELR {elr:?} (partition epoch {partition_epoch})"
                        ),
                    ),
                    P::Restarted {
                        broker,
                        removed_from,
                    } => (
                        *broker,
                        "isr",
                        format!(
                            "broker {broker} registered anew, out of ISR/ELR of partitions {removed_from:?}"
                        ),
                    ),
                    P::CoordinatorLeader {
                        partition,
                        leader,
                        epoch,
                        ..
                    } => (
                        *leader,
                        "lead",
                        format!("__consumer_offsets-{partition}: leader {leader}, epoch {epoch}"),
                    ),
                    P::Truncated {
                        node,
                        partition,
                        leader_epoch,
                        from,
                        to,
                    } => (
                        *node,
                        "trunc",
                        format!(
                            "partition {partition}: truncated {from} → {to} (following epoch {leader_epoch})"
                        ),
                    ),
                };
                let lane = if node >= 1 {
                    Lane::Broker(node as u32 - 1)
                } else {
                    Lane::Run
                };
                lanes.insert(lane.clone());
                marks.push(Mark {
                    lane,
                    t,
                    t2: None,
                    class: class.into(),
                    detail: format!("{detail} ({t} ms)"),
                    witness: None,
                });
            }
            Event::Fault(text) | Event::Heal(text) | Event::Note(text) => {
                let lane = broker_named(text).map_or(Lane::Run, Lane::Broker);
                lanes.insert(lane.clone());
                let class = match &e.event {
                    Event::Fault(_) => "fnote",
                    Event::Heal(_) => "heal",
                    _ => "note",
                };
                marks.push(Mark {
                    lane,
                    t,
                    t2: None,
                    class: class.into(),
                    detail: format!("{text} ({t} ms)"),
                    witness: None,
                });
            }
        }
    }
    flush(&mut fetch, &mut marks);
    // Produce operations: a span from invocation to answer, a tick for the answer.
    let mut ack_mark: BTreeMap<&str, usize> = BTreeMap::new();
    let mut ack_partition: BTreeMap<&str, i32> = BTreeMap::new();
    let mut acks_at: BTreeMap<(i32, i64), Vec<usize>> = BTreeMap::new();
    for (op, o) in &ops {
        let lane = producer_lane(*op);
        let first = o.values.first().map_or("", String::as_str);
        let (end, class) = match (&o.ack, &o.failed) {
            (Some((t, _)), _) => (*t, "span"),
            (None, Some((t, _))) => (*t, "span failed"),
            (None, None) => (o.invoked_ms, "span"),
        };
        marks.push(Mark {
            lane: lane.clone(),
            t: o.invoked_ms,
            t2: Some(end.max(o.invoked_ms + 1)),
            class: class.into(),
            detail: format!(
                "produce {first} (+{} more) to partition {} invoked at {} ms",
                o.values.len().saturating_sub(1),
                o.partition,
                o.invoked_ms
            ),
            witness: None,
        });
        if let Some((t, offset)) = o.ack {
            for (i, v) in o.values.iter().enumerate() {
                acks_at
                    .entry((o.partition, offset + i as i64))
                    .or_default()
                    .push(marks.len());
                ack_mark.insert(v.as_str(), marks.len());
                ack_partition.insert(v.as_str(), o.partition);
            }
            marks.push(Mark {
                lane,
                t,
                t2: None,
                class: "ack".into(),
                detail: format!(
                    "ack {first}..: partition {} offsets {offset}..={} at {t} ms",
                    o.partition,
                    offset + o.values.len() as i64 - 1
                ),
                witness: None,
            });
        } else if let Some((t, error)) = &o.failed {
            marks.push(Mark {
                lane,
                t: *t,
                t2: None,
                class: "fail".into(),
                detail: format!("failed {first}..: {error} at {t} ms"),
                witness: None,
            });
        }
    }

    // Violations and their witnesses.
    let f = &outcome.findings;
    let mut violations: Vec<Violation> = Vec::new();
    let mut links: std::collections::BTreeSet<(usize, usize)> = Default::default();
    let witness = |marks: &mut Vec<Mark>, index: usize, v: usize, why: &str| {
        let m = &mut marks[index];
        if m.witness.is_none() {
            m.witness = Some(v);
            m.class.push_str(" violation");
            let _ = write!(m.detail, " — {why}");
        }
    };
    let mut fault_marks: BTreeMap<(u64, u32), usize> = BTreeMap::new();
    for (i, m) in marks.iter().enumerate() {
        if let (Lane::Broker(n), true) = (&m.lane, m.class.starts_with("fault")) {
            fault_marks.insert((m.t, *n), i);
        }
    }
    if !f.lost.is_empty() {
        let v = violations.len();
        let mut first_ms = u64::MAX;
        for value in &f.lost {
            if let Some(&index) = ack_mark.get(value.as_str()) {
                let at = marks[index].t;
                first_ms = first_ms.min(at);
                witness(
                    &mut marks,
                    index,
                    v,
                    "LOST: acknowledged, missing at the end",
                );
                // The suspect: the first fault still on at the acknowledgement or after it (an
                // answer in flight can arrive just after the power went out), preferring one
                // aimed at the leader of the write's partition (a replicated run).
                let partition = ack_partition.get(value.as_str()).copied();
                let after = |f: &&(u64, u64, u32, FaultKind, Option<i32>)| f.0 + f.1 >= at;
                let suspect = faults
                    .iter()
                    .filter(after)
                    .find(|f| partition.is_some() && f.4 == partition)
                    .or_else(|| faults.iter().find(after));
                if let Some(&(ft, _, node, _, _)) = suspect {
                    if let Some(&fi) = fault_marks.get(&(ft, node)) {
                        witness(
                            &mut marks,
                            fi,
                            v,
                            "the first fault at or after a lost write's ack",
                        );
                        links.insert((index, fi));
                    }
                }
            }
        }
        violations.push(Violation {
            text: format!(
                "{} lost acknowledged writes, e.g. {}",
                f.lost.len(),
                f.lost[0]
            ),
            at_ms: if first_ms == u64::MAX { 0 } else { first_ms },
        });
    }
    for (p, o, values) in f.inconsistent.iter().take(50) {
        let v = violations.len();
        let mut at_ms = u64::MAX;
        let mut seen: Vec<usize> = acks_at.get(&(*p, *o)).cloned().unwrap_or_default();
        seen.extend(
            reads_at
                .get(&(*p, *o))
                .into_iter()
                .flatten()
                .map(|(i, _)| *i),
        );
        for &i in &seen {
            at_ms = at_ms.min(marks[i].t);
            witness(
                &mut marks,
                i,
                v,
                &format!("offset {o} of partition {p} seen holding {values:?}"),
            );
        }
        for pair in seen.windows(2) {
            links.insert((pair[0], pair[1]));
        }
        violations.push(Violation {
            text: format!("inconsistent: partition {p} offset {o} held {values:?}"),
            at_ms: if at_ms == u64::MAX { 0 } else { at_ms },
        });
    }
    let located = |text: &str| -> Option<(i32, i64)> {
        Some((
            number_after(text, "partition")? as i32,
            number_after(text, "offset")?,
        ))
    };
    for (what, list) in [
        ("committed read taken back", &f.lost_reads),
        ("served past the high watermark", &f.uncommitted),
        ("non-monotonic read", &f.nonmonotonic),
    ] {
        for text in list.iter().take(50) {
            let v = violations.len();
            let mut at_ms = 0;
            if let Some(at) = located(text) {
                for &(i, _) in reads_at.get(&at).into_iter().flatten() {
                    at_ms = marks[i].t;
                    witness(&mut marks, i, v, what);
                }
            }
            violations.push(Violation {
                text: format!("{what}: {text}"),
                at_ms,
            });
        }
    }
    for (what, list) in [
        ("duplicated", &f.duplicated),
        ("out of order", &f.misordered),
    ] {
        for text in list.iter().take(50) {
            let v = violations.len();
            let value = text.split('"').nth(1).unwrap_or(text);
            let mut at_ms = 0;
            if let Some(&i) = ack_mark.get(value) {
                at_ms = marks[i].t;
                witness(&mut marks, i, v, what);
            }
            violations.push(Violation {
                text: format!("{what}: {text}"),
                at_ms,
            });
        }
    }
    let corrupt: Vec<usize> = (0..marks.len())
        .filter(|&i| marks[i].class == "corrupt")
        .collect();
    for text in f.corrupt.iter().take(50) {
        let v = violations.len();
        violations.push(Violation {
            text: format!("corrupt: {text}"),
            at_ms: corrupt.first().map_or(end_ms, |&i| marks[i].t),
        });
        for &i in &corrupt {
            witness(&mut marks, i, v, "corrupt");
        }
    }
    for text in f
        .metadata
        .iter()
        .chain(f.liveness.iter())
        .chain(outcome.panic.iter())
    {
        let v = violations.len();
        violations.push(Violation {
            text: text.clone(),
            at_ms: end_ms,
        });
        marks.push(Mark {
            lane: Lane::Run,
            t: end_ms,
            t2: None,
            class: "note".into(),
            detail: text.clone(),
            witness: None,
        });
        let last = marks.len() - 1;
        witness(&mut marks, last, v, "seen at the end");
    }

    // Layout.
    let lanes: Vec<Lane> = lanes.into_iter().collect();
    let row: BTreeMap<&Lane, usize> = lanes.iter().enumerate().map(|(i, l)| (l, i)).collect();
    let y = |lane: &Lane| TOP + row[lane] as f64 * LANE + LANE / 2.0;
    let height = TOP * 2.0 + lanes.len() as f64 * LANE;
    let mut svg = String::new();
    for (i, _) in lanes.iter().enumerate() {
        let _ = write!(
            svg,
            r#"<rect class="lane{}" x="0" y="{}" width="{end_ms}" height="{LANE}"/>"#,
            i % 2,
            TOP + i as f64 * LANE
        );
    }
    // Violating marks last, so that they are drawn on top.
    let mut order: Vec<usize> = (0..marks.len()).collect();
    order.sort_by_key(|&i| (marks[i].witness.is_some(), marks[i].t));
    for i in order {
        let m = &marks[i];
        let cy = y(&m.lane);
        let w = m
            .witness
            .map_or(String::new(), |v| format!(r#" data-v="{v}""#));
        match m.t2 {
            Some(t2) if m.class.starts_with("fault") => {
                let _ = write!(
                    svg,
                    r#"<rect class="{}" x="{}" y="{}" width="{}" height="{}" data-d="{}"{w}/>"#,
                    m.class,
                    m.t,
                    cy - LANE * 0.4,
                    t2 - m.t,
                    LANE * 0.8,
                    esc(&m.detail)
                );
            }
            Some(t2) => {
                let _ = write!(
                    svg,
                    r#"<line class="{}" x1="{}" x2="{t2}" y1="{cy}" y2="{cy}" data-d="{}"{w}/>"#,
                    m.class,
                    m.t,
                    esc(&m.detail)
                );
            }
            None => {
                let h = if m.witness.is_some() { 0.5 } else { 0.3 };
                let _ = write!(
                    svg,
                    r#"<line class="{}" x1="{}" x2="{}" y1="{}" y2="{}" data-d="{}"{w}/>"#,
                    m.class,
                    m.t,
                    m.t,
                    cy - LANE * h,
                    cy + LANE * h,
                    esc(&m.detail)
                );
            }
        }
    }
    for (a, b) in links.iter().take(200) {
        let (ma, mb) = (&marks[*a], &marks[*b]);
        let _ = write!(
            svg,
            r#"<line class="link" x1="{}" y1="{}" x2="{}" y2="{}"/>"#,
            ma.t,
            y(&ma.lane),
            mb.t,
            y(&mb.lane)
        );
    }
    let mut labels = String::new();
    for (i, lane) in lanes.iter().enumerate() {
        let _ = write!(
            labels,
            r#"<text x="4" y="{}">{}</text>"#,
            TOP + i as f64 * LANE + LANE / 2.0 + 4.0,
            esc(&lane.label())
        );
    }
    let mut list = String::new();
    for (i, v) in violations.iter().enumerate() {
        let _ = write!(
            list,
            r#"<li class="vitem" data-v="{i}" data-t="{}">{}</li>"#,
            v.at_ms,
            esc(&v.text)
        );
    }
    let verdict = if outcome.passed { "PASS" } else { "FAIL" };
    let title = format!(
        "{verdict} {} seed {} — trace {:016x}",
        outcome.scenario, outcome.seed, outcome.trace_hash
    );
    let replay = crate::report::replay_command(scenario_path, outcome.seed, outcome.swarm);
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>{STYLE}</style></head>
<body>
<h1>{title}</h1>
<p class="sub">{} simulated s; {} writes invoked, {} acknowledged, {} failed; {} reads; {} faults. Replay: <code>{}</code></p>
<ol id="violations">{list}</ol>
<div class="tools"><button id="zin">zoom in</button><button id="zout">zoom out</button><button id="zreset">whole run</button>
<span class="legend"><i class="c-ack"></i>ack <i class="c-fail"></i>failed <i class="c-read"></i>read <i class="c-fault"></i>fault <i class="c-heal"></i>heal <i class="c-v"></i>violation</span></div>
<div id="chart"><svg id="labels" width="130" height="{height}">{labels}</svg><div id="pane"><svg id="plot" viewBox="0 0 {end_ms} {height}" preserveAspectRatio="none" height="{height}">{svg}</svg><svg id="axis" height="22"></svg></div></div>
<div id="tip"></div>
<script>{SCRIPT}</script>
</body></html>
"#,
        outcome.simulated_secs,
        f.invoked,
        f.acked,
        f.failed,
        f.reads,
        outcome.faults,
        esc(&replay)
    );
    out
}

const STYLE: &str = r#"
body{font:13px system-ui,sans-serif;margin:12px;color:#222}
h1{font-size:16px;margin:0 0 4px}
.sub{color:#555;margin:0 0 8px}
#violations{max-height:160px;overflow:auto;margin:4px 0;padding-left:22px}
.vitem{color:#b00;cursor:pointer}.vitem:hover{text-decoration:underline}
.tools button{margin-right:4px}
.legend i{display:inline-block;width:10px;height:10px;margin:0 3px 0 10px;vertical-align:middle}
.c-ack{background:#2a8a3a}.c-fail{background:#d4462a}.c-read{background:#3566c8}
.c-fault{background:#f0a030}.c-heal{background:#7bc67b}.c-v{background:#e00}
#chart{display:flex;border:1px solid #ccc;margin-top:6px}
#labels text{font-size:11px;fill:#333}
#pane{flex:1;overflow:hidden;cursor:grab}
#plot,#axis{width:100%;display:block}
#axis text{font-size:10px;fill:#555}
.lane0{fill:#fafafa}.lane1{fill:#f0f0f4}
line{vector-effect:non-scaling-stroke;stroke-width:1}
rect.fault{fill:#f0a030;opacity:.55}
rect.k-power_loss{fill:#c0392b}rect.k-kill{fill:#8e44ad}
rect.k-isolate,rect.k-isolate_out,rect.k-split{fill:#2c7fb8}
rect.k-pause{fill:#7f8c8d}rect.k-disk_eio,rect.k-sync_eio,rect.k-disk_full{fill:#d35400}
.span{stroke:#9fc6a6}.span.failed{stroke:#e8a090}
.ack{stroke:#2a8a3a}.fail{stroke:#d4462a;stroke-width:2}.inv{stroke:#999}
.read{stroke:#3566c8}.reset{stroke:#e67e22;stroke-width:2}.corrupt{stroke:#e00;stroke-width:2}
.fnote{stroke:#c0392b}.heal{stroke:#3a9a4a}.note{stroke:#777}.lead{stroke:#6a3d9a}.isr{stroke:#1f78b4}.trunc{stroke:#e67e22}
.violation{stroke:#e00!important;stroke-width:3!important}
rect.violation{fill:#e00!important;opacity:.8;stroke:#600}
.link{stroke:#e00;stroke-dasharray:4 3;opacity:.7}
.hi{stroke:#000!important;stroke-width:4!important}
#tip{position:fixed;pointer-events:none;background:#222;color:#fff;padding:4px 6px;border-radius:3px;font-size:12px;max-width:520px;display:none}
"#;

const SCRIPT: &str = r##"
window.onerror=function(m){document.body.dataset.jsError=String(m)};
(function(){
var plot=document.getElementById('plot'),axis=document.getElementById('axis'),tip=document.getElementById('tip');
var vb=plot.viewBox.baseVal,full=vb.width,h=vb.height,t0=0,w=full;
function show(){vb.x=t0;vb.width=w;drawAxis()}
function clamp(){w=Math.max(20,Math.min(full,w));t0=Math.max(0,Math.min(full-w,t0))}
function zoom(f,at){var c=at===undefined?t0+w/2:at;var k=(c-t0)/w;w=w*f;t0=c-k*w;clamp();show()}
function drawAxis(){var pw=axis.clientWidth||800,s='';var step=Math.pow(10,Math.floor(Math.log10(w/6)));
 if(w/step>12)step*=2;if(w/step>12)step*=2.5;
 for(var t=Math.ceil(t0/step)*step;t<=t0+w;t+=step){var x=(t-t0)/w*pw;
  s+='<line x1="'+x+'" x2="'+x+'" y1="0" y2="6" stroke="#555"/><text x="'+(x+2)+'" y="16">'+(t>=1000?(t/1000).toFixed(step<1000?1:0)+' s':Math.round(t)+' ms')+'</text>'}
 axis.innerHTML=s}
function toT(ev){var r=plot.getBoundingClientRect();return t0+(ev.clientX-r.left)/r.width*w}
plot.addEventListener('wheel',function(ev){ev.preventDefault();zoom(ev.deltaY<0?0.8:1.25,toT(ev))},{passive:false});
var drag=null;
plot.addEventListener('mousedown',function(ev){drag={x:ev.clientX,t:t0}});
window.addEventListener('mouseup',function(){drag=null});
window.addEventListener('mousemove',function(ev){
 if(drag){var r=plot.getBoundingClientRect();t0=drag.t-(ev.clientX-drag.x)/r.width*w;clamp();show()}
 var d=ev.target&&ev.target.getAttribute&&ev.target.getAttribute('data-d');
 if(d){tip.textContent=d;tip.style.display='block';tip.style.left=(ev.clientX+12)+'px';tip.style.top=(ev.clientY+12)+'px'}
 else tip.style.display='none'});
plot.addEventListener('dblclick',function(){t0=0;w=full;show()});
document.getElementById('zin').onclick=function(){zoom(0.5)};
document.getElementById('zout').onclick=function(){zoom(2)};
document.getElementById('zreset').onclick=function(){t0=0;w=full;show()};
var items=document.querySelectorAll('.vitem');
for(var i=0;i<items.length;i++){items[i].onclick=function(){
 var v=this.getAttribute('data-v'),t=+this.getAttribute('data-t');
 var old=plot.querySelectorAll('.hi');for(var j=0;j<old.length;j++)old[j].classList.remove('hi');
 var ms=plot.querySelectorAll('[data-v="'+v+'"]');for(var j=0;j<ms.length;j++)ms[j].classList.add('hi');
 w=Math.min(full,4000);t0=t-w/2;clamp();show()}}
// `page.html#from-to` (ms) opens zoomed in on that window.
var m=/^#(\d+)-(\d+)$/.exec(location.hash);
if(m&&+m[2]>+m[1]){t0=+m[1];w=+m[2]-t0;clamp()}
show();
document.body.dataset.violations=String(plot.querySelectorAll('.violation').length);
document.body.dataset.ready='1';
})();
"##;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::Findings;
    use crate::history::Entry;
    use crate::scenario::TimedFault;

    fn entry(at_ms: u64, event: Event) -> Entry {
        Entry { at_ms, event }
    }

    #[test]
    fn a_lost_write_is_drawn_with_its_ack_and_the_fault_after_it() {
        let history = vec![
            entry(
                10,
                Event::Invoke {
                    op: 3,
                    partition: 0,
                    session: 1,
                    values: vec!["p0-3-0".into()],
                },
            ),
            entry(20, Event::Ack { op: 3, offset: 7 }),
            entry(
                30,
                Event::Read {
                    consumer: 0,
                    partition: 0,
                    offset: 7,
                    value: "p0-3-0".into(),
                    high_watermark: 8,
                },
            ),
            entry(
                500,
                Event::Scheduled(TimedFault {
                    at_ms: 500,
                    fault: FaultKind::PowerLoss,
                    node: 0,
                    duration_ms: Some(200),
                    partition: None,
                    stream: None,
                }),
            ),
            entry(500, Event::Fault("power loss broker-0".into())),
            entry(700, Event::Heal("restart broker-0 after 200 ms".into())),
        ];
        let outcome = RunOutcome {
            history,
            scenario: "s".into(),
            seed: 1,
            passed: false,
            violations: vec!["1 lost acknowledged writes".into()],
            findings: Findings {
                lost: vec!["p0-3-0".into()],
                lost_reads: vec![
                    "partition 0 offset 7: read \"p0-3-0\" (high watermark 8), final read has nothing"
                        .into(),
                ],
                ..Findings::default()
            },
            trace_hash: 1,
            events: 6,
            faults: 1,
            simulated_secs: 1.0,
            wall_secs: 0.0,
            cpu_secs: None,
            panic: None,
            injected: Vec::new(),
            evidence_ms: Some(20),
            swarm: false,
        };
        let html = page(&outcome, 1, "s.toml");
        // The ack (offset 7), the power loss after it and the read are marked, and linked.
        assert!(html.contains(r#"class="ack violation""#), "{html}");
        assert!(html.contains("offsets 7..=7"));
        assert!(html.contains(r#"class="fault k-power_loss violation""#));
        assert!(html.contains(r#"class="read violation""#));
        assert!(html.contains(r#"class="link""#));
        assert!(
            html.contains("broker-0") && html.contains("producer-0") && html.contains("consumer-0")
        );
        assert_eq!(html.matches(r#"class="vitem""#).count(), 2);
        // Self-contained: nothing is fetched.
        assert!(!html.contains("http://") && !html.contains("https://") && !html.contains(" src="));
    }

    #[test]
    fn numbers_are_found_in_checker_messages() {
        let text = "consumer 2 partition 5: read offset 17 after 12";
        assert_eq!(number_after(text, "partition"), Some(5));
        assert_eq!(number_after(text, "offset"), Some(17));
        assert_eq!(broker_named("restart broker-12 after 3 ms"), Some(12));
        assert_eq!(broker_named("heal split"), None);
    }
}
