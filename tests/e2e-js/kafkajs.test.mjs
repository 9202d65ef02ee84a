// kafkajs against the real `weir` binary: admin (create, list, offsets, configs, delete), an
// idempotent acks=all producer, and the group consumer (eachMessage, commits, resume).
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs'
import { createServer, connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import kafkajs from 'kafkajs'

const { Kafka, logLevel } = kafkajs
const bin = resolve(process.env.WEIR_BIN ?? '../../target/release/weir')
let broker, dir, port, kafka

function freePort () {
  return new Promise((ok, fail) => {
    const s = createServer().listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => ok(p)) })
    s.on('error', fail)
  })
}

async function waitForPort (p, deadlineMs) {
  const until = Date.now() + deadlineMs
  while (Date.now() < until) {
    const open = await new Promise(ok => {
      const c = connect(p, '127.0.0.1', () => { c.destroy(); ok(true) })
      c.on('error', () => ok(false))
    })
    if (open) return
    await new Promise(ok => setTimeout(ok, 100))
  }
  throw new Error(`broker did not listen on ${p} within ${deadlineMs} ms`)
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'weir-kafkajs-'))
  port = await freePort()
  const config = join(dir, 'server.properties')
  writeFileSync(config, [
    'node.id=1', 'process.roles=broker,controller',
    `listeners=PLAINTEXT://127.0.0.1:${port}`, `advertised.listeners=PLAINTEXT://127.0.0.1:${port}`,
    `log.dirs=${join(dir, 'data')}`, 'num.partitions=1', 'group.initial.rebalance.delay.ms=0', ''
  ].join('\n'))
  broker = spawn(bin, ['serve', '--config', config], { stdio: ['ignore', 'ignore', 'inherit'] })
  await waitForPort(port, 30000)
  kafka = new Kafka({ brokers: [`127.0.0.1:${port}`], logLevel: logLevel.NOTHING, clientId: 'e2e-js' })
})

after(() => {
  broker?.kill('SIGKILL')
  if (dir) rmSync(dir, { recursive: true, force: true })
})

test('admin and idempotent producer', { timeout: 60000 }, async () => {
  const admin = kafka.admin()
  await admin.connect()
  assert.equal(await admin.createTopics({ topics: [{ topic: 'js', numPartitions: 3 }], waitForLeaders: true }), true)
  assert.ok((await admin.listTopics()).includes('js'))

  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  let sent = 0
  for (let round = 0; round < 10; round++) {
    const messages = Array.from({ length: 100 }, (_, i) => ({ key: `k${i % 7}`, value: `v${round}-${i}` }))
    const result = await producer.send({ topic: 'js', acks: -1, messages })
    assert.ok(result.every(r => r.errorCode === 0))
    sent += messages.length
  }
  await producer.disconnect()

  const offsets = await admin.fetchTopicOffsets('js')
  assert.equal(offsets.length, 3)
  assert.equal(offsets.reduce((n, p) => n + Number(p.high), 0), sent)
  assert.ok(offsets.every(p => Number(p.low) === 0))

  const configs = await admin.describeConfigs({ includeSynonyms: false, resources: [{ type: 2, name: 'js' }] })
  const retention = configs.resources[0].configEntries.find(e => e.configName === 'retention.ms')
  assert.equal(retention.configValue, '604800000')

  await admin.deleteTopics({ topics: ['js'] })
  assert.ok(!(await admin.listTopics()).includes('js'))
  await admin.disconnect()
})

// Resolves once `count` messages arrived through eachMessage (rejects after `ms`).
function collect (consumer, topic, count, ms) {
  const got = []
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`only ${got.length} of ${count} messages in ${ms} ms`)), ms)
    consumer.run({
      autoCommitThreshold: 1,
      eachMessage: async ({ partition, message }) => {
        got.push({ partition, value: message.value.toString() })
        if (got.length === count) { clearTimeout(timer); resolve(got) }
      }
    }).catch(reject)
  })
}

test('group consumer with eachMessage commits and resumes', { timeout: 90000 }, async () => {
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic: 'jsg', numPartitions: 3 }], waitForLeaders: true })
  const producer = kafka.producer()
  await producer.connect()
  const send = (from, n) => producer.send({
    topic: 'jsg',
    messages: Array.from({ length: n }, (_, i) => ({ partition: (from + i) % 3, value: `m${from + i}` }))
  })
  await send(0, 30)

  const started = Date.now()
  let consumer = kafka.consumer({ groupId: 'js-group', sessionTimeout: 10000, heartbeatInterval: 500 })
  await consumer.connect()
  await consumer.subscribe({ topic: 'jsg', fromBeginning: true })
  const first = await collect(consumer, 'jsg', 30, 60000)
  console.log(`kafkajs: 30 messages ${Date.now() - started} ms after subscribe`)
  assert.deepEqual(first.map(m => m.value).sort(), Array.from({ length: 30 }, (_, i) => `m${i}`).sort())
  await consumer.disconnect()

  const committed = await admin.fetchOffsets({ groupId: 'js-group', topics: ['jsg'] })
  assert.deepEqual(committed[0].partitions.map(p => [p.partition, p.offset]).sort(), [[0, '10'], [1, '10'], [2, '10']])
  const { groups } = await admin.listGroups()
  assert.ok(groups.some(g => g.groupId === 'js-group' && g.protocolType === 'consumer'))

  // A new incarnation of the group resumes after the commits: only the new messages arrive.
  await send(30, 6)
  consumer = kafka.consumer({ groupId: 'js-group', sessionTimeout: 10000, heartbeatInterval: 500 })
  await consumer.connect()
  await consumer.subscribe({ topic: 'jsg', fromBeginning: true })
  const second = await collect(consumer, 'jsg', 6, 60000)
  assert.deepEqual(second.map(m => m.value).sort(), ['m30', 'm31', 'm32', 'm33', 'm34', 'm35'])
  await consumer.disconnect()

  const described = await admin.describeGroups(['js-group'])
  assert.equal(described.groups[0].state, 'Empty')
  await admin.deleteGroups(['js-group'])
  assert.ok(!(await admin.listGroups()).groups.some(g => g.groupId === 'js-group'))
  await producer.disconnect()
  await admin.disconnect()
})

test('transactions: committed records are read, aborted ones are not', { timeout: 90000 }, async () => {
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic: 'jstx', numPartitions: 2 }], waitForLeaders: true })
  const producer = kafka.producer({ transactionalId: 'js-tx', idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  const expected = []
  for (let round = 0; round < 4; round++) {
    const txn = await producer.transaction()
    const messages = Array.from({ length: 10 }, (_, i) => ({ partition: i % 2, value: `t${round}-${i}` }))
    await txn.send({ topic: 'jstx', messages })
    if (round % 2 === 0) {
      await txn.commit()
      expected.push(...messages.map(m => m.value))
    } else {
      await txn.abort()
    }
  }
  await producer.disconnect()
  // Four markers per partition: 20 records + 4 markers.
  const offsets = await admin.fetchTopicOffsets('jstx')
  assert.equal(offsets.reduce((n, p) => n + Number(p.high), 0), 40 + 8)

  const consumer = kafka.consumer({ groupId: 'js-tx-reader', sessionTimeout: 10000, heartbeatInterval: 500 })
  await consumer.connect()
  await consumer.subscribe({ topic: 'jstx', fromBeginning: true })
  const got = await collect(consumer, 'jstx', expected.length, 60000)
  assert.deepEqual(got.map(m => m.value).sort(), expected.sort())
  await consumer.disconnect()
  await admin.disconnect()
})
