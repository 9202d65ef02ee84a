// kafkajs against the real `weir` binary: admin (create, list, offsets, configs, delete) and an
// idempotent acks=all producer. Its consumer needs consumer groups, which Weir does not have yet.
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
    `log.dirs=${join(dir, 'data')}`, 'num.partitions=1', ''
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
