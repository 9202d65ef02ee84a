"""End-to-end: three real `weir serve` processes form one cluster from Kafka-style configs.

The test formats three data directories with one cluster id (`weir format --cluster-id`),
starts the three nodes (each broker + controller, all voters), creates topics through
kafka-python's and confluent-kafka's admin clients, finds the quorum leader with
`weir cluster status` (DescribeQuorum), kill -9s it, and checks that a new leader is elected,
that topic creation keeps working, and that the killed node rejoins and catches up.

Every wait is bounded by a deadline; every server listens on 127.0.0.1 only.
"""

from __future__ import annotations

import base64
import os
import re
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient as CkAdminClient, NewTopic as CkNewTopic
from kafka.admin import KafkaAdminClient, NewTopic as KpNewTopic

from conftest import pick_free_ports, port_accepts_connections, weir_binary

NODES = 3
START_TIMEOUT_S = 30.0
ELECTION_TIMEOUT_S = 30.0
CATCH_UP_TIMEOUT_S = 30.0
# Every topic is placed on all three brokers.
REPLICATION_FACTOR = 3

CONFIG = """\
process.roles=broker,controller
node.id={node_id}
controller.quorum.voters={voters}
listeners=PLAINTEXT://127.0.0.1:{client},CONTROLLER://127.0.0.1:{controller}
advertised.listeners=PLAINTEXT://127.0.0.1:{client}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs={data}
"""


class Node:
    def __init__(self, binary: Path, workdir: Path, node_id: int, client: int, controller: int,
                 voters: str):
        self.binary = binary
        self.node_id = node_id
        self.client = client
        self.dir = workdir / f"node-{node_id}"
        self.dir.mkdir(parents=True)
        self.config = self.dir / "server.properties"
        self.config.write_text(CONFIG.format(node_id=node_id, voters=voters, client=client,
                                             controller=controller, data=self.dir / "data"))
        self.log = self.dir / "weir.log"
        self.proc: subprocess.Popen | None = None

    def format(self, cluster_id: str) -> None:
        subprocess.run([str(self.binary), "format", "--config", str(self.config),
                        "--cluster-id", cluster_id], check=True, timeout=30,
                       capture_output=True)

    def start(self) -> None:
        self.spawn()
        self.wait_listening()

    def spawn(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([str(self.binary), "serve", "--config", str(self.config)],
                                         stdout=log, stderr=subprocess.STDOUT)

    def wait_listening(self) -> None:
        """Until the client port accepts connections: a clustered node opens it only once it
        is registered, caught up and unfenced (as Kafka does), so this needs a quorum."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while not port_accepts_connections("127.0.0.1", self.client):
            assert self.proc.poll() is None, f"node {self.node_id} exited:\n{self.tail()}"
            assert time.monotonic() < deadline, f"node {self.node_id} did not listen"
            time.sleep(0.1)

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        self.begin_stop()
        self.wait_stopped()

    def begin_stop(self) -> None:
        """SIGTERM: the node starts its controlled shutdown."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def wait_stopped(self) -> None:
        if self.proc is not None:
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def stop_all(nodes, grace_s: float = 3.0) -> None:
    """A fixture's teardown: SIGTERM to every node at once, `grace_s` to exit, then SIGKILL.
    When a whole cluster stops, the last leader of a partition has nobody to hand it to, so
    its controlled shutdown is never granted and each node waits out its 10 s limit (as
    Kafka's brokers wait for theirs): 10 s a test that nothing checks. Tests that check a
    clean stop call `stop()` on one node while the others run."""
    for n in nodes:
        n.begin_stop()
    deadline = time.monotonic() + grace_s
    for n in nodes:
        if n.proc is not None:
            try:
                n.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                n.proc.kill()
                n.proc.wait(timeout=10)


def formatted_nodes(tmp_path: Path, count: int = NODES, extra_ports: int = 0,
                    configure=None) -> list[Node]:
    """`count` nodes with ports picked (client, controller, then `extra_ports` more each, in
    `node.extra_ports`), `configure(node)` run on each, then all formatted with one cluster id.
    Not started. Skips under WEIR_E2E_BOOTSTRAP (these tests start their own processes)."""
    if os.environ.get("WEIR_E2E_BOOTSTRAP"):
        pytest.skip("needs to start its own processes")
    binary = weir_binary()
    if not binary.exists():
        pytest.fail(f"{binary} not found: `cargo build --release` or set WEIR_BIN", pytrace=False)
    per = 2 + extra_ports
    ports = pick_free_ports(per * count)
    voters = ",".join(f"{i + 1}@127.0.0.1:{ports[per * i + 1]}" for i in range(count))
    nodes = []
    for i in range(count):
        n = Node(binary, tmp_path, i + 1, ports[per * i], ports[per * i + 1], voters)
        n.extra_ports = ports[per * i + 2:per * (i + 1)]
        if configure is not None:
            configure(n)
        nodes.append(n)
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    for n in nodes:
        n.format(cluster_id)
    return nodes


def start_all(nodes: list[Node]) -> None:
    """All at once: a node listens only once the quorum has registered it."""
    for n in nodes:
        n.spawn()
    for n in nodes:
        n.wait_listening()


def status(binary: Path, bootstrap: str) -> dict:
    """`weir cluster status`, parsed: leader, epoch, high watermark, lag per voter."""
    out = subprocess.run([str(binary), "cluster", "status", "--bootstrap", bootstrap],
                         capture_output=True, text=True, timeout=15)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip() or out.stdout.strip())
    head = re.search(r"quorum: leader (-?\d+) epoch (\d+) high watermark (\d+)", out.stdout)
    if head is None:
        raise RuntimeError(f"unexpected status output: {out.stdout}")
    lags = {int(m.group(1)): m.group(2)
            for m in re.finditer(r"voter (\d+)(?: \(leader\))?: log end -?\d+ lag (\w+)",
                                 out.stdout)}
    return {"leader": int(head.group(1)), "epoch": int(head.group(2)),
            "hw": int(head.group(3)), "lags": lags, "text": out.stdout}


def wait_for(what: str, timeout: float, probe):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            value = probe()
            if value:
                return value
        except Exception as e:  # the cluster may refuse while it elects; retry until deadline
            last = e
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what} (last error: {last})")


def create_with_kafka_python(bootstrap: str, name: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), request_timeout_ms=10000)
    try:
        admin.create_topics([KpNewTopic(name, num_partitions=3,
                                        replication_factor=REPLICATION_FACTOR)])
    finally:
        admin.close()


def create_with_confluent(bootstrap: str, name: str) -> None:
    admin = CkAdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([CkNewTopic(name, num_partitions=3,
                                              replication_factor=REPLICATION_FACTOR)],
                                  request_timeout=10)
    futures[name].result(timeout=15)


def topics_listed(bootstrap: str) -> set[str]:
    admin = CkAdminClient({"bootstrap.servers": bootstrap})
    return set(admin.list_topics(timeout=10).topics)


@pytest.fixture
def cluster(tmp_path):
    nodes = formatted_nodes(tmp_path)
    try:
        start_all(nodes)
        yield nodes[0].binary, nodes
    finally:
        stop_all(nodes)


def test_three_nodes_survive_a_killed_quorum_leader(cluster):
    binary, nodes = cluster
    bootstrap = ",".join(f"127.0.0.1:{n.client}" for n in nodes)

    first = wait_for("a quorum leader", ELECTION_TIMEOUT_S,
                     lambda: (lambda s: s if s["leader"] > 0 else None)(status(binary, bootstrap)))
    assert set(first["lags"]) == {1, 2, 3}, first["text"]

    wait_for("create via kafka-python", ELECTION_TIMEOUT_S,
             lambda: create_with_kafka_python(bootstrap, "before-kp") or True)
    wait_for("create via confluent-kafka", ELECTION_TIMEOUT_S,
             lambda: create_with_confluent(bootstrap, "before-ck") or True)
    # Created means committed by the quorum; the broker that answers the listing may apply
    # the commit a moment later (as in Kafka, metadata reaches brokers asynchronously).
    wait_for("both topics listed", CATCH_UP_TIMEOUT_S,
             lambda: {"before-kp", "before-ck"} <= topics_listed(bootstrap))

    # kill -9 the quorum leader.
    leader = next(n for n in nodes if n.node_id == first["leader"])
    leader.kill9()
    survivors = ",".join(f"127.0.0.1:{n.client}" for n in nodes if n is not leader)

    def new_leader():
        s = status(binary, survivors)
        return s if s["leader"] > 0 and s["leader"] != leader.node_id \
            and s["epoch"] > first["epoch"] else None

    after = wait_for("a new quorum leader", ELECTION_TIMEOUT_S, new_leader)

    # Topic creation keeps working, through both clients.
    wait_for("create via kafka-python after failover", ELECTION_TIMEOUT_S,
             lambda: create_with_kafka_python(survivors, "after-kp") or True)
    wait_for("create via confluent-kafka after failover", ELECTION_TIMEOUT_S,
             lambda: create_with_confluent(survivors, "after-ck") or True)
    wait_for("all four topics listed", CATCH_UP_TIMEOUT_S,
             lambda: {"before-kp", "before-ck", "after-kp", "after-ck"}
             <= topics_listed(survivors))

    # The killed node rejoins and catches up: its lag reaches 0 and it serves the topics made
    # while it was down.
    leader.start()

    def caught_up():
        s = status(binary, bootstrap)
        return s if s["lags"].get(leader.node_id) == "0" and s["hw"] > after["hw"] else None

    wait_for(f"node {leader.node_id} to catch up", CATCH_UP_TIMEOUT_S, caught_up)
    rejoined = f"127.0.0.1:{leader.client}"
    wait_for(f"node {leader.node_id} to list every topic", CATCH_UP_TIMEOUT_S,
             lambda: {"after-kp", "after-ck"} <= topics_listed(rejoined))
