"""One confluent-kafka (librdkafka) producer for the real-process fault suite (docs/JEPSEN.md).

Writes one partition at a steady rate until the deadline, with the scenario's acks and
idempotence, and writes the simulator's history lines (one JSON object a line, the format of
sim/src/history_file.rs) for every message: `invoke` when it is handed to librdkafka, then `ack`
with its offset or `fail` from the delivery report. Times are milliseconds since the run's
origin (wall clock, same host). Bounded: the deadline, at most 1,000,000 messages, a final
flush of at most 40 s; what is still undelivered then has no outcome line (indeterminate).
"""

import argparse
import json
import time

from confluent_kafka import KafkaException, Producer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partition", type=int, default=0)
    ap.add_argument("--acks", default="all")
    ap.add_argument("--idempotent", action="store_true")
    ap.add_argument("--producer", type=int, required=True, help="its id in the history")
    ap.add_argument("--origin-ms", type=int, required=True, help="wall-clock ms of run time 0")
    ap.add_argument("--until-ms", type=int, required=True)
    ap.add_argument("--rate", type=int, default=40)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    out = open(a.out, "w", buffering=1)

    def now():
        return max(0, int(time.time() * 1000) - a.origin_ms)

    def line(**fields):
        out.write(json.dumps(fields) + "\n")

    def make():
        return Producer({
            "bootstrap.servers": a.bootstrap,
            "acks": a.acks,
            "enable.idempotence": a.idempotent,
            "linger.ms": 5,
            "request.timeout.ms": 3000,
            "message.timeout.ms": 20000,
        })

    def on_delivery(op):
        def report(err, msg):
            if err is None and msg.offset() is not None and msg.offset() >= 0:
                line(type="ack", at_ms=now(), op=op, offset=msg.offset())
            elif err is None:
                # Delivered, but librdkafka did not learn the offset (an idempotent retry the
                # broker answered as a duplicate): no offset to hold it to, so indeterminate.
                line(type="fail", at_ms=now(), op=op, error="delivered without an offset")
            else:
                line(type="fail", at_ms=now(), op=op, error=str(err))
        return report

    producer = make()
    # librdkafka keeps order within one idempotent producer, but may bump its epoch on its own;
    # session 0 asks the checker for no order verdict (lost, duplicate, offsets still apply).
    session = 0
    op_base = a.producer << 40
    interval = 1.0 / max(a.rate, 1)
    n = 0
    while now() < a.until_ms and n < 1_000_000:
        value = f"p{a.producer}-{n}-0"
        op = op_base | n
        line(type="invoke", at_ms=now(), op=op, partition=a.partition, session=session,
             values=[value])
        try:
            producer.produce(a.topic, value=value.encode(), partition=a.partition,
                             on_delivery=on_delivery(op))
        except (BufferError, KafkaException) as e:
            line(type="fail", at_ms=now(), op=op, error=f"produce: {e}")
            # A fatal error (idempotence) leaves the producer unusable: start a new one.
            if isinstance(e, KafkaException) and e.args and e.args[0].fatal():
                producer.flush(5)
                producer = make()
        producer.poll(interval)
        n += 1
    producer.flush(40)
    out.close()


if __name__ == "__main__":
    main()
