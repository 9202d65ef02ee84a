"""`weir`'s client commands against secure listeners: `--command-config` with Kafka's client
properties (SASL_PLAINTEXT with PLAIN for the admin, SASL_SSL with SCRAM-SHA-256 for a user),
users' SCRAM credentials managed with `weir configs --entity-type users` as
`kafka-configs.sh` does (salted by the CLI), then used by `weir topics` and by
confluent-kafka; a wrong password or a bad properties file is a clear error and a non-zero
exit. Also `weir format --add-scram`: a node formatted with it accepts that SCRAM login at its
first start.

Run: `WEIR_BIN=target/debug/weir pytest tests/e2e/test_cli_security.py` (needs `openssl` and
`pip install confluent-kafka`).
"""

import subprocess
import time
from pathlib import Path

import pytest

from certs import free_ports, key_store, make_ca, make_leaf
from test_security import BIN, Broker, produce

ck = pytest.importorskip("confluent_kafka")

PLAIN = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
         'username="{u}" password="{p}";')
SCRAM = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
         'username="{u}" password="{p}";')

BASE = """node.id=1
process.roles=broker,controller
controller.listener.names=CONTROLLER
controller.quorum.voters=1@127.0.0.1:{cport}
log.dirs={d}/data
offsets.topic.replication.factor=1
listeners=CLIENT://127.0.0.1:{port},ADMIN://127.0.0.1:{aport},MTLS://127.0.0.1:{mport},CONTROLLER://127.0.0.1:{cport}
listener.security.protocol.map=CLIENT:SASL_SSL,ADMIN:SASL_PLAINTEXT,MTLS:SSL,CONTROLLER:PLAINTEXT
listener.name.mtls.ssl.client.auth=required
ssl.truststore.type=PEM
ssl.truststore.location={d}/ca.pem
inter.broker.listener.name=ADMIN
sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN
listener.name.admin.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";
listener.name.client.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";
ssl.keystore.type=PEM
ssl.keystore.location={d}/broker-store.pem
"""


def weir(*args, config=None):
    cmd = [str(BIN), *args] + (["--command-config", str(config)] if config else [])
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def props(d: Path, name, text):
    path = d / f"{name}.properties"
    path.write_text(text)
    return path


def scram_props(d: Path, name, user, password, mechanism="SCRAM-SHA-256"):
    return props(d, name, f"""security.protocol=SASL_SSL
sasl.mechanism={mechanism}
sasl.jaas.config={SCRAM.format(u=user, p=password)}
ssl.truststore.type=PEM
ssl.truststore.location={d}/ca.pem
""")


@pytest.fixture
def certs(tmp_path):
    make_ca(tmp_path)
    make_leaf(tmp_path, "broker", "/CN=broker0", "serverAuth", "DNS:localhost,IP:127.0.0.1")
    key_store(tmp_path, "broker")
    make_leaf(tmp_path, "alice", "/CN=alice", "clientAuth", None)
    key_store(tmp_path, "alice")
    return tmp_path


def test_scram_user_from_the_cli_then_used_by_weir_and_confluent_kafka(certs):
    d = certs
    port, aport, mport, cport = free_ports(4)
    broker = Broker(d, BASE.format(d=d, port=port, aport=aport, mport=mport, cport=cport), port)
    admin_bs = f"127.0.0.1:{aport}"
    bs = f"127.0.0.1:{port}"
    try:
        admin = props(d, "admin", f"""security.protocol=SASL_PLAINTEXT
sasl.mechanism=PLAIN
sasl.jaas.config={PLAIN.format(u="admin", p="admin-secret")}
""")
        users = ["configs", "--bootstrap-server", admin_bs, "--entity-type", "users",
                 "--entity-name", "alice"]
        r = weir(*users, "--alter", "--add-config",
                 "SCRAM-SHA-256=[iterations=8192,password=alice-secret],"
                 "SCRAM-SHA-512=[password=other]", config=admin)
        assert r.returncode == 0, r.stderr
        assert "Completed updating config for user-principal 'alice'." in r.stdout
        r = weir(*users, "--describe", config=admin)
        assert r.returncode == 0, r.stderr
        assert ("SCRAM credential configs for user-principal 'alice' are "
                "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096") in r.stdout
        # The quota path of the same entity still works, beside the credentials.
        r = weir(*users, "--alter", "--add-config", "producer_byte_rate=1048576",
                 "--delete-config", "SCRAM-SHA-512", config=admin)
        assert r.returncode == 0, r.stderr
        r = weir(*users, "--describe", config=admin)
        assert "producer_byte_rate=1048576.0" in r.stdout, r.stdout
        assert r.stdout.strip().endswith("SCRAM-SHA-256=iterations=8192"), r.stdout
        # Without the admin's properties the SASL listener does not serve the CLI.
        r = weir(*users, "--describe")
        assert r.returncode != 0 and "give --command-config" in r.stderr, r.stderr

        alice = scram_props(d, "alice", "alice", "alice-secret")
        r = weir("topics", "--bootstrap", bs, "create", "orders", config=alice)
        assert r.returncode == 0, r.stderr
        r = weir("topics", "--bootstrap", bs, "list", config=alice)
        assert r.returncode == 0 and "orders" in r.stdout.split(), r.stderr
        r = weir("get-offsets", "--bootstrap-server", bs, "--topic", "orders", config=alice)
        assert r.returncode == 0, r.stderr

        tls = {"bootstrap.servers": bs, "security.protocol": "SASL_SSL",
               "ssl.ca.location": str(d / "ca.pem"), "sasl.mechanism": "SCRAM-SHA-256"}
        assert produce({**tls, "sasl.username": "alice", "sasl.password": "alice-secret"},
                       "orders") is None
        # The deleted mechanism no longer logs in.
        err = produce({**tls, "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
                       "sasl.password": "other"}, "orders")
        assert err is not None

        # A wrong password: Kafka's error, a non-zero exit, no panic.
        wrong = scram_props(d, "wrong", "alice", "nope")
        r = weir("topics", "--bootstrap", bs, "list", config=wrong)
        assert r.returncode != 0
        assert "SaslAuthenticationFailed" in r.stderr, r.stderr
        assert "panicked" not in r.stderr

        # A plaintext client on the TLS port is told what it is talking to.
        r = weir("topics", "--bootstrap", bs, "list")
        assert r.returncode != 0 and "answered with TLS" in r.stderr, r.stderr

        # Bad properties: the error names the key; unknown keys are warned about.
        bad = props(d, "bad", "security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n"
                    f"sasl.jaas.config={SCRAM.format(u='a', p='b')}\n")
        r = weir("topics", "--bootstrap", bs, "list", config=bad)
        assert r.returncode != 0 and "sasl.mechanism" in r.stderr, r.stderr
        assert "panicked" not in r.stderr
        notrust = props(d, "notrust", "security.protocol=SSL\n")
        r = weir("topics", "--bootstrap", bs, "list", config=notrust)
        assert r.returncode != 0 and "ssl.truststore.location" in r.stderr, r.stderr
        extra = props(d, "extra", alice.read_text() + "client.id=x\n")
        r = weir("topics", "--bootstrap", bs, "list", config=extra)
        assert r.returncode == 0, r.stderr
        assert "The configuration 'client.id' was supplied but isn't a known config." in r.stderr

        # mTLS: the key store is the client certificate; without one the listener refuses.
        mtls = props(d, "mtls", f"""security.protocol=SSL
ssl.truststore.type=PEM
ssl.truststore.location={d}/ca.pem
ssl.keystore.type=PEM
ssl.keystore.location={d}/alice-store.pem
""")
        r = weir("topics", "--bootstrap", f"127.0.0.1:{mport}", "list", config=mtls)
        assert r.returncode == 0 and "orders" in r.stdout.split(), r.stderr
        tls_only = props(d, "tlsonly", f"security.protocol=SSL\nssl.truststore.location={d}/ca.pem\n")
        r = weir("topics", "--bootstrap", f"127.0.0.1:{mport}", "list", config=tls_only)
        assert r.returncode != 0 and "panicked" not in r.stderr, r.stderr
        assert broker.proc.poll() is None
    finally:
        broker.stop()
    assert "panicked" not in (d / "weir.log").read_text()


def test_format_add_scram_logs_in_at_first_start(certs):
    d = certs
    port, aport, mport, cport = free_ports(4)
    (d / "server.properties").write_text(BASE.format(d=d, port=port, aport=aport, mport=mport,
                                                     cport=cport))
    r = weir("format", "--config", str(d / "server.properties"), "--random-cluster-id",
             "--add-scram", "SCRAM-SHA-512=[name=carol,password=carol-secret]",
             "--add-scram", "SCRAM-SHA-256=[name=carol,iterations=8192,password=c2]")
    assert r.returncode == 0, r.stderr
    bad = weir("format", "--config", str(d / "server.properties"), "--cluster-id",
               r.stdout.strip(), "--add-scram", "SCRAM-SHA-512=[password=x]")
    assert bad.returncode != 0 and "name" in bad.stderr, bad.stderr
    broker = Broker(d, (d / "server.properties").read_text(), port)
    try:
        carol = scram_props(d, "carol", "carol", "carol-secret", "SCRAM-SHA-512")
        deadline = time.monotonic() + 20
        while True:
            r = weir("topics", "--bootstrap", f"127.0.0.1:{port}", "list", config=carol)
            if r.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert r.returncode == 0, r.stderr
        carol256 = scram_props(d, "carol256", "carol", "c2")
        assert weir("topics", "--bootstrap", f"127.0.0.1:{port}", "list",
                    config=carol256).returncode == 0
    finally:
        broker.stop()
