"""End-to-end: DeleteRecords on a replicated partition survives a leader change.

Three `weir serve` processes (test_replication.py's cluster), one RF=3 partition. confluent-kafka
produces 100 records (acks=all), then AdminClient.delete_records up to offset 50: the answer's
low watermark is 50 once every live replica's log starts there (the followers adopt the
leader's log start from its fetch answers; the leader waits for them, Kafka's
`DelayedDeleteRecords`). Then the leader is killed (SIGKILL) and, under the new leader, a
consumer reading from the beginning gets offset 50 first: the deleted records stay deleted.
Every wait is bounded.
"""

from __future__ import annotations

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

import test_replication
from test_replication import (FAILOVER_TIMEOUT_S, READ_TIMEOUT_S, bootstrap_of, create_topic,
                              partition_states, producer_config, running, wait_for)

# The three-node fixture.
cluster = test_replication.cluster

TOPIC = "deleted-stay-deleted"
RECORDS = 100
DELETE_TO = 50


def test_deleted_records_stay_deleted_after_the_leader_is_killed(cluster):
    nodes = cluster
    bootstrap = bootstrap_of(nodes)
    create_topic(nodes, TOPIC, 1)

    producer = Producer(producer_config(bootstrap))
    acked = []
    for i in range(RECORDS):
        producer.produce(TOPIC, value=f"r-{i:03d}".encode(), partition=0,
                         on_delivery=lambda err, msg: acked.append((err, msg.offset())))
    assert producer.flush(60) == 0, "records not delivered in 60 s"
    assert [e for e, _ in acked if e is not None] == []
    assert sorted(o for _, o in acked) == list(range(RECORDS))

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(TOPIC, 0, DELETE_TO)],
                                   request_timeout=30, operation_timeout=20)
    deleted = list(futures.values())[0].result(timeout=40)
    assert deleted.low_watermark == DELETE_TO

    leader = partition_states(bootstrap, TOPIC)[0][0]
    victim = next(n for n in nodes if n.node_id == leader)
    victim.kill9()
    survivors = [n for n in nodes if n.node_id != leader]
    surviving = bootstrap_of(survivors)

    def new_leader():
        for n in survivors:
            led = partition_states(f"127.0.0.1:{n.client}", TOPIC)[0][0]
            if led < 0 or led == leader:
                return None
        return led

    wait_for(f"a new leader for {TOPIC}-0 (old: {leader})", FAILOVER_TIMEOUT_S, new_leader)

    consumer = Consumer({"bootstrap.servers": surviving, "group.id": f"g-{time.time_ns()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "topic.metadata.refresh.interval.ms": 1000})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        first = None
        deadline = time.monotonic() + READ_TIMEOUT_S
        while first is None and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                first = msg
        assert first is not None, f"nothing read from the new leader in {READ_TIMEOUT_S:.0f} s"
        assert first.offset() == DELETE_TO, (
            f"first offset read after the failover: {first.offset()} "
            f"(value {first.value()!r}); DeleteRecords answered {DELETE_TO}")
        assert first.value() == f"r-{DELETE_TO:03d}".encode()
        low, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
        assert (low, high) == (DELETE_TO, RECORDS)
    finally:
        consumer.close()
    assert all(running(n) for n in survivors)
