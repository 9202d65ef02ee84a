"""Fixtures for Weir's end-to-end tests with real Kafka client libraries.

The `broker` fixture starts the Weir binary the way a Kafka KRaft user would:
`weir serve --config server.properties`, with a properties file written into a
fresh pytest tmp dir, and hands the test a `WeirBroker` with `bootstrap`,
`restart()` (clean SIGTERM, expects exit code 0), `kill9()` (SIGKILL) and
`stop()`.

Environment:
  WEIR_BIN             broker binary (default target/release/weir, relative to the
                       repo root unless absolute).
  WEIR_E2E_BOOTSTRAP   host:port of an already running Kafka-compatible broker.
                       When set, no binary is started; tests run against that
                       broker and every step that needs restart()/kill9() is
                       skipped. Used to check the client-side code against other
                       brokers (e.g. the librdkafka mock cluster).

On a failing test (setup, call or teardown) the last 100 lines of the broker's
log are attached to the pytest report ("log below"), so CI output shows what the
broker did.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
LOG_TAIL_LINES = 100

SERVER_PROPERTIES = """\
node.id=1
process.roles=broker,controller
listeners=PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{broker_port}
controller.listener.names=CONTROLLER
controller.quorum.voters=1@127.0.0.1:{controller_port}
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs={data_dir}
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
auto.create.topics.enable=true
# The KIP-134 wait (3 s) only slows tests: groups here form as members arrive.
group.initial.rebalance.delay.ms=0
# Consumer-protocol (KIP-848) members heartbeat at the broker's interval (default 5 s).
group.consumer.heartbeat.interval.ms=500
group.consumer.session.timeout.ms=6000
# Kafka's floors (5 s, 45 s) would refuse the two above, as a Kafka broker does.
group.consumer.min.heartbeat.interval.ms=500
group.consumer.min.session.timeout.ms=6000
"""


def pick_free_ports(count: int) -> list[int]:
    """Distinct free TCP ports on 127.0.0.1 (bind port 0, read it, close)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def port_accepts_connections(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def parse_host_port(bootstrap: str) -> tuple[str, int]:
    first = bootstrap.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    return host, int(port)


def weir_binary() -> Path:
    path = Path(os.environ.get("WEIR_BIN", "target/release/weir"))
    if not path.is_absolute():
        path = REPO_ROOT / path
    return path


class WeirBroker:
    """One Weir process on fixed ports, config and data dir; restartable."""

    can_restart = True
    default_partitions = 1  # num.partitions in SERVER_PROPERTIES

    def __init__(self, binary: Path, workdir: Path):
        self.binary = binary
        self.workdir = workdir
        self.host = "127.0.0.1"
        self.port, self.controller_port = pick_free_ports(2)
        self.bootstrap = f"{self.host}:{self.port}"
        self.data_dir = workdir / "data"
        self.config_path = workdir / "server.properties"
        self.log_path = workdir / "weir.log"
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.config_path.write_text(SERVER_PROPERTIES.format(
            broker_port=self.port,
            controller_port=self.controller_port,
            data_dir=self.data_dir,
        ))

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> None:
        assert self.proc is None, "broker already running"
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== e2e: start #{self.starts}: {self.binary} serve "
                      f"--config {self.config_path} =====\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                [str(self.binary), "serve", "--config", str(self.config_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,  # a Ctrl-C in the terminal is not a SIGINT to the broker
            )
        self._wait_until_serving()

    def _wait_until_serving(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            rc = self.proc.poll()
            if rc is not None:
                self.proc = None
                raise AssertionError(
                    f"weir exited with code {rc} during startup (log below)")
            if port_accepts_connections(self.host, self.port):
                return
            time.sleep(0.1)
        self._kill()
        raise AssertionError(
            f"weir did not accept connections on {self.bootstrap} within "
            f"{START_TIMEOUT_S:.0f} s (log below)")

    def stop(self) -> int:
        """SIGTERM and wait (bounded) for exit; returns the exit code."""
        assert self.proc is not None, "broker not running"
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._kill()
            raise AssertionError(
                f"weir did not exit within {STOP_TIMEOUT_S:.0f} s of SIGTERM "
                f"(killed; log below)") from None
        self.proc = None
        return rc

    def restart(self) -> None:
        """Clean shutdown (SIGTERM, must exit 0), then start on the same config and data."""
        rc = self.stop()
        assert rc == 0, f"weir exited with code {rc} after SIGTERM (log below)"
        self.start()

    def kill9(self) -> None:
        """SIGKILL (no chance to flush or close anything), then start again."""
        assert self.proc is not None, "broker not running"
        self._kill()
        self.start()

    def _kill(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pass
        self.proc = None

    def close(self) -> None:
        self._kill()

    # -- diagnostics -------------------------------------------------------

    def status(self) -> str:
        if self.proc is None:
            return "not running"
        rc = self.proc.poll()
        return f"running, pid {self.proc.pid}" if rc is None else f"exited with code {rc}"

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 256 * 1024))
                text = f.read().decode("utf-8", errors="replace")
        except FileNotFoundError:
            return "(no broker log)"
        tail = text.splitlines()[-lines:]
        return f"--- last {len(tail)} lines of {self.log_path} ---\n" + "\n".join(tail)


class ExternalBroker:
    """A broker someone else runs (WEIR_E2E_BOOTSTRAP): no restarts, no log."""

    can_restart = False
    default_partitions = None  # its own num.partitions, unknown here

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap
        self.host, self.port = parse_host_port(bootstrap)

    def _skip(self, what: str):
        pytest.skip(f"{what} needs a broker started by the fixture "
                    f"(WEIR_E2E_BOOTSTRAP={self.bootstrap} is external)")

    def restart(self) -> None:
        self._skip("restart()")

    def kill9(self) -> None:
        self._skip("kill9()")

    def stop(self) -> int:
        self._skip("stop()")

    def close(self) -> None:
        pass

    def status(self) -> str:
        return f"external broker at {self.bootstrap}"

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return "(external broker: no log)"


def run_weir(binary, *args: str, stdin: str | None = None, ok: bool = True):
    """Runs the `weir` CLI; with `ok`, fails the test (with its stderr) unless it exits 0."""
    out = subprocess.run([str(binary), *args], input=stdin, capture_output=True, text=True,
                         timeout=30)
    if ok:
        assert out.returncode == 0, f"weir {' '.join(args)} failed: {out.stderr.strip()}"
    return out


def own_broker(request, tmp_path, extra_config: str, why: str) -> WeirBroker:
    """A started broker of this test's own, with `extra_config` appended to its
    server.properties (skipped against an external broker: `why` says what it needs)."""
    if os.environ.get("WEIR_E2E_BOOTSTRAP"):
        pytest.skip(why)
    b = WeirBroker(weir_binary(), tmp_path)
    with open(b.config_path, "a") as f:
        f.write(extra_config)
    request.node._weir_broker = b
    request.addfinalizer(b.close)
    b.start()
    return b


@pytest.fixture
def broker(request, tmp_path):
    external = os.environ.get("WEIR_E2E_BOOTSTRAP")
    if external:
        b = ExternalBroker(external)
    else:
        binary = weir_binary()
        if not binary.is_file():
            pytest.fail(f"broker binary {binary} not found: build it with "
                        f"`cargo build --release` or set WEIR_BIN", pytrace=False)
        b = WeirBroker(binary, tmp_path)
    request.node._weir_broker = b  # read by pytest_runtest_makereport below
    request.addfinalizer(b.close)  # always kill the process, whatever happened
    if isinstance(b, WeirBroker):
        b.start()
    return b


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Attach the broker log tail to the report of any failed phase."""
    report = yield
    b = getattr(item, "_weir_broker", None)
    if b is not None and report.failed:
        report.sections.append(
            (f"weir broker ({b.status()}) log", b.log_tail()))
    return report
