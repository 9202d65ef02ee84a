// kafkajs over secure listeners: SASL_SSL with SCRAM-SHA-512 and mTLS (SSL, client auth
// required, principal from the certificate subject), with ACLs per principal (alice may write,
// bob may not). Certificates come from the openssl CLI at run time. kafkajs cannot create SCRAM
// credentials (no AlterUserScramCredentials), so `weir configs` does, as kafka-configs.sh would,
// logged in as the PLAIN admin (no other client needed: this runs on a machine with only node).
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, execFileSync } from 'node:child_process'
import { mkdtempSync, writeFileSync, readFileSync, rmSync } from 'node:fs'
import { createServer, connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import kafkajs from 'kafkajs'

const { Kafka, logLevel } = kafkajs
const bin = resolve(process.env.WEIR_BIN ?? '../../target/release/weir')
const dir = mkdtempSync(join(tmpdir(), 'weir-kafkajs-sec-'))
const brokers = []

after(() => {
  for (const b of brokers) b.kill('SIGKILL')
  rmSync(dir, { recursive: true, force: true })
})

function openssl (...args) { execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' }) }

function makeCerts () {
  openssl('req', '-x509', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
    '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '30', '-subj', '/CN=Weir Test CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign')
  const leaf = (name, subj, eku, san) => {
    writeFileSync(join(dir, `${name}.ext`), `extendedKeyUsage=${eku}\n` + (san ? `subjectAltName=${san}\n` : ''))
    openssl('req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
      '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subj)
    openssl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial',
      '-days', '30', '-out', `${name}.pem`, '-extfile', `${name}.ext`)
    openssl('pkcs8', '-topk8', '-nocrypt', '-in', `${name}.key`, '-out', `${name}.p8`)
  }
  leaf('broker', '/CN=broker0', 'serverAuth', 'DNS:localhost,IP:127.0.0.1')
  writeFileSync(join(dir, 'broker-store.pem'), readFileSync(join(dir, 'broker.p8'), 'utf8') + readFileSync(join(dir, 'broker.pem'), 'utf8'))
  for (const who of ['alice', 'bob', 'admin']) leaf(who, `/O=Acme/CN=${who}`, 'clientAuth', null)
}
makeCerts()

function freePort () {
  return new Promise((ok, fail) => {
    const s = createServer().listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => ok(p)) })
    s.on('error', fail)
  })
}

async function start (name, lines) {
  const [port, cport] = [await freePort(), await freePort()]
  const config = join(dir, `${name}.properties`)
  writeFileSync(config, [
    'node.id=1', 'process.roles=broker,controller', 'controller.listener.names=CONTROLLER',
    `controller.quorum.voters=1@127.0.0.1:${cport}`, `log.dirs=${join(dir, name)}`,
    'offsets.topic.replication.factor=1',
    'authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer',
    'super.users=User:admin', 'ssl.keystore.type=PEM', `ssl.keystore.location=${join(dir, 'broker-store.pem')}`,
    'ssl.truststore.type=PEM', `ssl.truststore.location=${join(dir, 'ca.pem')}`,
    `listeners=SECURE://127.0.0.1:${port},CONTROLLER://127.0.0.1:${cport}`, 'inter.broker.listener.name=SECURE',
    ...lines, ''
  ].join('\n'))
  const b = spawn(bin, ['serve', '--config', config], { stdio: ['ignore', 'ignore', 'inherit'] })
  brokers.push(b)
  const until = Date.now() + 60000
  while (Date.now() < until) {
    const open = await new Promise(ok => {
      const c = connect(port, '127.0.0.1', () => { c.destroy(); ok(true) })
      c.on('error', () => ok(false))
    })
    if (open) return port
    await new Promise(ok => setTimeout(ok, 100))
  }
  throw new Error('broker did not listen')
}

async function setUp (kafka) {
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic: 'orders', numPartitions: 1 }], waitForLeaders: true })
  await admin.createAcls({
    acl: [{
      resourceType: 2, resourceName: 'orders', resourcePatternType: 3, principal: 'User:alice',
      host: '*', operation: 4, permissionType: 3
    }]
  })
  await admin.disconnect()
}

async function send (kafka) {
  const producer = kafka.producer({ retry: { retries: 0 } })
  await producer.connect()
  try {
    await producer.send({ topic: 'orders', messages: [{ value: 'v' }] })
  } finally {
    await producer.disconnect()
  }
}

// The topic's end offset, read as the admin: alice's record counts, bob's refused one does not.
async function endOffset (kafka) {
  const admin = kafka.admin()
  await admin.connect()
  try {
    const [p] = await admin.fetchTopicOffsets('orders')
    return p.high
  } finally {
    await admin.disconnect()
  }
}

const ca = () => [readFileSync(join(dir, 'ca.pem'))]

test('mTLS: the certificate subject is the principal', { timeout: 90000 }, async () => {
  const port = await start('mtls', [
    'listener.security.protocol.map=SECURE:SSL,CONTROLLER:PLAINTEXT', 'ssl.client.auth=required',
    'ssl.principal.mapping.rules=RULE:^CN=([^,]+),.*$/$1/,DEFAULT'
  ])
  const as = who => new Kafka({
    brokers: [`127.0.0.1:${port}`], logLevel: logLevel.NOTHING, clientId: who, retry: { retries: 1 },
    ssl: { ca: ca(), cert: readFileSync(join(dir, `${who}.pem`)), key: readFileSync(join(dir, `${who}.key`)) }
  })
  await setUp(as('admin'))
  await send(as('alice'))
  await assert.rejects(send(as('bob')), /not authorized|TOPIC_AUTHORIZATION_FAILED/i)
  assert.equal(await endOffset(as('admin')), '1')
  const anonymous = new Kafka({ brokers: [`127.0.0.1:${port}`], logLevel: logLevel.NOTHING, retry: { retries: 0 }, ssl: { ca: ca() } })
  await assert.rejects(send(anonymous))
})

test('SASL_SSL with SCRAM-SHA-512', { timeout: 90000 }, async () => {
  const port = await start('scram', [
    'listener.security.protocol.map=SECURE:SASL_SSL,CONTROLLER:PLAINTEXT',
    'sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN',
    'listener.name.secure.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";'
  ])
  const adminConfig = join(dir, 'admin-client.properties')
  writeFileSync(adminConfig, [
    'security.protocol=SASL_SSL', 'sasl.mechanism=PLAIN',
    'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret";',
    'ssl.truststore.type=PEM', `ssl.truststore.location=${join(dir, 'ca.pem')}`, ''
  ].join('\n'))
  for (const who of ['alice', 'bob']) {
    execFileSync(bin, ['configs', '--bootstrap-server', `127.0.0.1:${port}`, '--command-config', adminConfig,
      '--entity-type', 'users', '--entity-name', who, '--alter',
      '--add-config', `SCRAM-SHA-512=[iterations=4096,password=${who}-secret]`], { stdio: 'ignore' })
  }
  const as = (who, password = `${who}-secret`, mechanism = 'scram-sha-512') => new Kafka({
    brokers: [`127.0.0.1:${port}`], logLevel: logLevel.NOTHING, clientId: who, retry: { retries: 1 },
    ssl: { ca: ca() }, sasl: { mechanism, username: who, password }
  })
  await setUp(as('admin', 'admin-secret', 'plain'))
  await send(as('alice'))
  await assert.rejects(send(as('bob')), /not authorized|TOPIC_AUTHORIZATION_FAILED/i)
  await assert.rejects(send(as('alice', 'wrong')), /SASL|auth/i)
  // bob over SCRAM-SHA-256, which this listener does not enable, is refused at the handshake.
  await assert.rejects(send(as('bob', 'bob-secret', 'scram-sha-256')), /SASL|mechanism|auth/i)
  assert.equal(await endOffset(as('admin', 'admin-secret', 'plain')), '1')
})

// An unsecured JWS (KIP-255): header {"alg":"none"}, claims with sub, iat, exp, scope; no signature.
function unsecuredToken (sub, scope, lifeSeconds = 3600) {
  const b64 = o => Buffer.from(JSON.stringify(o)).toString('base64url')
  const now = Date.now() / 1000
  return `${b64({ alg: 'none' })}.${b64({ sub, iat: now, exp: now + lifeSeconds, scope })}.`
}

test('SASL_SSL with OAUTHBEARER (unsecured tokens)', { timeout: 90000 }, async () => {
  const port = await start('oauth', [
    'listener.security.protocol.map=SECURE:SASL_SSL,CONTROLLER:PLAINTEXT',
    'sasl.enabled.mechanisms=OAUTHBEARER,PLAIN', 'sasl.mechanism.inter.broker.protocol=PLAIN',
    'listener.name.secure.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";',
    'listener.name.secure.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredValidatorRequiredScope="kafka";'
  ])
  const as = (who, scope = ['kafka']) => new Kafka({
    brokers: [`127.0.0.1:${port}`], logLevel: logLevel.NOTHING, clientId: who, retry: { retries: 1 },
    ssl: { ca: ca() },
    sasl: { mechanism: 'oauthbearer', oauthBearerProvider: async () => ({ value: unsecuredToken(who, scope) }) }
  })
  const admin = new Kafka({
    brokers: [`127.0.0.1:${port}`], logLevel: logLevel.NOTHING, retry: { retries: 1 },
    ssl: { ca: ca() }, sasl: { mechanism: 'plain', username: 'admin', password: 'admin-secret' }
  })
  await setUp(admin)
  await send(as('alice'))
  await assert.rejects(send(as('bob')), /not authorized|TOPIC_AUTHORIZATION_FAILED/i)
  // A token without the listener's required scope is refused at login. kafkajs ignores the
  // server's JSON status and sends its next request, which closes the connection (as Kafka
  // does): no record gets through either way.
  await assert.rejects(send(as('alice', ['other'])))
  assert.equal(await endOffset(admin), '1')
})
