"""Real clients against secure listeners: confluent-kafka (librdkafka with its own OpenSSL)
over SASL_SSL with SCRAM-SHA-512 and PLAIN, and over mTLS (SSL with ssl.client.auth=required),
with ACLs per principal (alice may write, bob may not). Certificates come from the openssl CLI
at run time; nothing secret is checked in.

Run: `WEIR_BIN=target/debug/weir pytest tests/e2e/test_security.py` (needs `openssl` and
`pip install confluent-kafka`).
"""

import logging
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


def oauth(port, d, config, **extra):
    """confluent-kafka over SASL_SSL with an unsecured OAUTHBEARER token
    (`sasl.oauthbearer.config` is librdkafka's: principal=..., scope=..., lifeSeconds=...)."""
    return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(d / "ca.pem"), "sasl.mechanism": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": True, "sasl.oauthbearer.config": config,
            **extra}


def test_sasl_ssl_oauthbearer_unsecured_jwt_and_acls(certs):
    """KIP-255's unsecured tokens: the principal is the token's `sub`, ACLs apply to it, a
    token without the listener's required scope is refused; a token that expires mid-session
    (3 s) makes librdkafka re-authenticate on the same connection (KIP-368) and keep
    producing and consuming."""
    d = certs
    port, cport = free_ports(2)
    plain = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
             'user_admin="admin-secret";')
    bearer = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
              'unsecuredValidatorRequiredScope="kafka";')
    broker = Broker(d, BASE.format(d=d, cport=cport) + f"""listeners=CLIENT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}
listener.security.protocol.map=CLIENT:SASL_SSL,CONTROLLER:PLAINTEXT
inter.broker.listener.name=CLIENT
sasl.enabled.mechanisms=OAUTHBEARER,PLAIN
sasl.mechanism.inter.broker.protocol=PLAIN
listener.name.client.plain.sasl.jaas.config={plain}
listener.name.client.oauthbearer.sasl.jaas.config={bearer}
group.initial.rebalance.delay.ms=0
""", port)
    try:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_SSL",
                             "ssl.ca.location": str(d / "ca.pem"), "sasl.mechanism": "PLAIN",
                             "sasl.username": "admin", "sasl.password": "admin-secret"})
        for f in admin.create_topics([NewTopic("orders", 1, 1)]).values():
            f.result(15)
        acls = [AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice",
                           "*", op, AclPermissionType.ALLOW)
                for op in (AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE)]
        acls.append(AclBinding(ResourceType.GROUP, "alice-group", ResourcePatternType.LITERAL,
                               "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW))
        for f in admin.create_acls(acls).values():
            f.result(15)

        assert produce(oauth(port, d, "principal=alice scope=kafka"), "orders") is None
        # `weir`'s own client logs in the same way (--command-config), as the super user here.
        cli = d / "oauth-admin.properties"
        cli.write_text("security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\n"
                       "sasl.oauthbearer.config=principal=admin scope=kafka\n"
                       f"ssl.truststore.type=PEM\nssl.truststore.location={d / 'ca.pem'}\n")
        r = subprocess.run([str(BIN), "topics", "--bootstrap", f"127.0.0.1:{port}", "list",
                            "--command-config", str(cli)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and "orders" in r.stdout.split(), r.stderr
        err = produce(oauth(port, d, "principal=bob scope=kafka"), "orders")
        assert err is not None and err.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED, err
        err = produce(oauth(port, d, "principal=alice scope=other"), "orders")
        assert err is not None, "a token without the required scope must not deliver"

        # Tokens of 3 s: the broker bounds each session by the token's exp, librdkafka
        # refreshes its token and re-authenticates at 90 % of it, on the same connection.
        logger = logging.getLogger("oauth-reauth")
        logger.addHandler(logging.NullHandler())
        logger.setLevel(logging.DEBUG)
        seen = []

        class Collect(logging.Handler):
            def emit(self, record):
                if "-> REAUTH" in record.getMessage():
                    seen.append(record.getMessage())

        logger.addHandler(Collect())
        p = Producer(oauth(port, d, "principal=alice scope=kafka lifeSeconds=3",
                           debug="broker", logger=logger, **{"message.timeout.ms": 20000}))
        errors, delivered = [], []
        deadline = time.monotonic() + 8
        n = 0
        while time.monotonic() < deadline:
            p.produce("orders", f"r{n}".encode(),
                      callback=lambda e, m: (errors if e else delivered).append(e or m.offset()))
            n += 1
            p.poll(0.05)
        p.flush(20)
        assert not errors, errors[:3]
        assert len(delivered) == n
        assert len(seen) >= 2, f"librdkafka re-authenticated {len(seen)} times in 8 s of 3 s tokens"

        c = ck.Consumer(oauth(port, d, "principal=alice scope=kafka lifeSeconds=3",
                              **{"group.id": "alice-group", "auto.offset.reset": "earliest"}))
        c.subscribe(["orders"])
        got = 0
        deadline = time.monotonic() + 20
        while got < n + 1 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got += 1
        c.close()
        assert got == n + 1, f"consumed {got} of {n + 1}"
        assert broker.proc.poll() is None
    finally:
        broker.stop()
    log = (d / "weir.log").read_text()
    assert "panicked" not in log
