"""End-to-end: the Prometheus endpoint (`weir.metrics.address`) of a running 3-node cluster.

Three `weir serve` processes (each broker + controller) expose `/metrics`. The test scrapes
every node and checks that the values move as the workload does: one active controller in
the cluster; bytes and messages in per topic grow after producing (exactly the records sent,
counted on the leaders); request counts and time histograms per API grow; bytes out grow
after consuming and the group shows up with its committed offsets; killing a node raises
under-replicated partitions (ISR shrinks) on the surviving leaders and the fenced-broker
count; restarting it brings under-replicated back to 0.

The cluster runs with short replica-lag and session timeouts so each phase takes seconds.
Every wait is bounded by a deadline; every server listens on 127.0.0.1 only.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from test_cluster import formatted_nodes, start_all, stop_all, wait_for

NODES = 3
TOPIC = "metrics-e2e"
PARTITIONS = 3
RECORDS = 300
TIMEOUT_S = 60.0

# Appended to test_cluster's per-node config.
EXTRA = """\
weir.metrics.address=127.0.0.1:{metrics}
replica.lag.time.max.ms=1500
broker.heartbeat.interval.ms=500
broker.session.timeout.ms=6000
group.initial.rebalance.delay.ms=0
"""

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def scrape(port: int) -> dict[tuple[str, frozenset], float]:
    """GET /metrics, parsed into {(name, labels): value}."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, f"not a Prometheus sample line: {line!r}"
        labels = frozenset(LABEL.findall(m.group(3) or ""))
        samples[(m.group(1), labels)] = float(m.group(4))
    return samples


def value(samples, name: str, **labels) -> float:
    """One series' value (0 when absent: a counter not yet created)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(nodes, name: str, **labels) -> float:
    """The sum over nodes of one series (leaders count their own partitions)."""
    return sum(value(scrape(n.metrics), name, **labels) for n in nodes)


def maximum(nodes, name: str, **labels) -> float:
    """The max over nodes (controller gauges: every node computes them from the image)."""
    return max(value(scrape(n.metrics), name, **labels) for n in nodes)


@pytest.fixture
def cluster(tmp_path):
    def with_metrics(n):
        n.metrics = n.extra_ports[0]
        with open(n.config, "a") as f:
            f.write(EXTRA.format(metrics=n.metrics))

    nodes = formatted_nodes(tmp_path, NODES, extra_ports=1, configure=with_metrics)
    try:
        start_all(nodes)
        yield nodes
    finally:
        stop_all(nodes)


def test_metrics_move_with_the_workload(cluster):
    nodes = cluster
    bootstrap = ",".join(f"127.0.0.1:{n.client}" for n in nodes)

    # The endpoint answers only GET /metrics.
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"http://127.0.0.1:{nodes[0].metrics}/nope", timeout=5)
    assert missing.value.code == 404

    # One active controller in the cluster; every node sees three unfenced brokers.
    wait_for("one active controller", TIMEOUT_S, lambda: total(
        nodes, "kafka_controller_kafkacontroller_activecontrollercount") == 1)
    wait_for("three active brokers", TIMEOUT_S, lambda: all(
        value(scrape(n.metrics), "kafka_controller_kafkacontroller_activebrokercount") == 3
        for n in nodes))
    assert total(nodes, "kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC) == 0

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=3)],
                        request_timeout=10)[TOPIC].result(timeout=15)
    wait_for("every partition led and fully replicated", TIMEOUT_S, lambda: (
        total(nodes, "kafka_server_replicamanager_leadercount") == PARTITIONS
        and maximum(nodes, "kafka_controller_kafkacontroller_globalpartitioncount") == PARTITIONS
        and total(nodes, "kafka_server_replicamanager_partitioncount") == 3 * PARTITIONS
        and total(nodes, "kafka_server_replicamanager_underreplicatedpartitions") == 0))
    produce_before = total(nodes, "kafka_network_requestmetrics_requests_total",
                           request="Produce", version="9") + total(
        nodes, "kafka_network_requestmetrics_totaltimems_count", request="Produce")

    # Produce: bytes and messages in grow on the leaders, exactly by what was sent.
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    payload = b"x" * 100
    for i in range(RECORDS):
        producer.produce(TOPIC, value=payload, key=str(i).encode())
    assert producer.flush(30) == 0
    messages = total(nodes, "kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC)
    assert messages == RECORDS, messages
    bytes_in = total(nodes, "kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC)
    assert bytes_in >= RECORDS * len(payload), bytes_in
    assert total(nodes, "kafka_server_brokertopicmetrics_bytesin_total") >= bytes_in
    assert total(nodes, "kafka_network_requestmetrics_totaltimems_count",
                 request="Produce") > produce_before
    # acks=all waits for the followers: that wait is remote time.
    assert total(nodes, "kafka_network_requestmetrics_remotetimems_count", request="Produce") > 0
    assert total(nodes, "kafka_network_requestmetrics_totaltimems_count",
                 request="FetchFollower") > 0
    assert total(nodes, "kafka_server_brokertopicmetrics_replicationbytesout_total",
                 topic=TOPIC) >= bytes_in

    # Consume with a group and commit: bytes out grow, the group and its offsets appear.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "metrics-e2e-group",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    got = 0
    deadline_polls = 600
    while got < RECORDS and deadline_polls > 0:
        deadline_polls -= 1
        msg = consumer.poll(0.1)
        if msg is not None and msg.error() is None:
            got += 1
    assert got == RECORDS
    consumer.commit(asynchronous=False)
    consumer.close()
    assert total(nodes, "kafka_server_brokertopicmetrics_bytesout_total",
                 topic=TOPIC) >= bytes_in
    assert total(nodes, "kafka_network_requestmetrics_requests_total",
                 request="OffsetCommit", version="9") + total(
        nodes, "kafka_network_requestmetrics_totaltimems_count", request="OffsetCommit") > 0
    assert total(nodes, "kafka_server_groupmetadatamanager_numgroups") >= 1
    committed = sum(v for n in nodes for (name, labels), v in scrape(n.metrics).items()
                    if name == "weir_consumergroup_current_offset"
                    and ("group", "metrics-e2e-group") in labels)
    assert committed == RECORDS, committed

    # Kill a node and keep producing: the surviving leaders shrink ISRs (under-replicated > 0;
    # the replica lag bound is shorter than the session, so the leaders' shrink comes first),
    # then the controller fences it.
    victim = nodes[-1]
    survivors = nodes[:-1]
    victim.kill9()
    # A follower at the leader's log end stays in sync however long it is silent (Kafka's
    # rule too): writes after the kill leave the dead one behind.
    after = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5})
    for i in range(RECORDS):
        after.produce(TOPIC, value=payload, key=str(i).encode())
    assert after.flush(30) == 0
    wait_for("under-replicated partitions after the kill", TIMEOUT_S, lambda: total(
        survivors, "kafka_server_replicamanager_underreplicatedpartitions") > 0)
    wait_for("ISR shrinks counted by the leaders", TIMEOUT_S, lambda: total(
        survivors, "kafka_server_replicamanager_isrshrinks_total") > 0)
    wait_for("the killed broker fenced", TIMEOUT_S, lambda: maximum(
        survivors, "kafka_controller_kafkacontroller_fencedbrokercount") == 1)

    # Restart it: it catches up, rejoins the ISRs and under-replicated returns to 0.
    victim.start()
    wait_for("no under-replicated partition after the restart", TIMEOUT_S, lambda: total(
        nodes, "kafka_server_replicamanager_underreplicatedpartitions") == 0
        and maximum(nodes, "kafka_controller_kafkacontroller_fencedbrokercount") == 0)
    assert total(nodes, "kafka_server_replicamanager_isrexpands_total") > 0
