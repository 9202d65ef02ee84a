"""End-to-end: DeleteRecords on a replicated partition survives a leader change.

Three `weir serve` processes (test_replication.py's cluster), one RF=3 partition. confluent-kafka
produces 100 records (acks=all), then AdminClient.delete_records up to offset 50: the answer's
low watermark is 50 once every live replica's log starts there (the followers adopt the
leader's log start from its fetch answers; the leader waits for them, Kafka's
`DelayedDeleteRecords`). Then the leader is killed (SIGKILL) and, under the new leader, a
consumer reading from the beginning gets offset 50 first: the deleted records stay deleted.
A second test stops a follower (kill -9), produces past its log end, deletes up to there and
starts the follower again: it is below the leader's log start and, as Kafka's
`truncateFullyAndStartAt`, starts its log over at it and rejoins the ISR.

Every wait is bounded.
"""

from __future__ import annotations

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

import test_replication
from test_replication import (FAILOVER_TIMEOUT_S, READ_TIMEOUT_S, REPLICATED_TIMEOUT_S,
                              bootstrap_of, create_topic, partition_states, producer_config,
                              running, wait_for, wait_fully_replicated)

# The three-node fixture.
cluster = test_replication.cluster

TOPIC = "deleted-stay-deleted"
RECORDS = 100
DELETE_TO = 50


def produce(bootstrap: str, topic: str, first: int, count: int) -> None:
    """Records r-<first>.. r-<first+count-1> at offsets first..first+count-1 (acks=all)."""
    producer = Producer(producer_config(bootstrap))
    acked = []
    for i in range(first, first + count):
        producer.produce(topic, value=f"r-{i:03d}".encode(), partition=0,
                         on_delivery=lambda err, msg: acked.append((err, msg.offset())))
    assert producer.flush(60) == 0, "records not delivered in 60 s"
    assert [e for e, _ in acked if e is not None] == []
    assert sorted(o for _, o in acked) == list(range(first, first + count))


def first_record(bootstrap: str, topic: str):
    """The first record a consumer reading from the beginning gets, and the watermarks."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{time.time_ns()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "topic.metadata.refresh.interval.ms": 1000})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + READ_TIMEOUT_S
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                marks = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
                return msg, marks
        raise AssertionError(f"nothing read in {READ_TIMEOUT_S:.0f} s")
    finally:
        consumer.close()


def test_deleted_records_stay_deleted_after_the_leader_is_killed(cluster):
    nodes = cluster
    bootstrap = bootstrap_of(nodes)
    create_topic(nodes, TOPIC, 1)
    produce(bootstrap, TOPIC, 0, RECORDS)

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

    first, marks = first_record(surviving, TOPIC)
    assert first.offset() == DELETE_TO, (
        f"first offset read after the failover: {first.offset()} "
        f"(value {first.value()!r}); DeleteRecords answered {DELETE_TO}")
    assert first.value() == f"r-{DELETE_TO:03d}".encode()
    assert marks == (DELETE_TO, RECORDS)
    assert all(running(n) for n in survivors)


def test_a_follower_left_below_the_leaders_log_start_starts_over_there(cluster):
    nodes = cluster
    topic = "deleted-while-away"
    bootstrap = bootstrap_of(nodes)
    create_topic(nodes, topic, 1)
    produce(bootstrap, topic, 0, RECORDS)

    leader = partition_states(bootstrap, topic)[0][0]
    away = next(n for n in nodes if n.node_id != leader)
    away.kill9()
    others = [n for n in nodes if n is not away]
    surviving = bootstrap_of(others)
    wait_for(f"node {away.node_id} out of the ISR", FAILOVER_TIMEOUT_S,
             lambda: away.node_id not in partition_states(surviving, topic)[0][2] or None)
    # Past the stopped follower's log end (100), then deleted up to 150: the low watermark
    # counts the live replicas only, so the answer comes once the follower is fenced.
    produce(surviving, topic, RECORDS, RECORDS)
    target = RECORDS + RECORDS // 2

    def delete():
        admin = AdminClient({"bootstrap.servers": surviving})
        futures = admin.delete_records([TopicPartition(topic, 0, target)],
                                       request_timeout=15, operation_timeout=10)
        return list(futures.values())[0].result(timeout=20).low_watermark == target or None

    wait_for(f"DeleteRecords up to {target}", FAILOVER_TIMEOUT_S, delete)

    # Back below the leader's log start: it must start over there and rejoin the ISR.
    away.start()
    wait_fully_replicated(nodes, topic, 1, REPLICATED_TIMEOUT_S)

    # Its log now holds 150..199: with the leader killed, whoever leads next serves from 150.
    leader = partition_states(bootstrap_of(nodes), topic)[0][0]
    next(n for n in nodes if n.node_id == leader).kill9()
    rest = bootstrap_of([n for n in nodes if n.node_id != leader])
    wait_for(f"a new leader for {topic}-0", FAILOVER_TIMEOUT_S,
             lambda: partition_states(rest, topic)[0][0] not in (-1, leader) or None)
    first, marks = first_record(rest, topic)
    assert first.offset() == target, f"first offset {first.offset()}, deleted up to {target}"
    assert first.value() == f"r-{target:03d}".encode()
    assert marks == (target, 2 * RECORDS)
