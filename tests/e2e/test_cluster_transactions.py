"""End-to-end transactions against three `weir serve` processes: the partitions of one
transaction are led by different brokers, so the coordinator writes some markers itself and
sends the others with WriteTxnMarkers; `__transaction_state` is replicated. A read_committed
consumer sees exactly the committed records. Every wait is bounded.
"""

from __future__ import annotations

import uuid

from confluent_kafka import Producer

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
