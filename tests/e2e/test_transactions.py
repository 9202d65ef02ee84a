"""End-to-end transactions (v1) with confluent-kafka: a transactional producer whose
committed records a read_committed consumer sees and whose aborted ones it does not,
sendOffsetsToTransaction (consume-transform-produce), and fencing of a second producer with
the same transactional id. Every wait is bounded.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import weir_binary

TIMEOUT_S = 30.0


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    futures[name].result(TIMEOUT_S)


def txn_producer(bootstrap: str, txn_id: str) -> Producer:
    p = Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": txn_id,
        "transaction.timeout.ms": 60000,
        "linger.ms": 5,
    })
    p.init_transactions(TIMEOUT_S)
    return p


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str, expect: int) -> list[str]:
    """Every value from the start of each partition until every partition is at its end and
    `expect` values were read (bounded by TIMEOUT_S)."""
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"reader-{uuid.uuid4().hex[:8]}",
        "isolation.level": isolation,
        "enable.auto.commit": False,
        "enable.partition.eof": True,
    })
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    values: list[str] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
                    if len(at_end) == partitions and len(values) >= expect:
                        break
                    continue
                raise KafkaException(m.error())
            at_end.discard(m.partition())
            values.append(m.value().decode())
    finally:
        c.close()
    return values


def test_commit_and_abort_are_seen_correctly(broker):
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 2)
    p = txn_producer(broker.bootstrap, f"tx-{topic}")
    committed, aborted = [], []
    for round_, commit in enumerate([True, False, True, False, True]):
        p.begin_transaction()
        for i in range(20):
            value = f"r{round_}-{i}"
            p.produce(topic, value=value.encode(), partition=i % 2)
            (committed if commit else aborted).append(value)
        if commit:
            p.commit_transaction(TIMEOUT_S)
        else:
            p.flush(TIMEOUT_S)
            p.abort_transaction(TIMEOUT_S)
    seen = read_all(broker.bootstrap, topic, 2, "read_committed", len(committed))
    assert sorted(seen) == sorted(committed)
    everything = read_all(broker.bootstrap, topic, 2, "read_uncommitted", len(committed) + len(aborted))
    assert sorted(everything) == sorted(committed + aborted)
    # Each marker takes an offset: 5 transactions on each partition, 10 records each.
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "wm"})
    low, high = c.get_watermark_offsets(TopicPartition(topic, 0), TIMEOUT_S)
    c.close()
    assert (low, high) == (0, 5 * 10 + 5)


def test_an_open_transaction_holds_read_committed_back(broker):
    topic = f"txn-open-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 1)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, value=b"before")
    plain.flush(TIMEOUT_S)
    p = txn_producer(broker.bootstrap, f"tx-{topic}")
    p.begin_transaction()
    p.produce(topic, value=b"open")
    p.flush(TIMEOUT_S)
    plain.produce(topic, value=b"after")
    plain.flush(TIMEOUT_S)
    # The open transaction (offset 1) is the last stable offset: only "before" is visible.
    assert read_all(broker.bootstrap, topic, 1, "read_committed", 1) == ["before"]
    p.commit_transaction(TIMEOUT_S)
    assert read_all(broker.bootstrap, topic, 1, "read_committed", 3) == ["before", "open", "after"]


def test_consume_transform_produce_commits_offsets_with_the_output(broker):
    source = f"in-{uuid.uuid4().hex[:8]}"
    sink = f"out-{uuid.uuid4().hex[:8]}"
    group = f"eos-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, source, 1)
    create_topic(broker.bootstrap, sink, 1)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(30):
        plain.produce(source, value=f"{i}".encode())
    plain.flush(TIMEOUT_S)

    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
    })
    consumer.subscribe([source])
    p = txn_producer(broker.bootstrap, f"tx-{group}")
    done = 0
    rounds = 0
    deadline = time.monotonic() + TIMEOUT_S
    while done < 30 and time.monotonic() < deadline:
        batch = consumer.consume(10, 1.0)
        batch = [m for m in batch if not m.error()]
        if not batch:
            continue
        p.begin_transaction()
        for m in batch:
            p.produce(sink, value=b"x" + m.value())
        p.send_offsets_to_transaction(
            consumer.position(consumer.assignment()),
            consumer.consumer_group_metadata(),
            TIMEOUT_S,
        )
        rounds += 1
        if rounds == 2:
            # One aborted round: its output is dropped and its offsets not committed, so
            # the consumer goes back to the committed position and does it again.
            p.abort_transaction(TIMEOUT_S)
            committed = consumer.committed([TopicPartition(source, 0)], TIMEOUT_S)[0].offset
            consumer.seek(TopicPartition(source, 0, committed))
            continue
        p.commit_transaction(TIMEOUT_S)
        done += len(batch)
    assert done == 30
    committed = consumer.committed([TopicPartition(source, 0)], TIMEOUT_S)
    assert committed[0].offset == 30
    consumer.close()
    out = read_all(broker.bootstrap, sink, 1, "read_committed", 30)
    assert sorted(out) == sorted(f"x{i}" for i in range(30))


def test_a_second_producer_fences_the_first(broker):
    topic = f"txn-fence-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 1)
    txn_id = f"tx-{topic}"
    first = txn_producer(broker.bootstrap, txn_id)
    first.begin_transaction()
    first.produce(topic, value=b"zombie")
    first.flush(TIMEOUT_S)
    second = txn_producer(broker.bootstrap, txn_id)  # aborts the first's transaction
    second.begin_transaction()
    second.produce(topic, value=b"live")
    second.commit_transaction(TIMEOUT_S)
    with pytest.raises(KafkaException) as raised:
        first.commit_transaction(TIMEOUT_S)
    assert raised.value.args[0].fatal() or raised.value.args[0].txn_requires_abort()
    assert read_all(broker.bootstrap, topic, 1, "read_committed", 1) == ["live"]


def test_an_open_transaction_survives_kill9_and_is_aborted_by_the_next_producer(broker):
    topic = f"txn-kill-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 1)
    txn_id = f"tx-{topic}"
    first = txn_producer(broker.bootstrap, txn_id)
    first.begin_transaction()
    first.produce(topic, value=b"lost")
    first.flush(TIMEOUT_S)
    broker.kill9()  # and start again
    # The restarted broker rebuilds the open transaction (it still holds the LSO) and the
    # coordinator reloads it as Ongoing: the next producer with the id aborts it.
    second = txn_producer(broker.bootstrap, txn_id)
    second.begin_transaction()
    second.produce(topic, value=b"kept")
    second.commit_transaction(TIMEOUT_S)
    assert read_all(broker.bootstrap, topic, 1, "read_committed", 1) == ["kept"]
    assert sorted(read_all(broker.bootstrap, topic, 1, "read_uncommitted", 2)) == ["kept", "lost"]


def weir_transactions(bootstrap: str, *args: str):
    """`weir --output json transactions ...` (KIP-664's tooling) as a parsed document."""
    out = subprocess.run([str(weir_binary()), "--output", "json", "transactions",
                          "--bootstrap-server", bootstrap, *args],
                         capture_output=True, text=True, timeout=TIMEOUT_S)
    assert out.returncode == 0, f"weir transactions {' '.join(args)}: {out.stderr.strip()}"
    return json.loads(out.stdout)


def test_the_transactions_tool_lists_an_open_then_committed_transaction(broker):
    topic = f"txn-tool-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 2)
    txn_id = f"tx-{topic}"
    p = txn_producer(broker.bootstrap, txn_id)
    p.begin_transaction()
    p.produce(topic, value=b"a", partition=0)
    p.produce(topic, value=b"b", partition=1)
    p.flush(TIMEOUT_S)

    listed = {t["transactional_id"]: t for t in weir_transactions(broker.bootstrap, "list")}
    assert listed[txn_id]["state"] == "Ongoing", listed
    ongoing = weir_transactions(broker.bootstrap, "list", "--state-filter", "Ongoing")
    assert txn_id in [t["transactional_id"] for t in ongoing]
    described = weir_transactions(broker.bootstrap, "describe", "--transactional-id", txn_id)
    assert described["state"] == "Ongoing" and described["start_ms"] > 0, described
    assert sorted(map(tuple, described["partitions"])) == [(topic, 0), (topic, 1)]
    pid = described["producer_id"]
    producers = weir_transactions(broker.bootstrap, "describe-producers",
                                  "--topic", topic, "--partition", "0")
    mine = [x for x in producers if x["producer_id"] == pid]
    assert mine and mine[0]["current_txn_start_offset"] == 0, producers
    # Open for less than the default 15 minutes, and known to its coordinator: not hanging.
    assert weir_transactions(broker.bootstrap, "find-hanging", "--broker-id", "1") == []
    # Older than a zero timeout, but its coordinator holds both partitions in it: not hanging.
    assert weir_transactions(broker.bootstrap, "find-hanging", "--broker-id", "1",
                             "--max-transaction-timeout", "0") == []

    p.commit_transaction(TIMEOUT_S)
    deadline = time.monotonic() + TIMEOUT_S
    state = None
    while time.monotonic() < deadline:
        state = weir_transactions(broker.bootstrap, "describe", "--transactional-id", txn_id)
        if state["state"] == "CompleteCommit":
            break
        time.sleep(0.1)
    assert state["state"] == "CompleteCommit", state
    producers = weir_transactions(broker.bootstrap, "describe-producers",
                                  "--topic", topic, "--partition", "1")
    assert [x["current_txn_start_offset"] for x in producers if x["producer_id"] == pid] == [-1]
