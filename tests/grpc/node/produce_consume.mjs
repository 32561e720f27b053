// Drives `rocketstore serve` with the official RocketMQ 5 Node.js client (rocketmq-client-nodejs), for
// tests/serve/test_serve_node.py. The clients get a logger of ours (warnings and errors to stderr, every level
// with RS_NODE_VERBOSE=1); run it with HOME pointing into a temporary directory all the same, in case
// anything falls back to the client's default logger (~/logs/rocketmq/rocketmq_client_nodejs.log).
//
// Usage: node produce_consume.mjs ENDPOINT JSON-ARGS; prints one JSON line on stdout (exit 0; 1 on an error,
// 2 on the overall time limit, with "error" in the JSON and the reason on stderr).
// JSON-ARGS: {"topic": "T", "group": "G",
//             "send": [{"body_b64": "...", "tag": "TagA", "keys": ["k1"], "properties": {"a": "b"}}, ...],
//             "receive": N, "tag_filter": "*", "invisible_ms": 15000, "await_ms": 1000,
//             "deadline_ms": 15000, "check_empty": true, "timeout_ms": 60000}
// Sends every message of "send" with a Producer (one at a time, in order), then receives with a
// SimpleConsumer of group G (subscribed to T with tag_filter) until N messages arrived (or deadline_ms),
// acking each one; with check_empty, receives once more and reports what came (nothing, once everything was
// acked) and how long that receive took.
import { format } from 'node:util';
import { Producer, SimpleConsumer } from 'rocketmq-client-nodejs';

const [ endpoint, rawArgs ] = process.argv.slice(2);
const args = JSON.parse(rawArgs);

// The default logger (egg-logger) is closed by the first client's shutdown and then complains on stderr when
// the next one logs: one logger of our own for every client instead.
const verbose = process.env.RS_NODE_VERBOSE === '1';
const say = level => (...parts) => {
  process.stderr.write(`[node-client ${level}] ${format(...parts)}\n`);
};
const logger = {
  info: verbose ? say('INFO') : () => {},
  debug: verbose ? say('DEBUG') : undefined,
  warn: say('WARN'),
  error: say('ERROR'),
};

function view(m) {
  return {
    topic: m.topic,
    message_id: m.messageId,
    body_b64: m.body.toString('base64'),
    tag: m.tag ?? null,
    keys: [ ...m.keys ].sort(),
    properties: Object.fromEntries(m.properties),
    attempt: m.deliveryAttempt ?? null,
    born_host: m.bornHost,
    born_ms: m.bornTimestamp ? m.bornTimestamp.getTime() : null,
    offset: m.offset ?? null,
    corrupted: m.corrupted === true,
  };
}

async function produce(out) {
  const producer = new Producer({ endpoints: endpoint, topics: [ args.topic ], requestTimeout: 5000, logger });
  stage = 'producer startup';
  await producer.startup();
  stage = 'send';
  try {
    for (const spec of args.send) {
      const receipt = await producer.send({
        topic: args.topic,
        body: Buffer.from(spec.body_b64, 'base64'),
        tag: spec.tag,
        keys: spec.keys ?? [],
        properties: new Map(Object.entries(spec.properties ?? {})),
      });
      out.sent.push({ message_id: receipt.messageId, offset: Number(receipt.offset) });
    }
  } finally {
    await producer.shutdown();
  }
}

async function consume(out) {
  const consumer = new SimpleConsumer({
    endpoints: endpoint,
    consumerGroup: args.group,
    subscriptions: new Map([[ args.topic, args.tag_filter ?? '*' ]]),
    awaitDuration: args.await_ms ?? 1000,
    requestTimeout: 5000,
    logger,
  });
  stage = 'consumer startup';
  await consumer.startup();
  stage = 'receive';
  try {
    const want = args.receive;
    const deadline = Date.now() + (args.deadline_ms ?? 15000);
    while (out.received.length < want && Date.now() < deadline) {
      const got = await consumer.receive(32, args.invisible_ms ?? 15000);
      for (const m of got) {
        out.received.push(view(m));
        await consumer.ack(m);
        out.acked += 1;
      }
    }
    if (args.check_empty) {
      const t = Date.now();
      out.after_ack = (await consumer.receive(32, args.invisible_ms ?? 15000)).map(view);
      out.after_ack_ms = Date.now() - t;
    }
  } finally {
    await consumer.shutdown();
  }
}

const out = { sent: [], received: [], acked: 0 };
let stage = 'start';
// startup() waits, without a time limit, for the Settings the server answers on the Telemetry stream
const watchdog = setTimeout(() => {
  process.stderr.write(`produce_consume.mjs: timed out in stage "${stage}" after ${args.timeout_ms ?? 60000} ms` +
    (stage.endsWith('startup') ? ' (no Settings command came back on the Telemetry stream?)' : '') + '\n');
  process.stdout.write(JSON.stringify({ ...out, error: `timeout in ${stage}` }) + '\n');
  process.exit(2);
}, args.timeout_ms ?? 60000);
watchdog.unref();
try {
  if (args.send && args.send.length) {
    await produce(out);
  }
  if (args.receive) {
    await consume(out);
  }
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(0);
} catch (err) {
  process.stderr.write(`produce_consume.mjs failed: ${err && err.stack ? err.stack : err}\n`);
  process.stdout.write(JSON.stringify({ ...out, error: String(err) }) + '\n');
  process.exit(1);
}
