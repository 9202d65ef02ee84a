"""End-to-end: add a fourth broker to a three-node cluster and move a topic onto it with
`weir reassign`, the kafka-reassign-partitions.sh workflow, under an acks=all producer.

Three combined `weir serve` nodes (broker + controller) and a topic on brokers 1, 2, 3; a
confluent-kafka producer writes with acks=all and idempotence throughout. A fourth node
(broker only) starts; `weir reassign --generate` proposes a plan over brokers 2, 3, 4;
`--execute --throttle` starts it with replication throttles; `--verify --wait` shows progress
until it completes and then clears the throttles; `--list` shows nothing in progress. No
produce fails, broker 1 no longer hosts the topic, and every acknowledged record reads back
from the new replicas.

Every wait is bounded; every server listens on 127.0.0.1 only.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import pick_free_ports, weir_binary
from test_cluster import Node, status, stop_all, wait_for

TOPIC = "moving"
PARTITIONS = 3

BROKER_ONLY = """\
process.roles=broker
node.id={node_id}
controller.quorum.voters={voters}
listeners=PLAINTEXT://127.0.0.1:{client}
advertised.listeners=PLAINTEXT://127.0.0.1:{client}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs={data}
"""

FAST = """\
broker.heartbeat.interval.ms=300
broker.session.timeout.ms=3000
replica.fetch.wait.max.ms=100
"""


def weir(binary, *args, timeout=60):
    out = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"weir {' '.join(args)}:\n{out.stdout}\n{out.stderr}"
    return out.stdout, out.stderr


@pytest.fixture
def four_nodes(tmp_path):
    binary = weir_binary()
    if not binary.exists():
        pytest.fail(f"{binary} not found: `cargo build --release` or set WEIR_BIN", pytrace=False)
    ports = pick_free_ports(7)
    voters = ",".join(f"{i + 1}@127.0.0.1:{ports[2 * i + 1]}" for i in range(3))
    nodes = [Node(binary, tmp_path, i + 1, ports[2 * i], ports[2 * i + 1], voters)
             for i in range(3)]
    fourth = Node(binary, tmp_path, 4, ports[6], 0, voters)
    fourth.config.write_text(BROKER_ONLY.format(node_id=4, voters=voters, client=ports[6],
                                                data=fourth.dir / "data"))
    for n in nodes + [fourth]:
        with open(n.config, "a") as f:
            f.write(FAST)
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    for n in nodes + [fourth]:
        n.format(cluster_id)
    try:
        for n in nodes:
            n.spawn()
        for n in nodes:
            n.wait_listening()
        yield binary, nodes, fourth
    finally:
        stop_all([fourth] + nodes)


def test_a_topic_moves_onto_an_added_broker_with_no_failed_produce(four_nodes, tmp_path):
    binary, nodes, fourth = four_nodes
    bootstrap = ",".join(f"127.0.0.1:{n.client}" for n in nodes)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=3,
                  config={"min.insync.replicas": "2"})], request_timeout=15)
    futures[TOPIC].result(timeout=20)

    acked: list[tuple[int, int, bytes]] = []
    failed: list[str] = []
    stop = threading.Event()

    def produce():
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                      "enable.idempotence": True, "linger.ms": 5})

        def delivered(err, msg):
            if err is not None:
                failed.append(str(err))
            else:
                acked.append((msg.partition(), msg.offset(), msg.value()))

        i = 0
        while not stop.is_set():
            p.produce(TOPIC, value=f"v-{i}".encode() + b"x" * 1000, on_delivery=delivered)
            p.poll(0)
            i += 1
            if i % 50 == 0:
                time.sleep(0.01)
        assert p.flush(30) == 0, "undelivered records at the end"

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        time.sleep(1.0)
        # The fourth broker joins; nothing moves by itself.
        fourth.start()
        # It listens once it has applied its own unfencing; the others apply it a moment
        # later, and `--generate` asks whichever it reaches first.
        wait_for("broker 4 unfenced in every node's metadata", 15, lambda: all(
            re.search(r"^\s+4 \S+ unfenced", status(binary, f"127.0.0.1:{n.client}")["text"],
                      re.M)
            for n in nodes))
        topics = tmp_path / "topics.json"
        topics.write_text(json.dumps({"version": 1, "topics": [{"topic": TOPIC}]}))
        out, _ = weir(binary, "reassign", "--bootstrap-server", bootstrap, "--generate",
                      "--topics-to-move-json-file", str(topics), "--broker-list", "2,3,4")
        lines = out.splitlines()
        assert lines[0] == "Current partition replica assignment", out
        current = json.loads(lines[1])
        assert all(sorted(p["replicas"]) == [1, 2, 3] for p in current["partitions"]), out
        proposed = json.loads(lines[lines.index("Proposed partition reassignment configuration") + 1])
        assert all(sorted(p["replicas"]) == [2, 3, 4] for p in proposed["partitions"]), out
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps(proposed))

        out, _ = weir(binary, "reassign", "--bootstrap-server", bootstrap, "--execute",
                      "--reassignment-json-file", str(plan), "--throttle", "50000000")
        assert "Successfully started partition reassignment" in out, out
        assert "The inter-broker throttle limit was set to 50000000 B/s" in out, out
        out, err = weir(binary, "reassign", "--bootstrap-server", bootstrap, "--verify",
                        "--wait", "--reassignment-json-file", str(plan))
        assert "partitions moved" in err, err
        for p in range(PARTITIONS):
            assert f"Reassignment of partition [{TOPIC},{p}] is completed." in out, out
        assert "Clearing broker-level throttles on brokers" in out, out
        assert f"Clearing topic-level throttles on topic {TOPIC}" in out, out
        out, _ = weir(binary, "reassign", "--bootstrap-server", bootstrap, "--list")
        assert out.strip() == "No partition reassignments found.", out
        time.sleep(0.5)
    finally:
        stop.set()
        producer.join(60)

    assert not failed, f"{len(failed)} produce(s) failed: {failed[:5]}"
    assert len(acked) > 100, "the producer made progress"
    # Broker 1 no longer hosts the topic: its partition directories are gone.
    data = nodes[0].dir / "data"
    wait_for("broker 1 to delete its replicas", 15,
             lambda: not any(d.name.startswith(f"{TOPIC}-") for d in data.iterdir()))
    # Every acknowledged record reads back; the leaders are now among 2, 3, 4.
    meta = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
    for p, pm in meta.partitions.items():
        assert sorted(pm.replicas) == [2, 3, 4] and pm.leader in (2, 3, 4), (p, pm)
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{fourth.client}",
                         "group.id": "reassign-check", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    want = {(p, o): v for p, o, v in acked}
    seen = {}
    deadline = time.monotonic() + 30
    while len(seen) < len(want) and time.monotonic() < deadline:
        for m in consumer.consume(500, timeout=1.0):
            if m.error() is None:
                seen[(m.partition(), m.offset())] = m.value()
    consumer.close()
    missing = [k for k, v in want.items() if seen.get(k) != v]
    assert not missing, f"{len(missing)} acknowledged records not read back, e.g. {missing[:5]}"
