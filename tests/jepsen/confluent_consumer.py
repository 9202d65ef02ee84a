"""confluent-kafka (librdkafka) consumers for the real-process fault suite (docs/JEPSEN.md).

Two modes, each writing the simulator's history lines (sim/src/history_file.rs):

- `assign`: one consumer that assign()s every partition from offset 0 and reads them end to
  end: a `read` line per record (the lost-read, monotonic and inconsistent checks). Kafka
  serves a read_uncommitted consumer only records below the high watermark, and librdkafka
  has no per-response high watermark to give, so each record is logged with `offset + 1`:
  every read counts as committed (lost-read applies to each; `uncommitted` says nothing here).
  A position librdkafka moved backwards (an offset-out-of-range reset) is logged as `reset`.
- `group`: `--members` consumers of one group (`group.protocol` classic, eager range
  assignor, or consumer: KIP-848), each in its own thread, committing synchronously after
  processing each polled batch (and, classic, before giving partitions up): `group` lines
  with the events of sim/src/group_check.rs (assigned/owns, read, commit and its outcome,
  final), so the group checks (offsets never go backwards, every record processed, ownership,
  settle) judge them. The generation (classic) or member epoch (KIP-848) comes from librdkafka's
  consumer group metadata.

Both run until the run's deadline, then until the runner creates `--stop` (the faults have
healed and the producers are done), then drain: read until every partition's position is at
its high watermark and (group) the group's members together cover the topic, bounded by
`--drain-secs`; then a `final` line per member and exit. Times: ms since the run's origin.
"""

import argparse
import json
import os
import struct
import threading
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["assign", "group"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partitions", type=int, required=True)
    ap.add_argument("--id", type=int, required=True,
                    help="assign: its consumer id; group: its group id in the history")
    ap.add_argument("--protocol", default="classic", choices=["classic", "consumer"])
    ap.add_argument("--members", type=int, default=2)
    ap.add_argument("--origin-ms", type=int, required=True)
    ap.add_argument("--until-ms", type=int, required=True)
    ap.add_argument("--stop", required=True, help="created by the runner: drain and stop")
    ap.add_argument("--drain-secs", type=float, default=40)
    ap.add_argument("--out", required=True)
    return ap.parse_args()


class Log:
    """History lines, one JSON object a line, from any thread."""

    def __init__(self, path, origin_ms):
        self.out = open(path, "w", buffering=1)
        self.origin_ms = origin_ms
        self.lock = threading.Lock()

    def now(self):
        return max(0, int(time.time() * 1000) - self.origin_ms)

    def line(self, **fields):
        fields.setdefault("at_ms", self.now())
        with self.lock:
            self.out.write(json.dumps(fields) + "\n")

    def group(self, **event):
        self.line(type="group", event=event)


def generation(consumer):
    """The generation (classic) or member epoch (KIP-848) librdkafka holds: the consumer group
    metadata it serializes as b"CGMDv2:" + int32 (native order) + ..."""
    try:
        m = consumer.consumer_group_metadata()
        if isinstance(m, bytes) and m.startswith(b"CGMDv2:") and len(m) >= 11:
            return struct.unpack("=i", m[7:11])[0]
    except Exception:  # noqa: BLE001 - an opaque object in another version: unknown
        pass
    return -1


def high_watermarks(consumer, topic, partitions):
    out = {}
    for p in range(partitions):
        try:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=3)
            out[p] = high
        except KafkaException:
            return None
    return out


def run_assign(a, log):
    c = Consumer({
        "bootstrap.servers": a.bootstrap,
        "group.id": f"jepsen-assign-{a.id}",  # needed by librdkafka; nothing is committed
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "socket.timeout.ms": 5000,
        "topic.metadata.refresh.interval.ms": 2000,
    })
    c.assign([TopicPartition(a.topic, p, 0) for p in range(a.partitions)])
    nxt = {}
    draining = None
    ends = None
    reads = 0
    while reads < 5_000_000:
        if draining is None and log.now() >= a.until_ms and os.path.exists(a.stop):
            draining = time.time()
        if draining is not None:
            if time.time() - draining > a.drain_secs:
                log.line(type="note", what=f"assign consumer {a.id}: drain bound reached")
                break
            if ends is None:
                ends = high_watermarks(c, a.topic, a.partitions)
            if ends is not None and all(nxt.get(p, 0) >= h for p, h in ends.items()):
                break
        for m in c.consume(500, timeout=0.2):
            if m.error():
                continue
            p, o = m.partition(), m.offset()
            if p in nxt and o < nxt[p]:
                log.line(type="reset", consumer=a.id, partition=p, to=o, **{"from": nxt[p]})
            nxt[p] = o + 1
            reads += 1
            log.line(type="read", consumer=a.id, partition=p, offset=o,
                     value=(m.value() or b"").decode(errors="replace"), high_watermark=o + 1)
    c.close()


class Member(threading.Thread):
    def __init__(self, a, log, index, shared):
        super().__init__(daemon=True)
        self.a, self.log, self.index, self.shared = a, log, index, shared
        self.name_ = f"m{index}"
        self.processed = {}  # partition -> next offset to process, since the last commit
        self.position = {}  # partition -> the next offset it expects to read
        self.commits = 0
        self.done = False

    def gen(self):
        return generation(self.c)

    def owns(self):
        """KIP-848: what it believes it owns now, at its epoch."""
        parts = sorted(tp.partition for tp in self.c.assignment())
        self.log.group(kind="owns", group=self.a.id, member=self.name_,
                       member_id=self.c.memberid() or "", epoch=self.gen(), partitions=parts)

    def commit(self, only=None):
        offsets = [(p, o) for p, o in sorted(self.processed.items())
                   if only is None or p in only]
        if not offsets:
            return
        self.commits += 1
        op = (self.a.id << 40) | (self.index << 32) | self.commits
        self.log.group(kind="commit", op=op, group=self.a.id, member=self.name_,
                       generation=self.gen(), offsets=offsets)
        try:
            res = self.c.commit(offsets=[TopicPartition(self.a.topic, p, o) for p, o in offsets],
                                asynchronous=False)
            bad = [f"{tp.partition}: {tp.error}" for tp in (res or []) if tp.error]
            if bad:
                self.log.group(kind="commit_fail", op=op, error="; ".join(bad))
            else:
                self.log.group(kind="commit_ack", op=op)
        except KafkaException as e:
            self.log.group(kind="commit_fail", op=op, error=str(e))
        for p, _ in offsets:
            self.processed.pop(p, None)

    def on_assign(self, c, parts):
        if self.a.protocol == "classic":
            self.log.group(kind="assigned", group=self.a.id, member=self.name_,
                           member_id=c.memberid() or "", generation=self.gen(),
                           partitions=sorted(tp.partition for tp in parts))
        else:
            c.incremental_assign(parts)
            self.owns()

    def on_revoke(self, c, parts):
        # Commit what was processed of them before they go (at least once, no gap).
        self.commit({tp.partition for tp in parts})
        if self.a.protocol == "consumer":
            c.incremental_unassign(parts)
            self.owns()

    def on_lost(self, c, parts):
        self.processed.clear()
        if self.a.protocol == "consumer":
            c.incremental_unassign(parts)
            self.owns()

    def run(self):
        a = self.a
        conf = {
            "bootstrap.servers": a.bootstrap,
            "group.id": f"jepsen-{a.protocol}-{a.id}",
            "group.protocol": a.protocol,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "socket.timeout.ms": 5000,
            "topic.metadata.refresh.interval.ms": 2000,
        }
        if os.environ.get("JEPSEN_RDKAFKA_DEBUG"):
            conf["debug"] = os.environ["JEPSEN_RDKAFKA_DEBUG"]  # e.g. cgrp,fetch (to stderr)
        if a.protocol == "classic":
            conf.update({
                "partition.assignment.strategy": "range",
                "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 1000,
            })
        self.c = Consumer(conf)
        self.c.subscribe([a.topic], on_assign=self.on_assign, on_revoke=self.on_revoke,
                         on_lost=self.on_lost)
        n = 0
        while n < 5_000_000 and not self.shared["stop"]:
            for m in self.c.consume(200, timeout=0.2):
                if m.error():
                    continue
                p, o = m.partition(), m.offset()
                last = self.position.get(p)
                if last is not None and o < last:
                    # librdkafka moved its position back (an offset reset after a committed
                    # offset fetch or an out-of-range answer): the evidence for what follows.
                    self.log.line(type="note", what=(
                        f"group {a.id} {self.name_}: librdkafka moved partition {p} back from "
                        f"{last} to {o} (epoch {self.gen()})"))
                self.position[p] = o + 1
                self.log.group(kind="read", group=a.id, member=self.name_,
                               generation=self.gen(), partition=p, offset=o,
                               value=(m.value() or b"").decode(errors="replace"))
                self.processed[p] = o + 1
                with self.shared["lock"]:
                    pos = self.shared["pos"]
                    pos[p] = max(pos.get(p, 0), o + 1)
                n += 1
            self.commit()
            with self.shared["lock"]:
                self.shared["owned"][self.index] = {tp.partition for tp in self.c.assignment()}
        self.commit()
        g = self.gen()
        self.log.group(kind="final", group=a.id, member=self.name_,
                       generation=g if g > 0 else None,
                       partitions=sorted(tp.partition for tp in self.c.assignment()))
        self.done = True

    def close(self):
        self.c.close()


def start_at_zero(a, log):
    """Commits offset 0 for every partition before any member joins, so that members start
    from a committed offset rather than a logical BEGINNING query. librdkafka 2.16 keeps that
    query's state: a ListOffsets retried across a leader move left a partition in offset-wait,
    and the next leader move re-ran the query for BEGINNING, moving an active member's
    position back to 0 (no rebalance, no broker error; seen as committed offsets going
    backwards in replication-3-kills seeds 1 and 4, with JEPSEN_RDKAFKA_DEBUG=fetch logs)."""
    c = Consumer({"bootstrap.servers": a.bootstrap, "group.id": f"jepsen-{a.protocol}-{a.id}",
                  "enable.auto.commit": False})
    started = time.time()
    while time.time() - started < 30:
        try:
            c.commit(offsets=[TopicPartition(a.topic, p, 0) for p in range(a.partitions)],
                     asynchronous=False)
            break
        except KafkaException as e:
            log.line(type="note", what=f"group {a.id}: committing the start offsets: {e}")
            time.sleep(0.5)
    c.close()


def run_group(a, log):
    start_at_zero(a, log)
    shared = {"stop": False, "lock": threading.Lock(), "pos": {}, "owned": {}}
    members = [Member(a, log, i, shared) for i in range(a.members)]
    for m in members:
        m.start()
    probe = Consumer({"bootstrap.servers": a.bootstrap, "group.id": f"jepsen-probe-{a.id}"})
    draining = None
    ends = None
    while True:
        time.sleep(0.2)
        if draining is None and log.now() >= a.until_ms and os.path.exists(a.stop):
            draining = time.time()
        if draining is None:
            continue
        if time.time() - draining > a.drain_secs:
            log.line(type="note", what=f"group {a.id}: drain bound reached")
            break
        if ends is None:
            ends = high_watermarks(probe, a.topic, a.partitions)
            continue
        with shared["lock"]:
            caught_up = all(shared["pos"].get(p, 0) >= h for p, h in ends.items() if h > 0)
            owned = [shared["owned"].get(i, set()) for i in range(a.members)]
        covered = set().union(*owned) == set(range(a.partitions)) and \
            sum(len(o) for o in owned) == a.partitions
        if caught_up and covered:
            break
    # Every member stops polling first, then reports what it holds, then they leave together
    # (a member leaving earlier would start a rebalance the others report half-way).
    shared["stop"] = True
    for m in members:
        m.join(30)
    for m in members:
        m.close()
    probe.close()


def main():
    a = parse()
    log = Log(a.out, a.origin_ms)
    if a.mode == "assign":
        run_assign(a, log)
    else:
        run_group(a, log)
    log.out.close()


if __name__ == "__main__":
    main()
