"""End-to-end: partition replication across three real `weir serve` processes.

Three combined nodes on loopback (test_cluster.py's `Node`), one RF=3 topic with
`min.insync.replicas=2`, and confluent-kafka producing with `acks=all` and
`enable.idempotence=true`, as Kafka documents the no-loss configuration:

- `kill -9` of partition leaders while producing, each restarted after the failover (3
  rounds): afterwards every acknowledged record is read back at the offset its delivery
  report gave, and no record appears twice (the idempotent producer's retries across the
  failover are deduplicated by the new leader, whose producer state came from replication).
  After each kill, produces must succeed again (two of three replicas are enough).
- With one follower down an acks=all produce still succeeds; with both followers down it must
  fail (NOT_ENOUGH_REPLICAS, or a timeout: the two dead nodes also take the metadata quorum
  with them, so the ISR cannot shrink and the high watermark cannot move), never be
  acknowledged.
- A rolling restart (SIGTERM each node in turn: controlled shutdown moves its leaderships
  first) loses no acknowledged record and fails no produce.

Broker timeouts are shortened (`broker.session.timeout.ms` 4 s, `replica.lag.time.max.ms`
5 s) so that a failover fits in the test's time; the semantics are Kafka's. Every wait is
bounded by a deadline, every load by a record count; servers listen on 127.0.0.1 only.
"""

from __future__ import annotations

import collections
import signal
import subprocess
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from test_cluster import Node, formatted_nodes, start_all

NODES = 3
PARTITIONS = 3
TOPIC_CONFIG = {"min.insync.replicas": "2"}
# Kafka's defaults are 9 s and 30 s; shorter here so that three failovers fit in one test.
EXTRA_CONFIG = """\
broker.session.timeout.ms=4000
broker.heartbeat.interval.ms=500
replica.lag.time.max.ms=5000
default.replication.factor=3
offsets.topic.replication.factor=3
"""

QUORUM_TIMEOUT_S = 30.0
REPLICATED_TIMEOUT_S = 60.0
# After a kill -9 of a partition leader: session timeout (4 s) + election + the client's
# metadata refresh. Generous for a loaded 2-core machine.
FAILOVER_TIMEOUT_S = 45.0
STOP_TIMEOUT_S = 30.0
READ_TIMEOUT_S = 60.0
FLUSH_TIMEOUT_S = 120.0
KILL_ROUNDS = 3
# Bounds on the producer: at most this many records, one every PACE_S.
MAX_RECORDS = 40_000
PACE_S = 0.002

# What an acks=all produce that cannot reach min.insync.replicas may answer: refused before
# the append, refused after it, the broker's request timeout, or the client's delivery timeout.
REFUSED = {
    KafkaError.NOT_ENOUGH_REPLICAS,
    KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError._MSG_TIMED_OUT,
    KafkaError._TIMED_OUT,
}


# -- the cluster -------------------------------------------------------------------------------

class ClusterLogs:
    """What conftest's report hook attaches to a failed test: every node's log tail."""

    def __init__(self, nodes: list[Node]):
        self.nodes = nodes

    def status(self) -> str:
        return ", ".join(f"node {n.node_id}: {node_state(n)}" for n in self.nodes)

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(f"--- node {n.node_id} ({n.log}) ---\n{n.tail(lines)}"
                         for n in self.nodes)


def node_state(n: Node) -> str:
    if n.proc is None:
        return "never started"
    rc = n.proc.poll()
    return f"running, pid {n.proc.pid}" if rc is None else f"exited {rc}"


def running(n: Node) -> bool:
    return n.proc is not None and n.proc.poll() is None


def sigterm(n: Node) -> tuple[int, float]:
    """SIGTERM (controlled shutdown) and wait, bounded; the exit code and the seconds taken."""
    assert running(n), f"node {n.node_id} is not running"
    t0 = time.monotonic()
    n.proc.send_signal(signal.SIGTERM)
    try:
        rc = n.proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        n.proc.kill()
        n.proc.wait(timeout=10)
        raise AssertionError(f"node {n.node_id} did not exit within {STOP_TIMEOUT_S:.0f} s "
                             f"of SIGTERM (killed)") from None
    return rc, time.monotonic() - t0


@pytest.fixture
def cluster(request, tmp_path):
    def configure(n):
        with open(n.config, "a") as f:
            f.write(EXTRA_CONFIG)

    nodes = formatted_nodes(tmp_path, NODES, configure=configure)
    request.node._weir_broker = ClusterLogs(nodes)
    try:
        start_all(nodes)
        yield nodes
    finally:
        for n in nodes:
            if running(n):
                n.proc.kill()
                n.proc.wait(timeout=10)


def bootstrap_of(nodes: list[Node]) -> str:
    return ",".join(f"127.0.0.1:{n.client}" for n in nodes)


def wait_for(what: str, timeout: float, probe, interval: float = 0.25):
    """`probe()` until it returns something truthy; its value. Exceptions count as not yet."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            value = probe()
            if value:
                return value
            last = value
        except Exception as e:  # the cluster may refuse while it elects; retry until deadline
            last = e
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


def partition_states(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition → (leader, replicas, isr) as the answering broker's Metadata has them."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=5)
    t = md.topics[topic]
    if t.error is not None:
        raise RuntimeError(f"metadata for {topic}: {t.error}")
    return {p.id: (p.leader, sorted(p.replicas), sorted(p.isrs)) for p in t.partitions.values()}


def registered_brokers(bootstrap: str) -> set[int]:
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5).brokers)


def create_topic(nodes: list[Node], topic: str, partitions: int) -> None:
    bootstrap = bootstrap_of(nodes)
    wait_for("all three brokers registered", QUORUM_TIMEOUT_S,
             lambda: registered_brokers(bootstrap) == {n.node_id for n in nodes})

    def create():
        admin = AdminClient({"bootstrap.servers": bootstrap})
        futures = admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                                replication_factor=NODES,
                                                config=TOPIC_CONFIG)], request_timeout=10)
        try:
            futures[topic].result(timeout=15)
        except Exception as e:
            if "TOPIC_ALREADY_EXISTS" not in str(e):
                raise
        return True

    wait_for(f"CreateTopics {topic}", QUORUM_TIMEOUT_S, create)
    wait_fully_replicated(nodes, topic, partitions)


def wait_fully_replicated(nodes: list[Node], topic: str, partitions: int,
                          timeout: float = REPLICATED_TIMEOUT_S) -> dict:
    """Every partition has a leader and all three replicas in its ISR, as every running broker
    reports it (each broker applies the metadata log on its own)."""
    everyone = sorted(n.node_id for n in nodes)

    def probe():
        states = None
        for n in nodes:
            if not running(n):
                continue
            states = partition_states(f"127.0.0.1:{n.client}", topic)
            if len(states) != partitions:
                return None
            for leader, replicas, isr in states.values():
                if leader < 0 or replicas != everyone or isr != everyone:
                    return None
        return states

    return wait_for(f"{topic}: every partition led, ISR = {everyone}", timeout, probe)


# -- producing and reading back ----------------------------------------------------------------

def producer_config(bootstrap: str, **overrides) -> dict:
    conf = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "message.timeout.ms": 90_000,
        "request.timeout.ms": 15_000,
        "retry.backoff.ms": 100,
        "retry.backoff.max.ms": 500,
        "topic.metadata.refresh.interval.ms": 2_000,
        "reconnect.backoff.max.ms": 500,
    }
    conf.update(overrides)
    return conf


class Deliveries:
    """Delivery reports: acknowledged (partition, offset, value) and failed (value, error)."""

    def __init__(self):
        self.acked: list[tuple[int, int, bytes]] = []
        self.failed: list[tuple[bytes, KafkaError]] = []
        self.per_partition: collections.Counter[int] = collections.Counter()

    def report(self, err, msg) -> None:
        if err is not None:
            self.failed.append((msg.value(), err))
        else:
            self.acked.append((msg.partition(), msg.offset(), msg.value()))
            self.per_partition[msg.partition()] += 1


class ProducerLoop(threading.Thread):
    """Produces `tag-NNNNNN` records (keys spread over the partitions), one every PACE_S,
    until stopped or MAX_RECORDS; then flushes, bounded."""

    def __init__(self, bootstrap: str, topic: str, tag: str):
        super().__init__(daemon=True)
        self.producer = Producer(producer_config(bootstrap))
        self.topic = topic
        self.tag = tag
        self.deliveries = Deliveries()
        self.stop_event = threading.Event()
        self.sent = 0
        self.unflushed = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop_event.is_set() and self.sent < MAX_RECORDS:
                value = f"{self.tag}-{self.sent:06d}".encode()
                try:
                    self.producer.produce(self.topic, key=str(self.sent).encode(), value=value,
                                          on_delivery=self.deliveries.report)
                except BufferError:  # the client's queue is full while a leader is away
                    self.producer.poll(0.05)
                    continue
                self.sent += 1
                self.producer.poll(0)
                time.sleep(PACE_S)
            self.unflushed = self.producer.flush(FLUSH_TIMEOUT_S)
        except BaseException as e:  # surfaced by finish()
            self.error = e

    def acked_count(self, partition: int | None = None) -> int:
        if partition is None:
            return len(self.deliveries.acked)
        return self.deliveries.per_partition[partition]

    def finish(self) -> Deliveries:
        self.stop_event.set()
        self.join(FLUSH_TIMEOUT_S + 10)
        assert not self.is_alive(), "the producer did not finish flushing"
        if self.error is not None:
            raise self.error
        assert self.unflushed == 0, f"{self.unflushed} records never got a delivery report"
        return self.deliveries


def wait_for_acks_after(loop: ProducerLoop, what: str, timeout: float, more: int = 50,
                        partition: int | None = None) -> float:
    """Waits until `more` further records are acknowledged (of `partition`, or of any); the
    seconds it took."""
    t0 = time.monotonic()
    base = loop.acked_count(partition)
    wait_for(what, timeout, lambda: loop.acked_count(partition) >= base + more, interval=0.05)
    return time.monotonic() - t0


def read_back(bootstrap: str, topic: str, partitions: int) -> dict[tuple[int, int], bytes]:
    """Every record of `topic`, (partition, offset) → value, from the earliest offset to the
    high watermark as the leaders report it now."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"read-back-{uuid.uuid4()}",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "check.crcs": True,
        "auto.offset.reset": "earliest",
    })
    try:
        ends = {}
        starts = []
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            ends[p] = high
            starts.append(TopicPartition(topic, p, low))
        consumer.assign(starts)
        records: dict[tuple[int, int], bytes] = {}
        done = {p for p, tp in enumerate(starts) if tp.offset >= ends[p]}
        deadline = time.monotonic() + READ_TIMEOUT_S
        while len(done) < partitions:
            assert time.monotonic() < deadline, \
                f"read back: partitions {sorted(set(range(partitions)) - done)} not read to " \
                f"their high watermarks {ends} within {READ_TIMEOUT_S:.0f} s"
            m = consumer.poll(1.0)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF:
                    if m.offset() >= ends[m.partition()]:
                        done.add(m.partition())
                    continue
                raise AssertionError(f"read back: {m.error()}")
            key = (m.partition(), m.offset())
            assert key not in records, f"offset {key} delivered twice with different values"
            records[key] = m.value()
            if m.offset() + 1 >= ends[m.partition()]:
                done.add(m.partition())
        return records
    finally:
        consumer.close()


def check_no_acknowledged_loss(deliveries: Deliveries, log: dict[tuple[int, int], bytes],
                               tag: str) -> None:
    """Every acknowledged record is in the log at its acknowledged offset; no offset was
    acknowledged twice; no record of this producer appears twice (idempotence)."""
    positions = collections.Counter((p, o) for p, o, _ in deliveries.acked)
    twice = [k for k, c in positions.items() if c > 1]
    assert not twice, f"offsets acknowledged for two records: {twice[:10]}"
    lost = [(p, o, v, log.get((p, o))) for p, o, v in deliveries.acked if log.get((p, o)) != v]
    assert not lost, (f"{len(lost)} of {len(deliveries.acked)} acknowledged records are not at "
                      f"their acknowledged offsets (partition, offset, acked, found): {lost[:10]}")
    ours = collections.Counter(v for v in log.values() if v.startswith(f"{tag}-".encode()))
    dups = [v for v, c in ours.items() if c > 1]
    assert not dups, f"{len(dups)} records appear more than once in the log: {dups[:10]}"


def leader_of(nodes: list[Node], topic: str, partition: int) -> Node:
    live = bootstrap_of([n for n in nodes if running(n)])
    leader = wait_for(f"a leader for {topic}-{partition}", FAILOVER_TIMEOUT_S,
                      lambda: max(partition_states(live, topic)[partition][0], 0))
    return next(n for n in nodes if n.node_id == leader)


# -- the tests ---------------------------------------------------------------------------------

def test_acks_all_survives_kill9_of_leaders(cluster):
    nodes = cluster
    topic = "replicated"
    create_topic(nodes, topic, PARTITIONS)
    bootstrap = bootstrap_of(nodes)
    tag = f"k9-{uuid.uuid4().hex[:8]}"
    loop = ProducerLoop(bootstrap, topic, tag)
    loop.start()
    failovers = []
    try:
        wait_for_acks_after(loop, "the first acknowledged records", FAILOVER_TIMEOUT_S, 200)
        for rnd in range(KILL_ROUNDS):
            partition = rnd % PARTITIONS
            victim = leader_of(nodes, topic, partition)
            victim.kill9()
            # Two of three replicas are min.insync.replicas: produces to the partition it led
            # must succeed again.
            failovers.append(wait_for_acks_after(
                loop, f"round {rnd}: acks of partition {partition} after kill -9 of node "
                      f"{victim.node_id}, its leader", FAILOVER_TIMEOUT_S, 50, partition))
            victim.start()
            wait_fully_replicated(nodes, topic, PARTITIONS)
            wait_for_acks_after(loop, f"round {rnd}: acks with node {victim.node_id} back",
                                FAILOVER_TIMEOUT_S, 200)
    finally:
        deliveries = loop.finish()
    print(f"kill -9 rounds: {loop.sent} sent, {len(deliveries.acked)} acked, "
          f"{len(deliveries.failed)} failed; kill → acks again: "
          + ", ".join(f"{s:.1f} s" for s in failovers))
    assert len(deliveries.acked) > 0
    wait_fully_replicated(nodes, topic, PARTITIONS)
    check_no_acknowledged_loss(deliveries, read_back(bootstrap, topic, PARTITIONS), tag)


def produce_one(bootstrap: str, topic: str, value: bytes, timeout_ms: int):
    """One acks=all idempotent produce to partition 0; its delivery report (err, partition,
    offset)."""
    producer = Producer(producer_config(bootstrap, **{"message.timeout.ms": timeout_ms,
                                                      "request.timeout.ms": min(timeout_ms, 5000),
                                                      "linger.ms": 0}))
    result = []
    producer.produce(topic, value=value, partition=0,
                     on_delivery=lambda err, msg: result.append((err, msg.partition(),
                                                                 msg.offset())))
    remaining = producer.flush(timeout_ms / 1000 + 15)
    assert remaining == 0 and len(result) == 1, "no delivery report within the message timeout"
    return result[0]


def test_acks_all_refused_with_two_of_three_replicas_down(cluster):
    nodes = cluster
    topic = "min-isr"
    create_topic(nodes, topic, 1)
    bootstrap = bootstrap_of(nodes)
    acked: list[tuple[int, int, bytes]] = []

    err, p, off = produce_one(bootstrap, topic, b"all-up", 30_000)
    assert err is None, f"acks=all with three replicas up failed: {err}"
    acked.append((p, off, b"all-up"))

    leader = leader_of(nodes, topic, 0)
    followers = [n for n in nodes if n is not leader]

    # One follower down: the ISR shrinks to two (the controller fences the dead broker after
    # broker.session.timeout.ms), which min.insync.replicas=2 allows.
    followers[0].kill9()
    live = bootstrap_of([n for n in nodes if running(n)])
    err, p, off = produce_one(live, topic, b"one-down", 60_000)
    assert err is None, f"acks=all with two of three replicas up failed: {err}"
    acked.append((p, off, b"one-down"))

    # Both followers down: the leader is alone. The produce must not be acknowledged.
    followers[1].kill9()
    only = f"127.0.0.1:{leader.client}"
    t0 = time.monotonic()
    err, p, off = produce_one(only, topic, b"two-down", 20_000)
    assert err is not None, (f"acks=all acknowledged at offset {off} with only the leader "
                             f"(node {leader.node_id}) of three replicas alive")
    assert err.code() in REFUSED, f"unexpected error with two of three down: {err}"
    print(f"two of three down: refused after {time.monotonic() - t0:.1f} s with {err}")

    # Back to three: produces succeed again and nothing acknowledged was lost.
    for n in followers:
        n.start()
    wait_fully_replicated(nodes, topic, 1)
    err, p, off = produce_one(bootstrap, topic, b"healed", 60_000)
    assert err is None, f"acks=all after the followers came back failed: {err}"
    acked.append((p, off, b"healed"))
    log = read_back(bootstrap, topic, 1)
    for p, off, v in acked:
        assert log.get((p, off)) == v, f"acknowledged {v!r} at {p}/{off}, found {log.get((p, off))!r}"


def test_rolling_restart_loses_no_acknowledged_write(cluster):
    nodes = cluster
    topic = "rolling"
    create_topic(nodes, topic, PARTITIONS)
    bootstrap = bootstrap_of(nodes)
    tag = f"roll-{uuid.uuid4().hex[:8]}"
    loop = ProducerLoop(bootstrap, topic, tag)
    loop.start()
    stops = []
    try:
        wait_for_acks_after(loop, "the first acknowledged records", FAILOVER_TIMEOUT_S, 200)
        for n in nodes:
            rc, took = sigterm(n)
            assert rc == 0, f"node {n.node_id} exited with {rc} after SIGTERM"
            stops.append(took)
            wait_for_acks_after(loop, f"acks while node {n.node_id} is stopped",
                                FAILOVER_TIMEOUT_S, 200)
            n.start()
            wait_fully_replicated(nodes, topic, PARTITIONS)
    finally:
        deliveries = loop.finish()
    print(f"rolling restart: {loop.sent} sent, {len(deliveries.acked)} acked, "
          f"{len(deliveries.failed)} failed; SIGTERM → exit: "
          + ", ".join(f"{s:.1f} s" for s in stops))
    # The producer retries (idempotently) whatever a moving leadership refused, well within its
    # delivery timeout: nothing fails.
    assert not deliveries.failed, \
        f"{len(deliveries.failed)} produces failed: {deliveries.failed[:5]}"
    check_no_acknowledged_loss(deliveries, read_back(bootstrap, topic, PARTITIONS), tag)
