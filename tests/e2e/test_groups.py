"""Consumer groups end to end: kafka-python's and confluent-kafka's subscribe(), rebalances,
commits, a killed member, static membership, and committed offsets across broker restarts.

Every wait is bounded; the broker runs with group.initial.rebalance.delay.ms=0 (conftest).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

PARTITIONS = 3
RECORDS = 30
WAIT_S = 60.0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[
        topic
    ].result(timeout=30)


def produce(bootstrap: str, topic: str, n: int = RECORDS, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(start, start + n):
        # Explicit partitions: every partition gets records.
        producer.produce(topic, value=b"v%d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0, "undelivered records"


def ck_consumer(bootstrap: str, group: str, **extra) -> Consumer:
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
    }
    config.update(extra)
    return Consumer(config)


def partitions_of(consumer: Consumer) -> list[int]:
    return sorted(tp.partition for tp in consumer.assignment())


def poll_all(consumers, until, what: str, timeout_s: float = WAIT_S, sink=None):
    """Polls every consumer round robin until `until()` holds (bounded)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for c in consumers:
            m = c.poll(0.05)
            if m is not None and not m.error() and sink is not None:
                sink.append((c, m.partition(), m.offset(), m.value()))
        if until():
            return
    shapes = [partitions_of(c) for c in consumers]
    raise AssertionError(f"timed out waiting for {what}; assignments: {shapes}")


@pytest.mark.parametrize("strategy", ["range,roundrobin", "cooperative-sticky"])
def test_seed_walkthrough_two_then_three_members_and_a_second_group(broker, strategy):
    topic = unique("walk")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic)
    group = unique("g")
    a = ck_consumer(broker.bootstrap, group, **{"partition.assignment.strategy": strategy})
    b = ck_consumer(broker.bootstrap, group, **{"partition.assignment.strategy": strategy})
    c = None
    other = None
    try:
        started = time.monotonic()
        a.subscribe([topic])
        b.subscribe([topic])
        seen = []
        poll_all([a, b],
                 lambda: sorted(len(partitions_of(x)) for x in (a, b)) == [1, 2],
                 "two members sharing three partitions 2/1", sink=seen)
        assert sorted(partitions_of(a) + partitions_of(b)) == [0, 1, 2]
        print(f"two members settled {time.monotonic() - started:.2f} s after subscribe")
        c = ck_consumer(broker.bootstrap, group, **{"partition.assignment.strategy": strategy})
        c.subscribe([topic])
        poll_all([a, b, c],
                 lambda: [len(partitions_of(x)) for x in (a, b, c)] == [1, 1, 1],
                 "three members with one partition each")
        assert sorted(partitions_of(a) + partitions_of(b) + partitions_of(c)) == [0, 1, 2]
        # A second group sees every message, independently of the first.
        other = ck_consumer(broker.bootstrap, unique("g2"))
        other.subscribe([topic])
        got = []
        poll_all([other], lambda: len(got) >= RECORDS, "the second group's records", sink=got)
        assert sorted(v for (_, _, _, v) in got) == sorted(b"v%d" % i for i in range(RECORDS))
    finally:
        for x in (a, b, c, other):
            if x is not None:
                x.close()


def test_kafka_python_subscribe_commit_and_resume(broker):
    topic = unique("kp")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic)
    group = unique("kpg")

    def consume(expected: int) -> list:
        consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                                 auto_offset_reset="earliest", enable_auto_commit=False)
        try:
            # Have the topic's partitions before the first join. kafka-python 3.0.12 loses an
            # assignment when a rebalance triggered by a metadata change (a first join made
            # before the topic's metadata arrived, then a rejoin once it does) completes while
            # poll() has already timed out: the leader's assignment makes need_rejoin() false,
            # so the finished join is never collected and no partition is ever fetched (0 of
            # 30 records in 60 s, about 1 run in 25 here; any broker with
            # group.initial.rebalance.delay.ms=0, as these tests run, shows it).
            assert consumer.partitions_for_topic(topic) == set(range(PARTITIONS))
            got = []
            deadline = time.monotonic() + WAIT_S
            while len(got) < expected and time.monotonic() < deadline:
                for msgs in consumer.poll(timeout_ms=200).values():
                    got.extend(msgs)
            # Give a chance to over-deliver: nothing more may come after the commit point.
            for msgs in consumer.poll(timeout_ms=500).values():
                got.extend(msgs)
            consumer.commit()
            committed = {p: consumer.committed(KpTopicPartition(topic, p))
                         for p in range(PARTITIONS)}
            return got, committed
        finally:
            consumer.close()

    got, committed = consume(RECORDS)
    assert len(got) == RECORDS
    assert committed == {p: RECORDS // PARTITIONS for p in range(PARTITIONS)}
    produce(broker.bootstrap, topic, n=9, start=RECORDS)
    got, committed = consume(9)
    assert sorted(m.value for m in got) == sorted(b"v%d" % i for i in range(RECORDS, RECORDS + 9))
    assert committed == {p: (RECORDS + 9) // PARTITIONS for p in range(PARTITIONS)}


def committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    consumer = ck_consumer(bootstrap, group)
    try:
        tps = consumer.committed([CkTopicPartition(topic, p) for p in range(PARTITIONS)],
                                 timeout=30)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        consumer.close()


def test_committed_offsets_survive_restart_and_kill9(broker):
    topic = unique("durable")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic)
    group = unique("dg")
    consumer = ck_consumer(broker.bootstrap, group)
    try:
        consumer.subscribe([topic])
        got = []
        poll_all([consumer], lambda: len(got) >= RECORDS, "all records", sink=got)
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    expected = {p: RECORDS // PARTITIONS for p in range(PARTITIONS)}
    assert committed_offsets(broker.bootstrap, group, topic) == expected
    broker.restart()
    assert committed_offsets(broker.bootstrap, group, topic) == expected, "after restart"
    broker.kill9()
    assert committed_offsets(broker.bootstrap, group, topic) == expected, "after kill -9"
    # And the group resumes from there: only new records arrive.
    produce(broker.bootstrap, topic, n=3, start=RECORDS)
    consumer = ck_consumer(broker.bootstrap, group)
    try:
        consumer.subscribe([topic])
        got = []
        poll_all([consumer], lambda: len(got) >= 3, "the new records", sink=got)
        assert sorted(v for (_, _, _, v) in got) == [b"v30", b"v31", b"v32"]
    finally:
        consumer.close()


MEMBER_SCRIPT = """
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
              "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
              "heartbeat.interval.ms": 500})
c.subscribe([sys.argv[3]])
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    c.poll(0.1)
    if c.assignment():
        print("assigned", flush=True)
"""


def test_killed_member_is_replaced_after_its_session_timeout(broker):
    topic = unique("kill")
    create_topic(broker.bootstrap, topic)
    group = unique("kg")
    member = subprocess.Popen([sys.executable, "-c", MEMBER_SCRIPT, broker.bootstrap, group, topic],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    survivor = ck_consumer(broker.bootstrap, group)
    try:
        assert member.stdout.readline().strip() == b"assigned", "the subprocess member joined"
        survivor.subscribe([topic])
        poll_all([survivor], lambda: len(partitions_of(survivor)) in (1, 2),
                 "the survivor sharing the partitions")
        member.kill()  # SIGKILL: no LeaveGroup, only the session timeout tells the broker.
        member.wait(timeout=10)
        killed_at = time.monotonic()
        poll_all([survivor], lambda: partitions_of(survivor) == [0, 1, 2],
                 "the survivor taking every partition", timeout_s=30)
        took = time.monotonic() - killed_at
        print(f"member replaced {took:.2f} s after SIGKILL (session.timeout.ms=6000)")
        assert took >= 4.0, "a member is not removed long before its session timeout"
    finally:
        if member.poll() is None:
            member.kill()
            member.wait(timeout=10)
        survivor.close()


def test_static_member_restart_keeps_its_assignment_without_rebalance(broker):
    topic = unique("static")
    create_topic(broker.bootstrap, topic)
    group = unique("sg")
    revoked = []
    dynamic = ck_consumer(broker.bootstrap, group)
    static = ck_consumer(broker.bootstrap, group, **{"group.instance.id": "static-1",
                                                     "session.timeout.ms": 20000})
    replacement = None
    try:
        dynamic.subscribe([topic], on_revoke=lambda c, ps: revoked.append(list(ps)))
        static.subscribe([topic])
        poll_all([dynamic, static],
                 lambda: sorted(len(partitions_of(x)) for x in (dynamic, static)) == [1, 2],
                 "two members sharing the partitions")
        before = partitions_of(static)
        revoked.clear()
        static.close()  # A static member leaves no LeaveGroup behind: its place is kept.
        static = None
        replacement = ck_consumer(broker.bootstrap, group, **{"group.instance.id": "static-1",
                                                              "session.timeout.ms": 20000})
        replacement.subscribe([topic])
        poll_all([dynamic, replacement], lambda: partitions_of(replacement) == before,
                 "the restarted static member's old partitions", timeout_s=30)
        # Keep polling a while: the dynamic member must not have been asked to rebalance.
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            dynamic.poll(0.05)
            replacement.poll(0.05)
        assert revoked == [], f"the other member was rebalanced: {revoked}"
    finally:
        for x in (dynamic, static, replacement):
            if x is not None:
                x.close()


def weir_cli(broker, *args) -> subprocess.CompletedProcess:
    from conftest import weir_binary
    return subprocess.run([str(weir_binary()), *args[:1], "--bootstrap", broker.bootstrap,
                           *args[1:]], capture_output=True, text=True, timeout=60)


def test_cli_lists_describes_resets_and_deletes_groups(broker):
    if not broker.can_restart:
        pytest.skip("the CLI test needs the broker binary the fixture runs")
    topic = unique("cli")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic)
    group = unique("cg")
    consumer = ck_consumer(broker.bootstrap, group)
    try:
        consumer.subscribe([topic])
        got = []
        poll_all([consumer], lambda: len(got) >= RECORDS, "all records", sink=got)
        consumer.commit(asynchronous=False)
        listed = weir_cli(broker, "groups", "list")
        assert listed.returncode == 0, listed.stderr
        assert f"{group}\tStable\tconsumer\tclassic" in listed.stdout.splitlines()
        # kafka-consumer-groups.sh --describe's views and columns.
        described = weir_cli(broker, "groups", "describe", group)
        assert described.returncode == 0, described.stderr
        lines = described.stdout.splitlines()
        assert lines[1].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                                    "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                                    "CLIENT-ID"], lines
        rows = {int(r[2]): r for r in (line.split() for line in lines[2:])}
        assert sorted(rows) == list(range(PARTITIONS)), lines
        for p, row in rows.items():
            assert row[:6] == [group, topic, str(p), "10", "10", "0"], row
            assert row[6] != "-", f"partition {p} is held by the consumer: {row}"
        state = weir_cli(broker, "groups", "describe", group, "--state").stdout.splitlines()
        assert state[1].split()[-1] == "#MEMBERS" and state[2].split()[-2:] == ["Stable", "1"]
        members = weir_cli(broker, "groups", "describe", group, "--members", "--verbose")
        member = members.stdout.splitlines()[2].split()
        assert member[4] == str(PARTITIONS), members.stdout
        refused = weir_cli(broker, "groups", "reset-offsets", group, "--topic", topic,
                           "--to", "earliest")
        assert refused.returncode != 0 and "active members" in refused.stderr
    finally:
        consumer.close()
    reset = weir_cli(broker, "groups", "reset-offsets", group, "--topic", topic, "--to", "3")
    assert reset.returncode == 0, reset.stderr
    assert committed_offsets(broker.bootstrap, group, topic) == {p: 3 for p in range(PARTITIONS)}
    reset = weir_cli(broker, "groups", "reset-offsets", group, "--topic", topic, "--to", "earliest")
    assert reset.returncode == 0, reset.stderr
    assert committed_offsets(broker.bootstrap, group, topic) == {p: 0 for p in range(PARTITIONS)}
    deleted = weir_cli(broker, "groups", "delete", group)
    assert deleted.returncode == 0, deleted.stderr
    assert group not in weir_cli(broker, "groups", "list").stdout


# ---------------------------------------------------------------- KIP-848 (group.protocol=consumer)


def ck_848(bootstrap: str, group: str, **extra) -> Consumer:
    """A confluent-kafka consumer on the new protocol: the broker assigns partitions, and session
    and heartbeat timing come from the broker (the client may not set them)."""
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    config.update(extra)
    return Consumer(config)


def positions(consumer: Consumer) -> dict[int, int]:
    return {tp.partition: tp.offset for tp in consumer.position(consumer.assignment())}


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_consumer_protocol_two_then_three_members_every_record_and_commits_survive_restart(
        broker, assignor):
    topic = unique("kip848")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic)
    group = unique("g848")
    extra = {"group.remote.assignor": assignor}
    a = ck_848(broker.bootstrap, group, **extra)
    b = ck_848(broker.bootstrap, group, **extra)
    c = None
    seen = []
    try:
        started = time.monotonic()
        a.subscribe([topic])
        b.subscribe([topic])
        poll_all([a, b],
                 lambda: sorted(len(partitions_of(x)) for x in (a, b)) == [1, 2],
                 "two members sharing three partitions 2/1", sink=seen)
        assert sorted(partitions_of(a) + partitions_of(b)) == [0, 1, 2]
        print(f"two consumer-protocol members settled {time.monotonic() - started:.2f} s")
        joined = time.monotonic()
        c = ck_848(broker.bootstrap, group, **extra)
        c.subscribe([topic])
        poll_all([a, b, c],
                 lambda: [len(partitions_of(x)) for x in (a, b, c)] == [1, 1, 1],
                 "three members with one partition each", sink=seen)
        print(f"third member got its partition {time.monotonic() - joined:.2f} s after subscribe")
        assert sorted(partitions_of(a) + partitions_of(b) + partitions_of(c)) == [0, 1, 2]
        per_partition = RECORDS // PARTITIONS
        poll_all([a, b, c],
                 lambda: all(o == per_partition for x in (a, b, c)
                             for o in positions(x).values()),
                 "every member at the end of its partition", sink=seen)
        # At least once: every record was delivered to the group (a moved partition may repeat).
        assert {v for (_, _, _, v) in seen} == {b"v%d" % i for i in range(RECORDS)}
        for x in (a, b, c):
            x.commit(asynchronous=False)
        # ListGroups v5 names the type; a filter on it finds the group.
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        listed = admin.list_consumer_groups(request_timeout=10).result(timeout=30)
        mine = [g for g in listed.valid if g.group_id == group]
        assert len(mine) == 1 and mine[0].type.name == "CONSUMER", listed.valid
        assert mine[0].state.name == "STABLE"
    finally:
        for x in (a, b, c):
            if x is not None:
                x.close()
    expected = {p: RECORDS // PARTITIONS for p in range(PARTITIONS)}
    assert committed_offsets(broker.bootstrap, group, topic) == expected
    broker.restart()
    assert committed_offsets(broker.bootstrap, group, topic) == expected, "after restart"
    # The group's type survives (its ConsumerGroupMetadata record); its members rejoin.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = admin.list_consumer_groups(request_timeout=10).result(timeout=30)
    assert [g.type.name for g in listed.valid if g.group_id == group] == ["CONSUMER"]
    produce(broker.bootstrap, topic, n=3, start=RECORDS)
    d = ck_848(broker.bootstrap, group, **extra)
    try:
        d.subscribe([topic])
        got = []
        poll_all([d], lambda: len(got) >= 3, "the new records after the restart", sink=got)
        # Nothing below the committed offsets comes back: poll a little longer.
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            m = d.poll(0.1)
            if m is not None and not m.error():
                got.append((d, m.partition(), m.offset(), m.value()))
        assert sorted(v for (_, _, _, v) in got) == [b"v30", b"v31", b"v32"]
    finally:
        d.close()


def describe_848(broker, group: str) -> tuple[int, dict[str, int], str]:
    """`weir groups describe` of a consumer-protocol group (its JSON form): its group epoch,
    each member's epoch by member id, and the whole output."""
    out = weir_cli(broker, "groups", "describe", group, "--output", "json")
    assert out.returncode == 0, out.stderr
    described = json.loads(out.stdout)
    assert described["group_type"] == "consumer", out.stdout
    members = {m["consumer_id"]: m["member_epoch"] for m in described["members"]}
    return described["group_epoch"], members, out.stdout


@pytest.mark.parametrize("stop", ["restart", "kill9"])
def test_consumer_protocol_members_are_kept_across_a_broker_restart_mid_consumption(broker, stop):
    """The group's records (epochs, members, assignments) are replayed at the restart (clean, or
    after SIGKILL): the two members heartbeat at their epochs and are kept, not fenced, and
    consume on where they committed; no rebalance happens (the group epoch does not move)."""
    if not broker.can_restart:
        pytest.skip("needs a broker the fixture can restart")
    topic = unique("k848r")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic)
    group = unique("g848r")
    a = ck_848(broker.bootstrap, group)
    b = ck_848(broker.bootstrap, group)
    seen = []
    try:
        a.subscribe([topic])
        b.subscribe([topic])
        poll_all([a, b],
                 lambda: sorted(len(partitions_of(x)) for x in (a, b)) == [1, 2]
                 and len(seen) >= RECORDS // 2
                 and all(any(c is x for (c, _, _, _) in seen) for x in (a, b)),
                 "two members sharing three partitions, both reading", sink=seen)
        for x in (a, b):
            x.commit(asynchronous=False)
        epoch_before, members_before, text = describe_848(broker, group)
        assert len(members_before) == 2, text
        owned_before = (partitions_of(a), partitions_of(b))
        restarted = time.monotonic()
        getattr(broker, stop)()
        # The rest of the records, and more produced after the restart, reach the same members.
        produce(broker.bootstrap, topic, n=RECORDS, start=RECORDS)
        every = {b"v%d" % i for i in range(2 * RECORDS)}
        poll_all([a, b], lambda: {v for (_, _, _, v) in seen} >= every,
                 "every record after the restart", sink=seen)
        print(f"consumption went on {time.monotonic() - restarted:.2f} s after the restart")
        epoch_after, members_after, text = describe_848(broker, group)
        assert members_after == members_before, f"members fenced or replaced:\n{text}"
        assert epoch_after == epoch_before, f"a rebalance after the restart:\n{text}"
        assert (partitions_of(a), partitions_of(b)) == owned_before
        for x in (a, b):
            x.commit(asynchronous=False)
        listed = weir_cli(broker, "groups", "list")
        assert f"{group}\tStable\tconsumer\tconsumer" in listed.stdout.splitlines(), listed.stdout
        refused = weir_cli(broker, "groups", "reset-offsets", group, "--topic", topic,
                           "--to", "earliest")
        assert refused.returncode != 0 and "active members" in refused.stderr
    finally:
        a.close()
        b.close()
    expected = {p: 2 * RECORDS // PARTITIONS for p in range(PARTITIONS)}
    assert committed_offsets(broker.bootstrap, group, topic) == expected
    # With the members gone the group is Empty: its offsets can be reset and it can be deleted.
    reset = weir_cli(broker, "groups", "reset-offsets", group, "--topic", topic, "--to", "earliest")
    assert reset.returncode == 0, reset.stderr
    assert committed_offsets(broker.bootstrap, group, topic) == {p: 0 for p in range(PARTITIONS)}
    deleted = weir_cli(broker, "groups", "delete", group)
    assert deleted.returncode == 0, deleted.stderr
    broker.restart()
    assert group not in weir_cli(broker, "groups", "list").stdout, "deleted for good"


def test_consumer_protocol_and_classic_groups_keep_to_their_own_ids(broker):
    topic = unique("mixed")
    create_topic(broker.bootstrap, topic)
    group = unique("mg")
    new = ck_848(broker.bootstrap, group)
    classic = ck_consumer(broker.bootstrap, group)
    try:
        new.subscribe([topic])
        poll_all([new], lambda: partitions_of(new) == [0, 1, 2], "the consumer-protocol member")
        errors = []
        classic.subscribe([topic], on_assign=lambda *_: errors.append("assigned"))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            m = classic.poll(0.1)
            if m is not None and m.error():
                errors.append(m.error().name())
            new.poll(0.05)
        # The classic JoinGroup is refused (INCONSISTENT_GROUP_PROTOCOL); the group is untouched.
        assert "assigned" not in errors
        assert partitions_of(new) == [0, 1, 2]
    finally:
        classic.close()
        new.close()


def test_consumer_protocol_regex_subscription_follows_new_topics(broker):
    prefix = unique("re")
    matching = [f"{prefix}-a", f"{prefix}-b"]
    for t in matching + [f"x{prefix}"]:
        create_topic(broker.bootstrap, t, partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for t in matching + [f"x{prefix}"]:
        for i in range(4):
            producer.produce(t, value=f"{t}/{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    consumer = ck_848(broker.bootstrap, unique("rg"))
    try:
        # librdkafka sends the pattern to the broker (SubscribedTopicRegex), which resolves it.
        consumer.subscribe([f"^{prefix}-.*"])
        got = []
        poll_all([consumer], lambda: len(got) >= 8, "the matching topics' records", sink=got)
        late = f"{prefix}-c"
        create_topic(broker.bootstrap, late, partitions=1)
        producer.produce(late, value=f"{late}/0".encode(), partition=0)
        assert producer.flush(30) == 0
        poll_all([consumer], lambda: len(got) >= 9, "a topic created after subscribe", sink=got)
        values = sorted(v.decode() for (_, _, _, v) in got)
        assert values == sorted([f"{t}/{i}" for t in matching for i in range(4)] + [f"{late}/0"])
    finally:
        consumer.close()
