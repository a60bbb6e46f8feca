// memcached:// decides its counters (fixed_window, RLF's default,
// sliding_window) on Node's loop through the store's channel, exactly;
// its other algorithms (gets/cas: token_bucket here) decide the consume()s
// made in one tick in batches (the `batch` option, node/src/batch.c): they
// are decided exactly and in call order, a bad key or points rejects its own promise only (with the
// message a lone consume() gets), a store failure rejects each of them,
// and get()/delete()/penalty() come after the consume()s queued before
// them; more than one queue's worth in a tick (1,024) keeps call order.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { RateLimiterDrl, RateLimiterRes } = require('..');
const servers = require('./servers');

// batches serve the algorithms memcached decides on workers (gets/cas)
const TB = 'token_bucket';
const uniq = () => 'b' + process.pid + '-' + Math.random().toString(36).slice(2);

// Each promise's outcome: 'ok N' (resolved, remainingPoints N), 'deny N'
// (rejected with a RateLimiterRes) or the Error's class and message.
async function outcomes(promises) {
  return (await Promise.allSettled(promises)).map((s) => {
    if (s.status === 'fulfilled') {
      assert.ok(s.value instanceof RateLimiterRes);
      return 'ok ' + s.value.remainingPoints;
    }
    if (s.reason instanceof RateLimiterRes) return 'deny ' + s.reason.remainingPoints;
    return s.reason.constructor.name + ': ' + s.reason.message;
  });
}

test('memcached:// batches', async (t) => {
  const m = await servers.memcached(t);
  if (!m) return;
  t.after(() => m.stop());
  const store = 'memcached://127.0.0.1:' + m.port + '?timeout_ms=10000';

  await t.test('one key, one tick: exact and in call order, every batch size', async () => {
    const order = ['ok 4', 'ok 3', 'ok 2', 'ok 1', 'ok 0',
      'deny 0', 'deny 0', 'deny 0', 'deny 0', 'deny 0', 'deny 0', 'deny 0'];
    // batch 1: each consume() on its own, on the workers in any order:
    // exact, not ordered.
    const l1 = new RateLimiterDrl({ store, points: 5, duration: 86400, keyPrefix: 'bt', batch: 1, algorithm: TB });
    await l1.ready();
    const k1 = uniq();
    const got1 = await outcomes(Array.from({ length: 12 }, () => l1.consume(k1)));
    assert.deepStrictEqual(got1.slice().sort(), order.slice().sort(), 'batch 1');
    for (const batch of [2, 3, 8, 16, 1024]) {
      const l = new RateLimiterDrl({ store, points: 5, duration: 86400, keyPrefix: 'bt', batch, algorithm: TB });
      await l.ready();
      const key = uniq();
      const got = await outcomes(Array.from({ length: 12 }, () => l.consume(key)));
      assert.deepStrictEqual(got, order, 'batch ' + batch);
      // points: a 3 after a 1 leaves 1, then a 2 is denied and a 1 passes.
      const k2 = uniq();
      assert.deepStrictEqual(await outcomes([l.consume(k2, 1), l.consume(k2, 3), l.consume(k2, 2),
        l.consume(k2, 1), l.consume(k2, 0)]), ['ok 4', 'ok 1', 'deny 1', 'ok 0', 'ok 0'],
      'batch ' + batch);
    }
  });

  await t.test('many keys in one tick: each exact', async () => {
    const l = new RateLimiterDrl({ store, points: 3, duration: 86400, keyPrefix: 'bt',
      algorithm: TB });
    await l.ready();
    const keys = Array.from({ length: 10 }, uniq);
    const calls = [];
    for (let round = 0; round < 4; round++) {
      for (const k of keys) calls.push(l.consume(Buffer.from(k)));
    }
    const got = await outcomes(calls);
    for (let i = 0; i < keys.length; i++) {
      assert.deepStrictEqual([0, 1, 2, 3].map((r) => got[r * keys.length + i]),
        ['ok 2', 'ok 1', 'ok 0', 'deny 0'], 'key ' + i);
    }
  });

  await t.test('msBeforeNext past 2^30 ms is exact in a batch', async () => {
    const l = new RateLimiterDrl({ store, points: 2, duration: 300 * 86400,
      algorithm: 'token_bucket', keyPrefix: 'bt' });
    await l.ready();
    const got = await Promise.all([l.consume(uniq()), l.consume(uniq())]);
    for (const res of got) {
      assert.ok(Number.isInteger(res.msBeforeNext), String(res.msBeforeNext));
      assert.ok(Math.abs(res.msBeforeNext - 150 * 86400e3) <= 1000, String(res.msBeforeNext));
    }
  });

  await t.test('a bad key or points rejects its own promise only', async () => {
    const l = new RateLimiterDrl({ store, points: 10, duration: 86400, keyPrefix: 'bt',
      algorithm: TB });
    await l.ready();
    const key = uniq();
    const lone = await outcomes([l.consume(42)]); // before the batch: alone in its tick
    await new Promise((r) => setImmediate(r));
    const got = await outcomes([l.consume(key), l.consume(42), l.consume(key, -1),
      l.consume(key, 1.5), l.consume(''), l.consume(key, '1'), l.consume(key)]);
    assert.deepStrictEqual(got, ['ok 9', lone[0], 'RangeError: cost -1 is negative',
      'RangeError: points must be a whole number, got 1.5', got[4],
      'TypeError: points must be a number', 'ok 8']);
    assert.match(got[4], /^RangeError: .*key/);
    assert.match(lone[0], /^TypeError: key must be a string or a Buffer/);
  });

  await t.test('get(), delete() and penalty() come after the queued consume()s', async () => {
    const l = new RateLimiterDrl({ store, points: 10, duration: 86400, keyPrefix: 'bt',
      algorithm: TB });
    await l.ready();
    const key = uniq();
    l.consume(key);
    l.consume(key, 2);
    const [a, b] = await Promise.all([l.get(key), l.get(key)]);
    assert.strictEqual(a.consumedPoints, 3);
    assert.strictEqual(b.consumedPoints, 3);
    l.consume(key);
    assert.strictEqual(await l.delete(key), true);
    assert.strictEqual(await l.get(key), null);
    l.consume(key, 4);
    assert.strictEqual((await l.penalty(key, 1)).remainingPoints, 5);
  });

  await t.test('more than 1,024 in one tick, a get() among them: in call order', async () => {
    // Three queues (1,024 + 476 before the get(), 1,000 after): each is
    // decided after the one before it, whatever flushes it first.
    const l = new RateLimiterDrl({ store, points: 2000, duration: 86400, keyPrefix: 'bt',
      algorithm: TB });
    await l.ready();
    const key = uniq();
    const calls = [];
    for (let i = 0; i < 1500; i++) calls.push(l.consume(key));
    const seen = l.get(key);
    for (let i = 0; i < 1000; i++) calls.push(l.consume(key));
    const got = await outcomes(calls);
    const want = Array.from({ length: 2500 }, (_, i) => (i < 2000 ? 'ok ' + (1999 - i) : 'deny 0'));
    const wrong = got.findIndex((g, i) => g !== want[i]);
    assert.strictEqual(wrong, -1, wrong < 0 ? '' : 'call ' + wrong + ': ' + got[wrong]);
    // the get() after the first 1,500 sees them (and maybe later ones)
    assert.ok((await seen).consumedPoints >= 1500, String((await seen).consumedPoints));
  });

  await t.test('counters: on the loop, no batch, exact', async () => {
    for (const algorithm of ['fixed_window', 'sliding_window']) {
      const l = new RateLimiterDrl({ store, points: 5, duration: 86400, keyPrefix: 'bt',
        algorithm, batch: 16 });
      await l.ready();
      assert.strictEqual(l._batch, 0, algorithm + ' goes to batches');
      const key = uniq();
      const got = await outcomes(Array.from({ length: 12 }, () => l.consume(key)));
      assert.deepStrictEqual(got.slice().sort(), ['ok 4', 'ok 3', 'ok 2', 'ok 1', 'ok 0',
        'deny 0', 'deny 0', 'deny 0', 'deny 0', 'deny 0', 'deny 0', 'deny 0'].sort(), algorithm);
    }
    const tb = new RateLimiterDrl({ store, points: 5, duration: 86400, keyPrefix: 'bt',
      algorithm: TB });
    await tb.ready();
    assert.strictEqual(tb._batch, 16);
  });

  await t.test('the batch option: 1..1024, whole', () => {
    for (const batch of [0, -1, 1.5, 1025, '8', NaN]) {
      assert.throws(() => new RateLimiterDrl({ store, batch }), RangeError, String(batch));
    }
  });
});

test('memcached:// stalled: after the batch in flight, each consume() times out on its own', async (t) => {
  const m = await servers.memcached(t);
  if (!m) return;
  t.after(() => m.stop());
  const timeout = 300;
  const l = new RateLimiterDrl({ store: 'memcached://127.0.0.1:' + m.port + '?timeout_ms=' + timeout,
    points: 100, duration: 60, keyPrefix: 'bt', batch: 8 });
  await l.consume(uniq());
  await servers.pause(m.pid);
  try {
    const round = async () => {
      const t0 = Date.now();
      const took = await Promise.all(Array.from({ length: 8 }, () => l.consume(uniq()).then(
        () => assert.fail('allowed by a stopped memcached'),
        (e) => {
          assert.ok(e instanceof Error, String(e));
          return Date.now() - t0;
        })));
      return Math.max(...took);
    };
    // The batch in flight when the server stopped: its items time out in
    // turn (up to 8 x timeout_ms); the next ones each in one timeout (or
    // at once, once the library counts the server as down).
    await round();
    const worst = await round();
    assert.ok(worst < 4 * timeout, 'a consume() after the stall took ' + worst + ' ms');
  } finally {
    process.kill(m.pid, 'SIGCONT');
  }
  // Back (SIGCONT): batches again, and exact.
  const key = uniq();
  const l2 = new RateLimiterDrl({ store: 'memcached://127.0.0.1:' + m.port, points: 3,
    duration: 60, keyPrefix: 'bt' });
  await l2.ready();
  assert.deepStrictEqual(await outcomes(Array.from({ length: 4 }, () => l2.consume(key))),
    ['ok 2', 'ok 1', 'ok 0', 'deny 0']);
});

test('memcached:// unreachable: every consume() of a batch rejects with the Error', async () => {
  // A port nothing listens on (a memcached started and stopped).
  const m = await servers.memcached({ skip() {} });
  if (!m) return;
  const port = m.port;
  await m.stop();
  const l = new RateLimiterDrl({ store: 'memcached://127.0.0.1:' + port + '?timeout_ms=500',
    points: 10, duration: 60, keyPrefix: 'bt' });
  await l.ready().catch(() => {});
  const key = uniq();
  const got = await Promise.allSettled(Array.from({ length: 10 }, () => l.consume(key)));
  for (const s of got) {
    assert.strictEqual(s.status, 'rejected');
    assert.ok(s.reason instanceof Error, String(s.reason));
    assert.match(s.reason.code, /^DRL_E/);
  }
});
