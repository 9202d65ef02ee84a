"""End-to-end: client quotas on a real `weir serve`. `weir configs --entity-type clients`
sets a producer_byte_rate quota as kafka-configs.sh does, `--describe` shows it as
kafka-configs.sh prints it, and a confluent-kafka producer writing as fast as it can is held
to that rate (the broker answers with throttle_time_ms and mutes the connection, KIP-219).

The broker measures over 2 windows of 1 s (`quota.window.num=2`) so that the first burst a
quota allows (one span) is short; the rate is taken over the 5 s after the first second."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer

from conftest import own_broker, run_weir

QUOTA = 200 * 1024  # bytes per second
WINDOWS = "quota.window.num=2\nquota.window.size.seconds=1\n"


weir = run_weir


@pytest.fixture
def quota_broker(request, tmp_path):
    return own_broker(request, tmp_path, WINDOWS, "needs its own broker with short quota windows")


def test_configs_cli_sets_describes_and_refuses_quotas(quota_broker):
    binary, server = quota_broker.binary, ["--bootstrap-server", quota_broker.bootstrap]
    done = weir(binary, "configs", *server, "--alter", "--entity-type", "users",
                "--entity-name", "alice", "--entity-type", "clients", "--entity-default",
                "--add-config", "consumer_byte_rate=2048,request_percentage=12.5").stdout
    assert "Completed updating config for user-principal 'alice', the default client-id" in done
    shown = weir(binary, "configs", *server, "--describe", "--entity-type", "users",
                 "--entity-name", "alice", "--entity-type", "clients").stdout
    assert ("Quota configs for user-principal 'alice', the default client-id are "
            "consumer_byte_rate=2048.0, request_percentage=12.5") in shown, shown
    # Users alone (strict, as kafka-configs.sh asks) do not list alice's client entity.
    assert weir(binary, "configs", *server, "--describe", "--entity-type", "users").stdout == ""
    bad = weir(binary, "configs", *server, "--alter", "--user", "bob", "--add-config",
               "producer_byte_rate=1.5", ok=False)
    assert bad.returncode != 0 and "must be a Long value" in bad.stderr, bad.stderr
    weir(binary, "configs", *server, "--alter", "--user", "alice", "--client-defaults",
         "--delete-config", "consumer_byte_rate,request_percentage")
    assert weir(binary, "configs", *server, "--describe", "--user", "alice",
                "--client-defaults").stdout == ""


def test_a_producer_is_held_to_its_producer_byte_rate(quota_broker):
    binary, bootstrap = quota_broker.binary, quota_broker.bootstrap
    weir(binary, "topics", "--bootstrap", bootstrap, "create", "throttled")
    weir(binary, "configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type",
         "clients", "--entity-name", "quota-test", "--add-config",
         f"producer_byte_rate={QUOTA}")
    shown = weir(binary, "configs", "--bootstrap-server", bootstrap, "--describe",
                 "--entity-type", "clients").stdout
    assert f"Quota configs for client-id 'quota-test' are producer_byte_rate={QUOTA}.0" in shown

    throttles: list[float] = []  # seconds, as the broker's throttle_time_ms told the client

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "quota-test",
                         "linger.ms": 5, "acks": 1,
                         # A small queue: what is left unsent at the end is dropped quickly.
                         "queue.buffering.max.kbytes": 1024,
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    acked: list[tuple[float, int]] = []
    lock = threading.Lock()

    def delivered(err, msg):
        if err is not None:
            return  # purged at the end
        with lock:
            acked.append((time.monotonic(), len(msg.value())))

    value = b"x" * 1000
    start = time.monotonic()
    while time.monotonic() - start < 6.0:
        try:
            producer.produce("throttled", value, on_delivery=delivered)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    producer.purge(in_queue=True, in_flight=False)
    producer.flush(5)
    with lock:
        window = [n for (t, n) in acked if start + 1.0 <= t < start + 6.0]
    rate = sum(window) / 5.0
    print(f"producer_byte_rate={QUOTA}: measured {rate:.0f} B/s of values "
          f"({rate / QUOTA:.2f} of the quota)")
    # The broker held the producer back by telling it to wait (KIP-219), not by being slow.
    assert throttles and max(throttles) > 0, "no throttle_time_ms reached the client"
    # Request bytes (what the quota counts) exceed the values by the batch and request
    # overheads, a few percent. The upper bound is the quota's promise. The rate comes in
    # bursts (one per throttle), and a 5 s window holds only a few of them, so where the
    # window cuts moves the figure: CI measured 0.72 of the quota once, this machine 0.97-1.02.
    # The lower bound only catches a quota throttling far below its rate.
    assert 0.5 * QUOTA <= rate <= 1.2 * QUOTA, rate
