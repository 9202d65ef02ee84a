"""End-to-end: retire a broker of a running cluster with `weir` alone, under an acks=all
producer, in KIP-1066's order (notes operations §3.5): cordon it, move its replicas away, stop
it, unregister it.

Three combined `weir serve` nodes and a broker-only node 4; a topic with a replica of every
partition on broker 4 (it leads one); a confluent-kafka producer writes with acks=all and
idempotence throughout. `weir configs --alter --add-config cordoned.log.dirs=*` cordons broker
4; `weir reassign --generate` over brokers 1..4 leaves it out of the proposal; `--execute` and
`--verify --wait` move its replicas away; it stops; `weir cluster unregister --id 4` removes
it, and Metadata and DescribeCluster no longer list it. No produce fails, and every
acknowledged record reads back.

Every wait is bounded; every server listens on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import test_reassign
from test_cluster import wait_for
from test_reassign import weir

# The reassignment test's cluster: three combined nodes and a broker-only node 4 (not started).
four_nodes = test_reassign.four_nodes

TOPIC = "retiring"
# Broker 4 holds a replica of every partition and leads partition 0.
ASSIGNMENT = [[4, 1, 2], [2, 4, 3], [3, 1, 4]]


def test_a_broker_is_cordoned_emptied_and_unregistered_with_no_failed_produce(four_nodes, tmp_path):
    binary, nodes, fourth = four_nodes
    bootstrap = ",".join(f"127.0.0.1:{n.client}" for n in nodes)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fourth.start()
    wait_for("broker 4 to join", 20,
             lambda: 4 in admin.list_topics(timeout=5).brokers)
    futures = admin.create_topics(
        [NewTopic(TOPIC, num_partitions=len(ASSIGNMENT), replica_assignment=ASSIGNMENT,
                  config={"min.insync.replicas": "2"})],
        request_timeout=15)
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
            p.produce(TOPIC, value=f"v-{i}".encode(), on_delivery=delivered)
            p.poll(0)
            i += 1
            if i % 50 == 0:
                time.sleep(0.01)
        assert p.flush(30) == 0, "undelivered records at the end"

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        time.sleep(1.0)
        # 1. Cordon broker 4.
        weir(binary, "configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type",
             "brokers", "--entity-name", "4", "--add-config", "cordoned.log.dirs=*")
        # 2. A plan over every broker leaves the cordoned one out.
        topics = tmp_path / "topics.json"
        topics.write_text(json.dumps({"version": 1, "topics": [{"topic": TOPIC}]}))
        # (Broker 4 answers for its own config once its image has the change: polled.)
        deadline = time.monotonic() + 10
        while True:
            out, err = weir(binary, "reassign", "--bootstrap-server", bootstrap, "--generate",
                            "--topics-to-move-json-file", str(topics), "--broker-list", "1,2,3,4")
            if "Broker 4 is cordoned" in err or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert "Broker 4 is cordoned" in err, err
        lines = out.splitlines()
        proposed = json.loads(lines[lines.index("Proposed partition reassignment configuration") + 1])
        assert all(sorted(p["replicas"]) == [1, 2, 3] for p in proposed["partitions"]), out
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps(proposed))
        out, _ = weir(binary, "reassign", "--bootstrap-server", bootstrap, "--execute",
                      "--reassignment-json-file", str(plan))
        assert "Successfully started partition reassignment" in out, out
        out, _ = weir(binary, "reassign", "--bootstrap-server", bootstrap, "--verify",
                      "--wait", "--reassignment-json-file", str(plan))
        for p in range(len(ASSIGNMENT)):
            assert f"Reassignment of partition [{TOPIC},{p}] is completed." in out, out
        # 3. Stop it; 4. unregister it.
        fourth.stop()
        out, _ = weir(binary, "cluster", "unregister", "--bootstrap-server", bootstrap,
                      "--id", "4")
        assert out.strip() == "Broker 4 is no longer registered.", out
        time.sleep(0.5)
    finally:
        stop.set()
        producer.join(60)

    assert not failed, f"{len(failed)} produce(s) failed: {failed[:5]}"
    assert len(acked) > 100, "the producer made progress"
    wait_for("Metadata without broker 4", 10,
             lambda: sorted(admin.list_topics(timeout=5).brokers) == [1, 2, 3])
    described = admin.describe_cluster(request_timeout=10).result(timeout=15)
    assert sorted(n.id for n in described.nodes) == [1, 2, 3], described.nodes
    # Unregistering it again is refused.
    out = subprocess.run(
        [str(binary), "cluster", "unregister", "--bootstrap-server", bootstrap, "--id", "4"],
        capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "is not currently registered" in out.stderr, out

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "retire-check",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(len(ASSIGNMENT))])
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
