"""End-to-end transactions against three `weir serve` processes: the partitions of one
transaction are led by different brokers, so the coordinator writes some markers itself and
sends the others with WriteTxnMarkers; `__transaction_state` is replicated. A read_committed
consumer sees exactly the committed records. A consume-transform-produce pipeline stays exactly
once across kill -9 of its group coordinator between TxnOffsetCommit and EndTxn. Every wait is
bounded.
"""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

import test_cluster_clients
from test_cluster_clients import bootstrap_of, create_once, start_all, wait_registered
from test_transactions import TIMEOUT_S, read_all

PARTITIONS = 6

# The three-node fixture (formatted, not started).
nodes = test_cluster_clients.nodes


def test_transactions_across_three_brokers(nodes):
    start_all(nodes)
    wait_registered(nodes)
    bootstrap = bootstrap_of(nodes)
    topic = f"ctxn-{uuid.uuid4().hex[:8]}"
    create_once(bootstrap, topic, PARTITIONS, 3)
    p = Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": f"tx-{topic}",
        "linger.ms": 5,
    })
    p.init_transactions(TIMEOUT_S)
    committed = []
    for round_, commit in enumerate([True, False, True, True, False, True]):
        p.begin_transaction()
        for i in range(3 * PARTITIONS):
            value = f"r{round_}-{i}"
            p.produce(topic, value=value.encode(), partition=i % PARTITIONS)
            if commit:
                committed.append(value)
        if commit:
            p.commit_transaction(TIMEOUT_S)
        else:
            p.flush(TIMEOUT_S)
            p.abort_transaction(TIMEOUT_S)
    seen = read_all(bootstrap, topic, PARTITIONS, "read_committed", len(committed))
    assert sorted(seen) == sorted(committed)


def _group_coordinator(bootstrap: str, group: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_consumer_groups([group], request_timeout=TIMEOUT_S)
    return described[group].result(TIMEOUT_S).coordinator.id


def test_transactional_offsets_survive_a_kill9_of_the_group_coordinator(nodes):
    """Consume-transform-produce, exactly once across kill -9 of the node leading the group's
    `__consumer_offsets` partition between TxnOffsetCommit and EndTxn: the offsets were written
    there as a transactional batch, so the new leader replays them as pending and the COMMIT
    marker makes them visible (or, if the commit fails, the abort drops them with the output).
    A restarted application resumes from the committed offsets: no input lost, no output
    twice."""
    start_all(nodes)
    wait_registered(nodes)
    bootstrap = bootstrap_of(nodes)
    source = f"eos-in-{uuid.uuid4().hex[:8]}"
    sink = f"eos-out-{uuid.uuid4().hex[:8]}"
    group = f"eos-{uuid.uuid4().hex[:8]}"
    create_once(bootstrap, source, 1, 3)
    create_once(bootstrap, sink, 1, 3)
    inputs = 40
    plain = Producer({"bootstrap.servers": bootstrap})
    for i in range(inputs):
        plain.produce(source, value=f"{i}".encode())
    plain.flush(TIMEOUT_S)

    def app(servers: str, txn_id: str):
        consumer = Consumer({
            "bootstrap.servers": servers,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        })
        consumer.subscribe([source])
        producer = Producer({
            "bootstrap.servers": servers,
            "transactional.id": txn_id,
            "transaction.timeout.ms": 60000,
            "linger.ms": 5,
        })
        producer.init_transactions(TIMEOUT_S)
        return consumer, producer

    def one_round(consumer, producer, size: int, before_commit=None,
                  commit_timeout: float = TIMEOUT_S) -> int:
        """Processes up to `size` inputs in one transaction; returns how many committed."""
        deadline = time.monotonic() + TIMEOUT_S
        batch = []
        while not batch and time.monotonic() < deadline:
            batch = [m for m in consumer.consume(size, 1.0) if not m.error()]
        assert batch, "no input within the timeout"
        producer.begin_transaction()
        for m in batch:
            producer.produce(sink, value=b"x" + m.value())
        producer.flush(TIMEOUT_S)
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()),
            consumer.consumer_group_metadata(),
            TIMEOUT_S,
        )
        if before_commit is not None:
            before_commit()
        try:
            producer.commit_transaction(commit_timeout)
        except KafkaException as e:
            # The commit may fail over the failover; abort: no output, no offsets.
            assert e.args[0].txn_requires_abort(), e
            producer.abort_transaction(TIMEOUT_S)
            tp = TopicPartition(source, 0)
            committed = consumer.committed([tp], TIMEOUT_S)[0].offset
            consumer.seek(TopicPartition(source, 0, max(committed, 0)))
            return 0
        return len(batch)

    consumer, producer = app(bootstrap, f"tx-{group}")
    done = one_round(consumer, producer, 10)
    coordinator = _group_coordinator(bootstrap, group)
    victim = next(n for n in nodes if n.node_id == coordinator)
    survivors = [n for n in nodes if n is not victim]
    killed_at = {}

    def kill_coordinator():
        victim.kill9()
        killed_at["t"] = time.monotonic()

    # TxnOffsetCommit done, EndTxn not yet sent: the group coordinator's node dies. The commit
    # waits for the failover (the dead broker is fenced after its session timeout, then its
    # partitions get new leaders): 10-18 s measured, so a longer bound than other calls.
    done += one_round(consumer, producer, 10, before_commit=kill_coordinator,
                      commit_timeout=2 * TIMEOUT_S)
    took = time.monotonic() - killed_at["t"]
    print(f"\nkill -9 of group coordinator {coordinator} -> EndTxn answered: {took:.2f} s "
          f"({done} inputs committed so far)")
    # What the transaction committed is what the group has committed, from the new leader.
    tp = TopicPartition(source, 0)
    committed = consumer.committed([tp], TIMEOUT_S)[0].offset
    assert committed == done, f"committed offset {committed}, {done} inputs committed"
    consumer.close()
    # The application restarts (a new consumer and producer, as after a crash) and finishes.
    consumer, producer = app(bootstrap_of(survivors), f"tx-{group}")
    while done < inputs:
        done += one_round(consumer, producer, 10)
    assert consumer.committed([tp], TIMEOUT_S)[0].offset == inputs
    consumer.close()
    out = read_all(bootstrap_of(survivors), sink, 1, "read_committed", inputs)
    assert sorted(out) == sorted(f"x{i}" for i in range(inputs)), "not exactly once"
