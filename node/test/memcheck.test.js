// The addon's C under valgrind memcheck (node/test/memcheck.sh runs this
// file so in the 'valgrind' test setup; a plain smoke test otherwise):
// every path of the addon once: open, consume (allowed, denied, store
// error), get, delete, penalty/reward, bad input, a stalled call that
// times out, on memory://, a real redis-server (tx=auto: the loop's
// own connection; tx=watch: the worker threads) and memcached (counters
// on the store's channel; token_bucket's consume()s of a tick in batches).
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { RateLimiterDrl, RateLimiterRes, hasAdjust } = require('..');
const servers = require('./servers');

async function paths(store) {
  const l = new RateLimiterDrl({ store, points: 2, duration: 60, keyPrefix: 'mc' });
  await l.ready();
  await l.consume('k');
  await l.consume(Buffer.from('k'));
  await assert.rejects(l.consume('k'), RateLimiterRes);
  assert.strictEqual((await l.get('k')).consumedPoints, 2);
  assert.strictEqual(await l.get('other'), null);
  assert.strictEqual(await l.delete('k'), true);
  await l.consume('x'.repeat(1000));
  if (hasAdjust) {
    await l.penalty('p', 3);
    await l.reward('p', 1);
  }
  await assert.rejects(l.consume(7), TypeError);
  await assert.rejects(l.consume('k', -1), RangeError);
  await assert.rejects(l.consume('', 1), RangeError);
  await assert.rejects(l.delete(''), RangeError);
}

test('memory://', () => paths('memory://'));

// memory://'s consume()s of one tick, decided together (decideNowMany):
// more than its stack holds (64), a bad key and points, a long key, and a
// store error (max_keys=1).
test('memory://: a tick of consume()s', async () => {
  const l = new RateLimiterDrl({ store: 'memory://?max_keys=1', points: 100, duration: 60 });
  await l.ready();
  const ps = [];
  for (let i = 0; i < 70; i++) ps.push(l.consume(i % 7 ? 'k' : 'L'.repeat(300)).catch((e) => e));
  ps.push(l.consume(42).catch((e) => e), l.consume('k', 1.5).catch((e) => e));
  const out = await Promise.all(ps);
  assert.ok(out[0] instanceof RateLimiterRes && out[1] instanceof Error); // 'k': no room
  assert.ok(out[70] instanceof TypeError && out[71] instanceof RangeError);
  // Every key a string, long ones past the 256-byte buffer a key is
  // read into, with an empty key and bad points among them.
  const js = [];
  for (let i = 0; i < 70; i++) js.push(l.consume(i % 7 ? 'k' : '\uD834\uDD1E'.repeat(100) + i).catch((e) => e));
  js.push(l.consume('', 1).catch((e) => e), l.consume('k', 1.5).catch((e) => e));
  const jout = await Promise.all(js);
  assert.ok(jout[1] instanceof Error && !(jout[1] instanceof RateLimiterRes)); // no room
  assert.ok(jout[70] instanceof RangeError && jout[71] instanceof RangeError);
});

test('bad spec, bad URI', async () => {
  assert.throws(() => new RateLimiterDrl({ points: -1 }), TypeError);
  await assert.rejects(new RateLimiterDrl({ store: 'nope://' }).consume('a'), TypeError);
});

test('redis://', async (t) => {
  const r = await servers.redis(t);
  if (!r) return;
  t.after(() => r.stop());
  for (const tx of ['auto', 'watch']) await paths('redis://127.0.0.1:' + r.port + '?tx=' + tx);
  // A call that times out on a stopped server, then one that cannot connect.
  const l = new RateLimiterDrl({ store: 'redis://127.0.0.1:' + r.port + '?timeout_ms=300' });
  await l.consume('a');
  await servers.pause(r.pid);
  try {
    await assert.rejects(l.consume('a'), Error);
  } finally {
    process.kill(r.pid, 'SIGCONT');
  }
});

test('memcached://', async (t) => {
  const m = await servers.memcached(t);
  if (!m) return;
  t.after(() => m.stop());
  const store = 'memcached://127.0.0.1:' + m.port + '?timeout_ms=300';
  await paths(store);
  // consume()s of one tick: batches (token_bucket: gets/cas on the
  // workers), with a bad key and bad points in them.
  const l = new RateLimiterDrl({ store, points: 2, duration: 60, keyPrefix: 'mcb',
    algorithm: 'token_bucket' });
  await l.ready();
  const lc = new RateLimiterDrl({ store, points: 2, duration: 60, keyPrefix: 'mcc' });
  await lc.ready();
  const got = await Promise.allSettled([l.consume('a'), l.consume(7), l.consume('a'),
    l.consume('a'), l.consume('b', -1), l.consume(Buffer.from('b'))]);
  assert.deepStrictEqual(got.map((s) => s.status),
    ['fulfilled', 'rejected', 'fulfilled', 'rejected', 'rejected', 'fulfilled']);
  // A batch that times out, then one of its own while the store fails
  // (node_batch checks the outcomes; here the paths are what count).
  await servers.pause(m.pid);
  try {
    await Promise.allSettled([l.consume('c'), l.consume('d')]);
    await Promise.allSettled([l.consume('e')]);
    // the channel's calls time out too
    await Promise.allSettled([lc.consume('c'), lc.consume('d')]);
  } finally {
    process.kill(m.pid, 'SIGCONT');
  }
});
