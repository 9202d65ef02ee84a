"""A confluent-kafka AdminClient for the real-process fault suite (docs/JEPSEN.md).

The simulator's admin workload (sim/src/admin.rs) with librdkafka: on its own topics
(`admin-N`, a fresh name for every create, never the workload's topic) it creates topics,
grows them (CreatePartitions), alters their configs (IncrementalAlterConfigs: set or delete,
all in one request) and deletes them, one operation at a time, until the run's deadline. Each
is logged as the simulator's history lines (sim/src/history_file.rs): `admin_invoke` with the
change, then `admin_ack`, or `admin_fail` with `definite` (a broker refusal that is not
retriable: it did not happen) or not (a time-out, a lost connection: it may have). Once the
runner creates `--stop` (the faults have healed) it reads the admin topics back (Metadata,
DescribeConfigs: overrides only) until two reads a second apart agree (at most 30 s) and
writes them as one `final_metadata` line: the metadata check (admin changes lost or half done)
and the admin-availability check (NOT_CONTROLLER handed to the application) judge them.
"""

import argparse
import json
import os
import random
import time

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ConfigSource, NewPartitions, NewTopic)

PREFIX = "admin-"
CONFIG_KEYS = ["retention.ms", "segment.ms", "max.message.bytes"]
MAX_TOPICS = 200
TOPIC_SOURCE = (ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.DYNAMIC_TOPIC_CONFIG.value)


def config_value(key, n):
    if key == "max.message.bytes":
        return str(1_000_000 + n)
    return str(3_600_000 + n * 1000)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--replication", type=int, default=1)
    ap.add_argument("--origin-ms", type=int, required=True)
    ap.add_argument("--until-ms", type=int, required=True)
    ap.add_argument("--stop", required=True)
    ap.add_argument("--interval-ms", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    out = open(a.out, "w", buffering=1)
    rng = random.Random(a.seed)

    def now():
        return max(0, int(time.time() * 1000) - a.origin_ms)

    def line(**fields):
        fields.setdefault("at_ms", now())
        out.write(json.dumps(fields) + "\n")

    admin = AdminClient({"bootstrap.servers": a.bootstrap, "socket.timeout.ms": 10000})
    live = {}  # what it believes exists: topic -> partitions (to pick sensible operations)
    created = 0
    op = 0
    while now() < a.until_ms:
        time.sleep(a.interval_ms / 1000)
        pick = rng.randrange(4)
        target = rng.choice(sorted(live.items())) if live else None
        if pick == 1 and target:
            change = {"kind": "delete_topic", "topic": target[0]}
        elif pick == 2 and target:
            change = {"kind": "create_partitions", "topic": target[0],
                      "count": target[1] + rng.randint(1, 2)}
        elif pick == 3 and target:
            changes = {}
            for key in CONFIG_KEYS:
                r = rng.randrange(3)
                if r == 1:
                    changes[key] = config_value(key, rng.randrange(1 << 20))
                elif r == 2:
                    changes[key] = None
            if not changes:
                changes[CONFIG_KEYS[0]] = config_value(CONFIG_KEYS[0], 1)
            change = {"kind": "alter_configs", "topic": target[0], "changes": changes}
        elif created < MAX_TOPICS:
            created += 1
            configs = {}
            if rng.random() < 0.5:
                configs[CONFIG_KEYS[0]] = config_value(CONFIG_KEYS[0], rng.randrange(1 << 20))
            change = {"kind": "create_topic", "topic": f"{PREFIX}{created}",
                      "partitions": rng.randint(1, 4), "configs": configs}
        else:
            continue
        op += 1
        line(type="admin_invoke", op=op, change=change)
        kind, topic = change["kind"], change["topic"]
        try:
            if kind == "create_topic":
                f = admin.create_topics([NewTopic(topic, change["partitions"], a.replication,
                                                  config=change["configs"])],
                                        operation_timeout=10, request_timeout=15)[topic]
            elif kind == "delete_topic":
                f = admin.delete_topics([topic], operation_timeout=10,
                                        request_timeout=15)[topic]
            elif kind == "create_partitions":
                f = admin.create_partitions([NewPartitions(topic, change["count"])],
                                            operation_timeout=10, request_timeout=15)[topic]
            else:
                entries = [
                    ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                    if v is not None else
                    ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                    for k, v in sorted(change["changes"].items())
                ]
                res = ConfigResource(ConfigResource.Type.TOPIC, topic,
                                     incremental_configs=entries)
                f = list(admin.incremental_alter_configs([res], request_timeout=15).values())[0]
            f.result(timeout=30)
            line(type="admin_ack", op=op)
            if kind == "create_topic":
                live[topic] = change["partitions"]
            elif kind == "delete_topic":
                live.pop(topic, None)
            elif kind == "create_partitions":
                live[topic] = change["count"]
        except KafkaException as e:
            err = e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None
            code = err.code() if err else None
            # A refusal from the broker (a non-negative code) that is not retriable did not
            # happen; librdkafka's own errors (time-outs, transport) may have. So may a create
            # of a fresh name refused as existing, or partitions refused as already there: a
            # forwarded request retried at the next controller after the first took it.
            retried_create = (kind == "create_topic" and code == KafkaError.TOPIC_ALREADY_EXISTS) \
                or (kind == "create_partitions" and code == KafkaError.INVALID_PARTITIONS)
            definite = err is not None and code >= 0 and not err.retriable() \
                and not retried_create
            name = err.name() if err else type(e).__name__
            if code == KafkaError.NOT_CONTROLLER:
                name = "NotController " + name
            line(type="admin_fail", op=op, definite=definite, error=f"{name}: {e}")
        except Exception as e:  # noqa: BLE001 - a time-out of the future: indeterminate
            line(type="admin_fail", op=op, definite=False, error=f"{type(e).__name__}: {e}")

    # After healing: the admin topics as the cluster shows them, once two reads agree.
    waited = time.time()
    while not os.path.exists(a.stop) and time.time() - waited < 120:
        time.sleep(0.2)
    started = time.time()
    previous = None
    while time.time() - started < 30:
        try:
            current = read_metadata(admin)
        except Exception as e:  # noqa: BLE001 - retried within the bound
            line(type="note", what=f"admin: final metadata read failed: {e}")
            current = None
        if current is not None and current == previous:
            line(type="final_metadata", topics=current)
            break
        previous = current
        time.sleep(1)
    else:
        line(type="note", what="admin: the final metadata did not settle within 30 s")
    out.close()


def read_metadata(admin):
    md = admin.list_topics(timeout=10)
    out = {}
    names = sorted(t for t in md.topics if t.startswith(PREFIX))
    for name in names:
        t = md.topics[name]
        if t.error is not None:
            raise KafkaException(t.error)
        res = ConfigResource(ConfigResource.Type.TOPIC, name)
        entries = list(admin.describe_configs([res], request_timeout=10).values())[0] \
            .result(timeout=15)
        configs = {k: e.value for k, e in sorted(entries.items())
                   if e.source in TOPIC_SOURCE and e.value is not None}
        out[name] = [len(t.partitions), configs]
    return out


if __name__ == "__main__":
    main()
