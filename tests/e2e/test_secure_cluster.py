"""A Kafka user's secure three-node cluster: the inter-broker listener SASL_SSL with
SCRAM-SHA-512, the controller listener SASL_SSL with PLAIN, an external mTLS (SSL) listener,
an authorizer whose super users are the brokers' SASL user and the admin's certificate.
confluent-kafka (librdkafka, its own OpenSSL) creates the brokers' SCRAM credential, produces
with acks=all to a topic of replication factor 3 and consumes on each client listener; a node
with wrong inter-node passwords logs why and never joins. Certificates come from the openssl
CLI at run time.

Run: `WEIR_BIN=target/debug/weir pytest tests/e2e/test_secure_cluster.py` (needs `openssl` and
`pip install confluent-kafka`). About 15 s.
"""

import base64
import os
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from certs import free_ports, key_store, make_ca, make_leaf
from test_cluster import stop_all

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient, NewTopic, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion,
)

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("WEIR_BIN", ROOT / "target/release/weir"))
if not BIN.is_absolute():
    BIN = ROOT / BIN

BROKER_PW = "broker-scram-secret"
CONTROLLER_PW = "broker-plain-secret"


def make_certs(d: Path):
    make_ca(d)
    # One certificate for the three nodes: it serves their listeners and is their client
    # certificate towards each other (hence both usages).
    make_leaf(d, "node", "/CN=weir-node", "serverAuth,clientAuth", "DNS:localhost,IP:127.0.0.1")
    key_store(d, "node")
    make_leaf(d, "admin", "/CN=admin", "clientAuth", None)


CONFIG = """node.id={id}
process.roles={roles}
controller.quorum.voters={voters}
listeners={listeners}
advertised.listeners=INTERNAL://127.0.0.1:{internal},EXTERNAL://127.0.0.1:{external}
listener.security.protocol.map=INTERNAL:SASL_SSL,CONTROLLER:SASL_SSL,EXTERNAL:SSL
inter.broker.listener.name=INTERNAL
controller.listener.names=CONTROLLER
log.dirs={d}/data
ssl.keystore.type=PEM
ssl.keystore.location={certs}/node-store.pem
ssl.truststore.type=PEM
ssl.truststore.location={certs}/ca.pem
listener.name.external.ssl.client.auth=required
listener.name.internal.sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.controller.sasl.enabled.mechanisms=PLAIN
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
sasl.mechanism.controller.protocol=PLAIN
listener.name.internal.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="{scram_pw}";
listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="{plain_pw}" user_broker="{controller_pw}";
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:broker;User:CN=admin
"""


class Node:
    def __init__(self, root: Path, certs: Path, node_id: int, ports, voters: str,
                 scram_pw=BROKER_PW, plain_pw=CONTROLLER_PW, controller=True):
        self.id = node_id
        self.internal, self.cport, self.external = ports
        self.dir = root / f"node-{node_id}"
        self.dir.mkdir()
        listeners = [f"INTERNAL://127.0.0.1:{self.internal}",
                     f"EXTERNAL://127.0.0.1:{self.external}"]
        if controller:
            listeners.insert(1, f"CONTROLLER://127.0.0.1:{self.cport}")
        self.config = self.dir / "server.properties"
        self.config.write_text(CONFIG.format(
            id=node_id, roles="broker,controller" if controller else "broker", voters=voters,
            listeners=",".join(listeners), internal=self.internal, external=self.external,
            d=self.dir, certs=certs, scram_pw=scram_pw, plain_pw=plain_pw,
            controller_pw=CONTROLLER_PW))
        self.log_path = self.dir / "weir.log"
        self.proc = None

    def format(self, cluster_id):
        subprocess.run([str(BIN), "format", "--config", str(self.config), "--cluster-id",
                        cluster_id], check=True, timeout=30, capture_output=True)

    def spawn(self):
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([str(BIN), "serve", "--config", str(self.config)],
                                         stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)

    def listening(self, port):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            return False

    def log(self):
        return self.log_path.read_text(errors="replace")

    def stop(self):
        self.begin_stop()
        self.wait_stopped()

    def begin_stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def wait_stopped(self):
        if self.proc is not None:
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def wait_for(what, timeout, probe, nodes=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe():
            return
        for n in nodes:
            assert n.proc.poll() is None, f"node {n.id} exited:\n{n.log()[-3000:]}"
        time.sleep(0.2)
    logs = "\n".join(f"--- node {n.id}\n{n.log()[-2500:]}" for n in nodes)
    raise AssertionError(f"{what} within {timeout}s\n{logs}")


def external_conf(certs, nodes):
    return {"bootstrap.servers": ",".join(f"127.0.0.1:{n.external}" for n in nodes),
            "security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem"),
            "ssl.certificate.location": str(certs / "admin.pem"),
            "ssl.key.location": str(certs / "admin.p8")}


def internal_conf(certs, nodes):
    return {"bootstrap.servers": ",".join(f"127.0.0.1:{n.internal}" for n in nodes),
            "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "broker", "sasl.password": BROKER_PW,
            "ssl.ca.location": str(certs / "ca.pem")}


def produce_all(conf, topic, values):
    errors = []
    p = Producer({**conf, "acks": "all", "message.timeout.ms": 15000})
    for v in values:
        p.produce(topic, v, callback=lambda e, m: errors.append(e))
    p.flush(20)
    return errors


def consume_all(conf, topic, n):
    c = Consumer({**conf, "group.id": f"g-{uuid.uuid4()}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 20
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    return got


@pytest.fixture
def cluster(tmp_path):
    if not BIN.exists():
        pytest.fail(f"{BIN} not found: cargo build, or set WEIR_BIN", pytrace=False)
    certs = tmp_path / "certs"
    certs.mkdir()
    make_certs(certs)
    ports = free_ports(9)
    voters = ",".join(f"{i + 1}@127.0.0.1:{ports[3 * i + 1]}" for i in range(3))
    nodes = [Node(tmp_path, certs, i + 1, ports[3 * i:3 * i + 3], voters) for i in range(3)]
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    for n in nodes:
        n.format(cluster_id)
    try:
        for n in nodes:
            n.spawn()
        # A node opens its client listeners once registered over the secured controller
        # listener: all of them serving means every node logged in to the quorum.
        wait_for("all client listeners open", 60,
                 lambda: all(n.listening(n.internal) and n.listening(n.external)
                             for n in nodes), nodes)
        yield certs, nodes, voters, cluster_id, tmp_path
    finally:
        stop_all(nodes)


def test_secure_cluster_replicates_and_serves_each_listener(cluster):
    certs, nodes, voters, cluster_id, root = cluster
    ext = external_conf(certs, nodes)
    admin = AdminClient(ext)
    # The brokers' SCRAM credential, through the mTLS listener (the admin is a super user).
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    done = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion("broker", info, BROKER_PW.encode())])
    for f in done.values():
        f.result(timeout=20)
    topic = "secure-rf3"
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)])[topic] \
        .result(timeout=20)

    # Metadata answers with the endpoints of the listener asked on.
    md = admin.list_topics(timeout=10)
    assert sorted(b.port for b in md.brokers.values()) == sorted(n.external for n in nodes)

    # acks=all with RF 3: every follower fetched over SASL_SSL/SCRAM, authorized as
    # CLUSTER_ACTION for User:broker.
    values = [f"v{i}".encode() for i in range(30)]
    errors = produce_all(ext, topic, values)
    assert errors and all(e is None for e in errors), errors
    assert sorted(consume_all(ext, topic, 30)) == sorted(values)

    # The inter-broker listener serves clients too, with its own security.
    internal = internal_conf(certs, nodes)
    errors = produce_all(internal, topic, [b"x"])
    assert errors == [None], errors
    assert len(consume_all(internal, topic, 31)) == 31
    md = AdminClient(internal).list_topics(timeout=10)
    assert sorted(b.port for b in md.brokers.values()) == sorted(n.internal for n in nodes)

    # A broker with wrong passwords: a clear error in its log, and it never joins (its client
    # listeners stay closed), while the process stays up.
    ports = free_ports(3)
    bad = Node(root, certs, 4, ports, voters, scram_pw="wrong", plain_pw="wrong",
               controller=False)
    bad.format(cluster_id)
    bad.spawn()
    try:
        wait_for("the login error in the log", 20,
                 lambda: "cannot log in to the other node" in bad.log(), [bad])
        assert "SASL_AUTHENTICATION_FAILED" in bad.log() or "error 58" in bad.log(), \
            bad.log()[-2000:]
        assert bad.proc.poll() is None
        assert not bad.listening(bad.external)
        md = admin.list_topics(timeout=10)
        assert 4 not in md.brokers
    finally:
        bad.stop()
