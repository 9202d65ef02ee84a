"""End-to-end: `weir serve` with two `log.dirs` (JBOD, KIP-858). Each directory is formatted
with its own `directory.id`, a topic's partitions are spread over both, `weir log-dirs
--describe` prints what kafka-log-dirs.sh prints (sizes included), and a restart finds every
partition where it was."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time

import pytest

from conftest import WeirBroker, weir_binary


def weir(binary, *args: str, stdin: str | None = None):
    out = subprocess.run([str(binary), *args], input=stdin, capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, f"weir {' '.join(args)} failed: {out.stderr.strip()}"
    return out.stdout


@pytest.fixture
def jbod(request, tmp_path):
    if os.environ.get("WEIR_E2E_BOOTSTRAP"):
        pytest.skip("needs its own broker with two log directories")
    b = WeirBroker(weir_binary(), tmp_path)
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    text = b.config_path.read_text()
    text = re.sub(r"(?m)^log\.dirs=.*$", "log.dirs=" + ",".join(map(str, dirs)), text)
    b.config_path.write_text(text)
    request.node._weir_broker = b
    request.addfinalizer(b.close)
    b.start()
    return b, dirs


def describe(binary, bootstrap, *more):
    out = weir(binary, "log-dirs", "--bootstrap-server", bootstrap, "--describe", *more)
    lines = out.strip().splitlines()
    assert lines[0] == "Querying brokers for log directories information", out
    assert lines[1].startswith("Received log directory information from brokers "), out
    return json.loads(lines[2])


def placement(report):
    [broker] = report["brokers"]
    return {d["logDir"]: sorted(p["partition"] for p in d["partitions"])
            for d in broker["logDirs"]}


def test_partitions_spread_over_two_log_dirs_and_stay_there(jbod):
    broker, dirs = jbod
    binary, bootstrap = broker.binary, broker.bootstrap
    ids = [re.search(r"(?m)^directory\.id=(\S+)$", (d / "meta.properties").read_text()).group(1)
           for d in dirs]
    assert len(set(ids)) == 2, ids

    weir(binary, "topics", "--bootstrap", bootstrap, "create", "spread", "--partitions", "4")
    weir(binary, "produce", "--bootstrap", bootstrap, "--partition", "1", "spread",
         stdin="a\nb\nc\n")
    report = describe(binary, bootstrap, "--topic-list", "spread")
    assert report["version"] == 1
    placed = placement(report)
    assert sorted(placed) == sorted(map(str, dirs)), placed
    assert [len(v) for v in placed.values()] == [2, 2], placed
    for d in report["brokers"][0]["logDirs"]:
        assert d["error"] is None
        for p in d["partitions"]:
            assert p["offsetLag"] == 0 and p["isFuture"] is False
            assert (p["size"] > 0) == (p["partition"] == "spread-1"), p
    for path, partitions in placed.items():
        for p in partitions:
            assert os.path.isdir(os.path.join(path, p)), (path, p)
    # --topic-list filters; JSON alone with --output json.
    other = json.loads(weir(binary, "--output", "json", "log-dirs", "--bootstrap-server",
                            bootstrap, "--describe", "--topic-list", "nothing-here"))
    assert all(d["partitions"] == [] for d in other["brokers"][0]["logDirs"]), other

    broker.restart()
    assert placement(describe(binary, bootstrap, "--topic-list", "spread")) == placed
    consumed = weir(binary, "consume", "--bootstrap", bootstrap, "--partition", "1", "spread")
    assert [line.split("\t")[-1] for line in consumed.strip().splitlines()] == ["a", "b", "c"]


def test_reassign_log_dirs_moves_a_replica_to_the_other_directory(jbod, tmp_path):
    """kafka-reassign-partitions.sh's `log_dirs`: `weir reassign --execute` sends
    AlterReplicaLogDirs, `--verify` reports the move, and the replica ends in the named
    directory with every record, nothing of it left in the old one."""
    broker, dirs = jbod
    binary, bootstrap = broker.binary, broker.bootstrap
    weir(binary, "topics", "--bootstrap", bootstrap, "create", "moving", "--partitions", "1")
    values = [f"v{i}-" + "x" * 100 for i in range(2000)]
    weir(binary, "produce", "--bootstrap", bootstrap, "--partition", "0", "moving",
         stdin="\n".join(values) + "\n")
    placed = placement(describe(binary, bootstrap, "--topic-list", "moving"))
    [source] = [d for d, ps in placed.items() if ps == ["moving-0"]]
    [dest] = [d for d in placed if d != source]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "moving", "partition": 0, "replicas": [1], "log_dirs": [dest]}]}))
    out = weir(binary, "reassign", "--bootstrap-server", bootstrap, "--execute",
               "--reassignment-json-file", str(plan))
    assert "Successfully started log directory move for: moving-0-1" in out, out
    deadline = time.monotonic() + 30
    while True:
        out = weir(binary, "reassign", "--bootstrap-server", bootstrap, "--verify",
                   "--reassignment-json-file", str(plan))
        if "Reassignment of replica moving-0-1 completed successfully." in out:
            break
        assert time.monotonic() < deadline, out
        time.sleep(0.2)
    assert placement(describe(binary, bootstrap, "--topic-list", "moving")) == {
        source: [], dest: ["moving-0"]}
    assert not [n for n in os.listdir(source) if n.startswith("moving-0")], os.listdir(source)
    consumed = weir(binary, "consume", "--bootstrap", bootstrap, "--partition", "0", "--max",
                    str(len(values)), "moving")
    assert [line.split("\t")[-1] for line in consumed.strip().splitlines()] == values
    # A path that is not one of the broker's directories: Kafka's error.
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "moving", "partition": 0, "replicas": [1], "log_dirs": ["/not/a/dir"]}]}))
    out = subprocess.run([str(binary), "reassign", "--bootstrap-server", bootstrap, "--execute",
                          "--reassignment-json-file", str(plan)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode != 0 and "LogDirNotFound" in out.stderr, out
