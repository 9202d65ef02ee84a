"""`weir format --add-scram` on a secure three-node cluster: the brokers' SCRAM-SHA-512
credential exists only because every node was formatted with it (nobody creates it), yet the
inter-broker listener (SASL_SSL, SCRAM-SHA-512) works from the first start: followers
replicate a topic of replication factor 3, so an acks=all produce is acknowledged. The admin
uses `weir topics --command-config` over the mTLS listener. Reuses the cluster of
test_secure_cluster.py.

Run: `WEIR_BIN=target/debug/weir pytest tests/e2e/test_format_scram_cluster.py` (needs
`openssl` and `pip install confluent-kafka`). About 10 s; like test_secure_cluster.py, not one
of the quick tests.
"""

import base64
import subprocess
import uuid

import pytest

from certs import free_ports, key_store
from test_secure_cluster import (
    BIN, BROKER_PW, Node, external_conf, make_certs, produce_all, stop_all, wait_for,
)

pytest.importorskip("confluent_kafka")


def test_scram_inter_broker_listener_from_the_first_start(tmp_path):
    certs = tmp_path / "certs"
    certs.mkdir()
    make_certs(certs)
    key_store(certs, "admin")
    ports = free_ports(9)
    voters = ",".join(f"{i + 1}@127.0.0.1:{ports[3 * i + 1]}" for i in range(3))
    nodes = [Node(tmp_path, certs, i + 1, ports[3 * i:3 * i + 3], voters) for i in range(3)]
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    for n in nodes:
        subprocess.run([str(BIN), "format", "--config", str(n.config),
                        f"--cluster-id={cluster_id}", "--add-scram",
                        f"SCRAM-SHA-512=[name=broker,password={BROKER_PW}]"],
                       check=True, timeout=30, capture_output=True)
    admin = tmp_path / "admin.properties"
    admin.write_text(f"""security.protocol=SSL
ssl.truststore.location={certs}/ca.pem
ssl.keystore.location={certs}/admin-store.pem
""")
    try:
        for n in nodes:
            n.spawn()
        wait_for("all client listeners open", 60,
                 lambda: all(n.listening(n.internal) and n.listening(n.external)
                             for n in nodes), nodes)
        bs = ",".join(f"127.0.0.1:{n.external}" for n in nodes)
        r = subprocess.run([str(BIN), "topics", "--bootstrap", bs, "--command-config",
                            str(admin), "create", "rf3", "--partitions", "3",
                            "--replication-factor", "3"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        errors = produce_all(external_conf(certs, nodes), "rf3",
                             [f"v{i}".encode() for i in range(10)])
        assert errors and all(e is None for e in errors), errors
        for n in nodes:
            assert "cannot log in" not in n.log(), n.log()[-2000:]
    finally:
        stop_all(nodes)
