#!/usr/bin/env python3
"""Records real clients' request streams as seeds for the `requests` fuzz target.

Starts the release `weir` binary on a free loopback port, puts a recording proxy in front of
it, and runs kafka-python and confluent-kafka (librdkafka) through a short, bounded session:
create a topic, produce (plain and idempotent), consume, describe configs, delete. What each
client connection wrote to the broker is saved as one seed, `captured-<client>-<n>`, in
fuzz/corpus/requests/ (a client stream is exactly the target's input format).

    .venv/bin/python fuzz/capture.py            # needs target/release/weir and the e2e venv
"""

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "corpus", "requests")
# A seed is at most this long: the fuzzer's -max_len, and small corpora stay small.
MAX_SEED = 65536


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Recorder:
    """A loopback proxy: client -> broker bytes are recorded per connection."""

    def __init__(self, upstream):
        self.upstream = upstream
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.streams = []
        self.lock = threading.Lock()
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.upstream))
            recorded = bytearray()
            with self.lock:
                self.streams.append(recorded)
            threading.Thread(target=pump, args=(client, server, recorded), daemon=True).start()
            threading.Thread(target=pump, args=(server, client, None), daemon=True).start()

    def take(self):
        with self.lock:
            out = [bytes(s) for s in self.streams if s]
            self.streams.clear()
        return out


def pump(src, dst, recorded):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if recorded is not None and len(recorded) < MAX_SEED:
                recorded.extend(data[: MAX_SEED - len(recorded)])
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def whole_frames(stream):
    """Cuts a stream back to whole frames (a recording may end inside one)."""
    at = 0
    while at + 4 <= len(stream):
        size = int.from_bytes(stream[at : at + 4], "big", signed=True)
        if size < 0 or at + 4 + size > len(stream):
            break
        at += 4 + size
    return stream[:at]


def kafka_python_session(bootstrap):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    admin.create_topics([NewTopic("kp", 2, 1, topic_configs={"retention.ms": "600000"})])
    admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp")])
    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
    for i in range(5):
        producer.send("kp", key=b"k%d" % i, value=b"v%d" % i, partition=i % 2)
    producer.flush(10)
    producer.close(5)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=3000
    )
    from kafka import TopicPartition

    consumer.assign([TopicPartition("kp", 0), TopicPartition("kp", 1)])
    got = sum(1 for _, _ in zip(range(5), consumer))
    consumer.close()
    admin.delete_topics(["kp"])
    admin.close()
    return got


def confluent_session(bootstrap):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic("ck", 2, 1)]).values():
        f.result(10)
    for f in admin.describe_configs([ConfigResource("topic", "ck")]).values():
        f.result(10)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "compression.type": "lz4"}
    )
    for i in range(5):
        producer.produce("ck", key=b"k%d" % i, value=b"v%d" % i, partition=i % 2)
    producer.flush(10)
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "capture", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition("ck", 0, 0), TopicPartition("ck", 1, 0)])
    got, deadline = 0, time.time() + 10
    while got < 5 and time.time() < deadline:
        if consumer.poll(0.5) is not None:
            got += 1
    consumer.close()
    for f in admin.delete_topics(["ck"]).values():
        f.result(10)
    return got


def main():
    binary = os.path.join(ROOT, "target", "release", "weir")
    port = free_port()
    # The broker advertises the proxy, so every connection a client opens is recorded.
    recorder = Recorder(port)
    with tempfile.TemporaryDirectory() as data:
        props = os.path.join(data, "server.properties")
        with open(props, "w") as f:
            f.write(
                f"listeners=PLAINTEXT://127.0.0.1:{port}\n"
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{recorder.port}\n"
                f"log.dirs={data}/logs\n"
            )
        broker = subprocess.Popen(
            [binary, "serve", "--config", props], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", port), 0.2).close()
                    break
                except OSError:
                    time.sleep(0.1)
            bootstrap = f"127.0.0.1:{recorder.port}"
            written = 0
            for client, session in (("kafka-python", kafka_python_session), ("librdkafka", confluent_session)):
                got = session(bootstrap)
                print(f"{client}: consumed {got} records", file=sys.stderr)
                time.sleep(0.5)
                for n, stream in enumerate(recorder.take()):
                    stream = whole_frames(stream)
                    if len(stream) < 12:
                        continue
                    with open(os.path.join(OUT, f"captured-{client}-{n}"), "wb") as f:
                        f.write(stream)
                    written += 1
            print(f"{written} captured seeds in {OUT}", file=sys.stderr)
        finally:
            broker.terminate()
            broker.wait(10)


if __name__ == "__main__":
    main()
