"""Real clients against secure listeners: confluent-kafka (librdkafka with its own OpenSSL)
over SASL_SSL with SCRAM-SHA-512 and PLAIN, and over mTLS (SSL with ssl.client.auth=required),
with ACLs per principal (alice may write, bob may not). Certificates come from the openssl CLI
at run time; nothing secret is checked in.

Run: `WEIR_BIN=target/debug/weir pytest tests/e2e/test_security.py` (needs `openssl` and
`pip install confluent-kafka`).
"""

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from certs import free_ports, key_store, make_ca, make_leaf

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic, ResourcePatternType,
    ResourceType, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion,
)

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("WEIR_BIN", ROOT / "target/release/weir"))
if not BIN.is_absolute():
    BIN = ROOT / BIN


def make_certs(d: Path):
    make_ca(d)
    make_leaf(d, "broker", "/CN=broker0", "serverAuth", "DNS:localhost,IP:127.0.0.1")
    key_store(d, "broker")
    make_leaf(d, "alice", "/C=US/O=Acme/OU=eng/CN=alice", "clientAuth", None)
    make_leaf(d, "bob", "/C=US/O=Acme/OU=eng/CN=bob", "clientAuth", None)
    make_leaf(d, "admin", "/C=US/O=Acme/OU=ops/CN=admin", "clientAuth", None)


class Broker:
    def __init__(self, d: Path, props: str, port: int):
        self.port = port
        (d / "server.properties").write_text(props)
        self.log = open(d / "weir.log", "wb")
        self.proc = subprocess.Popen([str(BIN), "serve", "--config", str(d / "server.properties")],
                                     cwd=d, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, (d / "weir.log").read_text()[-3000:]
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.1)
        raise AssertionError("weir did not listen")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


BASE = """node.id=1
process.roles=broker,controller
controller.listener.names=CONTROLLER
controller.quorum.voters=1@127.0.0.1:{cport}
log.dirs={d}/data
offsets.topic.replication.factor=1
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:admin
ssl.keystore.type=PEM
ssl.keystore.location={d}/broker-store.pem
ssl.truststore.type=PEM
ssl.truststore.location={d}/ca.pem
"""


def produce(conf, topic):
    """Delivers one record; the error (or None)."""
    errors = []
    p = Producer({**conf, "message.timeout.ms": 4000, "socket.timeout.ms": 3000})
    p.produce(topic, b"v", callback=lambda e, m: errors.append(e))
    p.flush(15)
    return errors[0] if errors else "not delivered"


@pytest.fixture
def certs(tmp_path):
    make_certs(tmp_path)
    return tmp_path


def test_sasl_ssl_scram_sha512_and_acls_per_principal(certs):
    d = certs
    port, cport = free_ports(2)
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'user_admin="admin-secret";')
    broker = Broker(d, BASE.format(d=d, cport=cport) + f"""listeners=CLIENT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}
listener.security.protocol.map=CLIENT:SASL_SSL,CONTROLLER:PLAINTEXT
inter.broker.listener.name=CLIENT
sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN
listener.name.client.plain.sasl.jaas.config={jaas}
""", port)
    try:
        tls = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_SSL",
               "ssl.ca.location": str(d / "ca.pem")}
        admin_conf = {**tls, "sasl.mechanism": "PLAIN", "sasl.username": "admin",
                      "sasl.password": "admin-secret"}
        admin = AdminClient(admin_conf)
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
        ups = [UserScramCredentialUpsertion(u, info, f"{u}-secret".encode()) for u in ("alice", "bob")]
        for f in admin.alter_user_scram_credentials(ups).values():
            f.result(15)
        for f in admin.create_topics([NewTopic("orders", 1, 1)]).values():
            f.result(15)
        acl = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice",
                         "*", AclOperation.WRITE, AclPermissionType.ALLOW)
        for f in admin.create_acls([acl]).values():
            f.result(15)

        def scram(user, password):
            return {**tls, "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user,
                    "sasl.password": password}

        assert produce(scram("alice", "alice-secret"), "orders") is None
        err = produce(scram("bob", "bob-secret"), "orders")
        assert err is not None and err.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED, err
        err = produce(scram("alice", "wrong"), "orders")
        assert err is not None, "a wrong password must not deliver"
        err = produce(scram("mallory", "x"), "orders")
        assert err is not None, "an unknown user must not deliver"
        # A PLAINTEXT client on the TLS port gets nowhere, and the broker stays up.
        err = produce({"bootstrap.servers": f"127.0.0.1:{port}"}, "orders")
        assert err is not None
        assert broker.proc.poll() is None
    finally:
        broker.stop()
    log = (d / "weir.log").read_text()
    assert "panicked" not in log


def test_mtls_principal_from_the_certificate(certs):
    d = certs
    port, cport = free_ports(2)
    broker = Broker(d, BASE.format(d=d, cport=cport) + f"""listeners=MTLS://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}
listener.security.protocol.map=MTLS:SSL,CONTROLLER:PLAINTEXT
inter.broker.listener.name=MTLS
ssl.client.auth=required
ssl.principal.mapping.rules=RULE:^CN=([^,]+),.*$/$1/,DEFAULT
""", port)
    try:
        def tls(who):
            return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
                    "ssl.ca.location": str(d / "ca.pem"),
                    "ssl.certificate.location": str(d / f"{who}.pem"),
                    "ssl.key.location": str(d / f"{who}.key")}
        # CN=admin maps to User:admin, a super user: it sets up the topic and alice's ACL.
        admin = AdminClient(tls("admin"))
        for f in admin.create_topics([NewTopic("orders", 1, 1)]).values():
            f.result(15)
        acl = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice",
                         "*", AclOperation.WRITE, AclPermissionType.ALLOW)
        for f in admin.create_acls([acl]).values():
            f.result(15)
        assert produce(tls("alice"), "orders") is None
        err = produce(tls("bob"), "orders")
        assert err is not None and err.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED, err
        nocert = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
                  "ssl.ca.location": str(d / "ca.pem")}
        assert produce(nocert, "orders") is not None
        assert broker.proc.poll() is None
    finally:
        broker.stop()
    log = (d / "weir.log").read_text()
    assert "panicked" not in log
