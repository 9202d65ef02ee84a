// A kafkajs producer for the real-process fault suite (docs/JEPSEN.md): idempotent, acks=all,
// one message a send, one send at a time, to one partition at a steady rate until the
// deadline. Writes the simulator's history lines (sim/src/history_file.rs): `invoke` before
// each send, then `ack` with the offset kafkajs reports or `fail` with its error (which may or
// may not have been written: indeterminate to the checker). Each producer instance is one
// idempotent session (its producer id), numbered from 1, so the checker's order check holds
// it to the order it sent.
//
// After any failed send the producer is replaced by a new one (a new producer id, a new
// session). kafkajs 2.2.4 rolls a partition's sequence number back when a produce request
// fails (sendMessages.js), though an earlier attempt of it may have been written: the next
// message then goes out with the same sequence, the broker takes it for a retry of the
// written one (Kafka deduplicates by producer id, epoch and sequence, not by content) and
// kafkajs acknowledges it at the other message's offset, a silent loss the suite caught on
// its first runs (replication-3-kills seed 1: "p1001-13-0" acknowledged at offset 537 where
// the failed "p1001-12-0" stands). The Java client bumps its epoch after such a failure;
// librdkafka keeps the sequence and expects a duplicate (librdkafka #4438).
//
// Times are milliseconds since the run's origin. Bounded: the deadline, 1,000,000 messages,
// each send's own retries (about 15 s at most).
import { createWriteStream } from 'node:fs'
import { parseArgs } from 'node:util'
import kafkajs from 'kafkajs'

const { Kafka, logLevel } = kafkajs
const { values: a } = parseArgs({
  options: {
    bootstrap: { type: 'string' },
    topic: { type: 'string' },
    partition: { type: 'string', default: '0' },
    producer: { type: 'string' },
    'origin-ms': { type: 'string' },
    'until-ms': { type: 'string' },
    rate: { type: 'string', default: '20' },
    out: { type: 'string' }
  }
})
const origin = Number(a['origin-ms'])
const until = Number(a['until-ms'])
const partition = Number(a.partition)
const id = BigInt(a.producer)
const interval = 1000 / Math.max(Number(a.rate), 1)
const out = createWriteStream(a.out)
const now = () => Math.max(0, Date.now() - origin)
// JSON with the op as a bare integer (past 2^53: written from a BigInt).
const line = (fields, op) => out.write(JSON.stringify(fields).replace('"OP"', op.toString()) + '\n')
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

const kafka = new Kafka({
  brokers: a.bootstrap.split(','),
  clientId: `jepsen-kafkajs-${a.producer}`,
  logLevel: logLevel.ERROR,
  connectionTimeout: 3000,
  requestTimeout: 5000,
  retry: { retries: 5, initialRetryTime: 200, maxRetryTime: 3000 }
})

async function start () {
  const p = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  try {
    await p.connect()
    return p
  } catch (e) {
    await p.disconnect().catch(() => {})
    return null
  }
}

let producer = null
let session = 0
for (let n = 0n; now() < until && n < 1000000n; n++) {
  const started = now()
  if (producer === null) {
    producer = await start()
    if (producer === null) { await sleep(500); n--; continue }
    session++
  }
  const value = `p${id}-${n}-0`
  const op = (id << 40n) | n
  line({ type: 'invoke', at_ms: now(), op: 'OP', partition, session, values: [value] }, op)
  try {
    const [r] = await producer.send({ topic: a.topic, acks: -1, messages: [{ value, partition }] })
    const offset = Number(r.baseOffset ?? r.offset)
    if (r.errorCode === 0 && Number.isFinite(offset) && offset >= 0) {
      line({ type: 'ack', at_ms: now(), op: 'OP', offset }, op)
    } else {
      line({ type: 'fail', at_ms: now(), op: 'OP', error: `error code ${r.errorCode} without an offset` }, op)
    }
  } catch (e) {
    line({ type: 'fail', at_ms: now(), op: 'OP', error: String(e?.message ?? e) }, op)
    await producer.disconnect().catch(() => {})
    producer = null
  }
  await sleep(Math.max(0, interval - (now() - started)))
}
if (producer !== null) await producer.disconnect().catch(() => {})
out.end()
