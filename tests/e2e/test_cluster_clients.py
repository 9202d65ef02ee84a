"""End-to-end: everyday client moves against three real `weir serve` processes.

1. Start-up: as soon as the three processes listen, one `AdminClient.create_topics` (no retry
   loop) succeeds within its timeout. A node opens its client port only once it is registered,
   caught up and unfenced, as Kafka does; before, librdkafka met a node answering Metadata with
   a controller and no brokers, and gave up with "Failed while waiting for controller".
2. Controller failover: with the active controller killed (-9), one CreateTopics to another
   node succeeds: the broker holds the forwarded request until a controller is elected, as
   Kafka's does, instead of answering NOT_CONTROLLER (which librdkafka hands to the caller).
3. The CLI with a bootstrap node that leads nothing asked of it: `weir consume`, `weir produce`
   and `weir groups` route to the partition's leader or the group's coordinator.

Each prints what it measured (run with -s to see it). Every wait is bounded.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from test_cluster import Node, formatted_nodes, status, wait_for
from test_replication import ClusterLogs

NODES = 3
# The whole budget of one admin call: librdkafka's request timeout, and the future's.
ADMIN_TIMEOUT_S = 15.0


@pytest.fixture
def nodes(request, tmp_path):
    """Three formatted nodes, not started (each test starts them its own way)."""
    made = formatted_nodes(tmp_path, NODES)
    request.node._weir_broker = ClusterLogs(made)  # log tails on failure (conftest)
    try:
        yield made
    finally:
        for n in made:
            if n.proc is not None and n.proc.poll() is None:
                n.proc.kill()
                n.proc.wait(timeout=10)


def start_all(nodes: list[Node]) -> float:
    """Starts every node at once; returns the moment the last one listened."""
    spawned = time.monotonic()
    for n in nodes:
        n.spawn()
    for n in nodes:
        n.wait_listening()
    listening = time.monotonic()
    print(f"\nthree processes spawned -> all listening: {listening - spawned:.2f} s")
    return listening


def wait_registered(nodes: list[Node]) -> None:
    """Until Metadata lists every broker (so a test of something else starts from a settled
    cluster, whatever the start-up behaviour)."""
    admin = AdminClient({"bootstrap.servers": bootstrap_of(nodes)})
    wait_for("every broker registered", 30,
             lambda: len(admin.list_topics(timeout=5).brokers) == len(nodes))


def bootstrap_of(nodes: list[Node]) -> str:
    return ",".join(f"127.0.0.1:{n.client}" for n in nodes)


def create_once(bootstrap: str, name: str, partitions: int, rf: int) -> None:
    """One CreateTopics through confluent-kafka's AdminClient: no retry here."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions,
                                            replication_factor=rf)],
                                  request_timeout=ADMIN_TIMEOUT_S)
    futures[name].result(timeout=ADMIN_TIMEOUT_S + 5)


def test_create_topics_as_soon_as_three_processes_listen(nodes):
    listening = start_all(nodes)
    create_once(bootstrap_of(nodes), "at-start", 3, 3)
    took = time.monotonic() - listening
    print(f"\nstart-up: last process listening -> first CreateTopics succeeded: {took:.2f} s")


def test_create_topics_right_after_the_active_controller_is_killed(nodes):
    start_all(nodes)
    wait_registered(nodes)
    bootstrap = bootstrap_of(nodes)
    create_once(bootstrap, "before", 1, 3)
    controller = status(nodes[0].binary, bootstrap)["leader"]
    victim = next(n for n in nodes if n.node_id == controller)
    others = [n for n in nodes if n is not victim]
    victim.kill9()
    killed = time.monotonic()
    # Replication factor 2: the two survivors can hold it whether or not the controller has
    # fenced the killed broker yet.
    create_once(bootstrap_of(others), "after", 1, 2)
    took = time.monotonic() - killed
    print(f"\nfailover: kill -9 of controller {controller} -> first CreateTopics succeeded: "
          f"{took:.2f} s")


def weir(binary, *args: str, stdin: str | None = None) -> str:
    out = subprocess.run([str(binary), *args], input=stdin, capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, f"weir {' '.join(args)} failed: {out.stderr.strip()}"
    return out.stdout


def test_cli_with_a_bootstrap_node_that_is_not_the_leader(nodes):
    start_all(nodes)
    wait_registered(nodes)
    binary = nodes[0].binary
    topic = "cli"
    # Replication factor 1: each partition lives on one broker only, so a request to another
    # broker is refused unless the CLI finds the leader.
    create_once(bootstrap_of(nodes), topic, 3, 1)
    admin = AdminClient({"bootstrap.servers": bootstrap_of(nodes)})

    def leaders():
        md = admin.list_topics(topic, timeout=10).topics[topic]
        found = {p.id: p.leader for p in md.partitions.values()}
        return found if len(found) == 3 and all(v > 0 for v in found.values()) else None

    leader_of = wait_for("every partition led", 15, leaders)
    leader = leader_of[0]
    other = next(n for n in nodes if n.node_id != leader)
    bootstrap = f"127.0.0.1:{other.client}"

    produced = weir(binary, "produce", "--bootstrap", bootstrap, topic, "--partition", "0",
                    stdin="k1\tone\nk2\ttwo\nthree\n")
    assert "produced 3 records at offsets 0..2" in produced, produced
    consumed = weir(binary, "consume", "--bootstrap", bootstrap, topic, "--partition", "0",
                    "--max", "3")
    values = [line.split("\t")[3] for line in consumed.splitlines()]
    assert values == ["one", "two", "three"], consumed

    # A group with committed offsets, then the group commands from a node that is not its
    # coordinator (one bootstrap each, so at least two of three are not).
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = Consumer({"bootstrap.servers": bootstrap_of(nodes), "group.id": group,
                  "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
    c.close()
    for n in nodes:
        b = f"127.0.0.1:{n.client}"
        listed = weir(binary, "groups", "--bootstrap", b, "list")
        assert group in listed, listed
        described = weir(binary, "groups", "--bootstrap", b, "describe", group)
        assert f"Consumer group '{group}' has no active members." in described, described
        rows = [line.split() for line in described.splitlines() if line.startswith(group)]
        assert rows == [[group, topic, "0", "2", "3", "1", "-", "-", "-"]], described
    reset = weir(binary, "groups", "--bootstrap", bootstrap, "reset-offsets", group,
                 "--topic", topic, "--to", "earliest")
    assert f"{topic}\t0\t0" in reset, reset
    # The topic commands from any node (they forward to the controller).
    described = weir(binary, "topics", "--bootstrap", bootstrap, "describe", topic)
    assert topic in described, described

    # Kafka's other tools as weir commands, from the node that leads nothing asked of it.
    offsets = weir(binary, "get-offsets", "--bootstrap-server", bootstrap, "--topic", topic,
                   "--partitions", "0")
    assert offsets.strip() == f"{topic}:0:3", offsets
    earliest = json.loads(weir(binary, "--output", "json", "get-offsets", "--bootstrap-server",
                               bootstrap, "--topic", topic, "--time", "earliest"))
    assert {(o["partition"], o["offset"]) for o in earliest} == {(0, 0), (1, 0), (2, 0)}, earliest
    quorum = weir(binary, "metadata-quorum", "--bootstrap-server", bootstrap, "describe",
                  "--status")
    fields = {k.strip(): v.strip() for k, v in
              (line.split(":", 1) for line in quorum.splitlines())}
    assert fields["CurrentVoters"] == "[1,2,3]", quorum
    assert int(fields["LeaderId"]) in (1, 2, 3) and int(fields["HighWatermark"]) > 0, quorum
    replication = weir(binary, "metadata-quorum", "--bootstrap-server", bootstrap, "describe",
                       "--replication").splitlines()
    assert replication[0].split("\t")[-1] == "Status", replication
    assert sorted(line.split("\t")[-1] for line in replication[1:]) == \
        ["Follower", "Follower", "Leader"], replication
    altered = weir(binary, "configs", "--bootstrap-server", bootstrap, "--entity-type", "topics",
                   "--entity-name", topic, "--alter", "--add-config",
                   "retention.ms=86400000,cleanup.policy=[compact,delete]")
    assert f"Completed updating config for topic {topic}." in altered, altered

    # A change commits at the controller; the node asked describes from its own metadata
    # image, which follows a moment later (as a Kafka broker's cache does): poll.
    def both_set():
        configs = weir(binary, "configs", "--bootstrap-server", bootstrap, "--entity-type",
                       "topics", "--entity-name", topic, "--describe")
        return configs if ("  retention.ms=86400000 sensitive=false" in configs and
                           "  cleanup.policy=compact,delete sensitive=false" in configs) else None

    wait_for("both overrides described", 10, both_set)
    weir(binary, "configs", "--bootstrap-server", bootstrap, "--entity-type", "topics",
         "--entity-name", topic, "--alter", "--delete-config", "retention.ms")

    def overrides():
        described = json.loads(weir(binary, "--output", "json", "configs", "--bootstrap-server",
                                    bootstrap, "--entity-type", "topics", "--entity-name", topic,
                                    "--describe"))
        names = [(c["name"], c["source"]) for c in described[0]["configs"]]
        return names if names == [("cleanup.policy", "DYNAMIC_TOPIC_CONFIG")] else None

    wait_for("retention.ms override deleted", 10, overrides)
    print(f"\nCLI: produce, consume, groups list/describe/reset-offsets via node "
          f"{other.node_id}; partition 0 led by node {leader}")
