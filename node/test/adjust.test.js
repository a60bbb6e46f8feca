// penalty() and reward() (drl_adjust) are exact on every algorithm, on
// memory://, Redis (each tx) and memcached: after them, consume() admits
// exactly what the arithmetic says. Limits of 10 a day, so no quota comes
// back during the test (except across midnight UTC).
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { RateLimiterDrl, RateLimiterRes, hasAdjust } = require('..');
const servers = require('./servers');

const ALGORITHMS = ['fixed_window', 'sliding_window', 'subwindow', 'token_bucket', 'gcra',
  'sliding_log'];
const LIMIT = 10;
const uniq = () => 'a' + process.pid + '-' + Math.random().toString(36).slice(2);

// How many consume() calls pass before the first denial (at most LIMIT + 1).
async function admits(l, key) {
  for (let n = 0; n <= LIMIT; n++) {
    const ok = await l.consume(key).then(() => true, (e) => {
      if (e instanceof Error) throw e;
      return false;
    });
    if (!ok) return n;
  }
  return LIMIT + 1;
}

async function exact(store) {
  for (const algorithm of ALGORITHMS) {
    const l = new RateLimiterDrl({ store, algorithm, points: LIMIT, duration: 86400, keyPrefix: 'adj' });
    const what = store + ' ' + algorithm;
    // A penalty consumes: 3 taken, 7 left.
    let key = uniq();
    const p = await l.penalty(key, 3);
    assert.ok(p instanceof RateLimiterRes, what);
    assert.strictEqual(p.remainingPoints, LIMIT - 3, what + ': penalty 3');
    assert.strictEqual((await l.get(key)).consumedPoints, 3, what);
    assert.strictEqual(await admits(l, key), LIMIT - 3, what + ': after penalty 3');
    // A reward gives back: 2 more.
    const r = await l.reward(key, 2);
    assert.strictEqual(r.remainingPoints, 2, what + ': reward 2');
    assert.strictEqual(await admits(l, key), 2, what + ': after reward 2');
    // A penalty past the limit, then rewards back to it.
    await l.penalty(key, 4);
    assert.strictEqual(await admits(l, key), 0, what + ': over the limit');
    await l.reward(key, 4);
    assert.strictEqual(await admits(l, key), 0, what + ': back at the limit');
    await l.reward(key, 1);
    assert.strictEqual(await admits(l, key), 1, what + ': one given back');
    // A reward never goes beyond a full quota.
    key = uniq();
    await l.reward(key, 5);
    assert.strictEqual(await admits(l, key), LIMIT, what + ': reward on a full quota');
    // Zero changes nothing; bad points are rejected.
    key = uniq();
    await l.consume(key, 4);
    await l.penalty(key, 0);
    await l.reward(key, 0);
    assert.strictEqual((await l.get(key)).consumedPoints, 4, what + ': 0 changes nothing');
    await assert.rejects(l.penalty(key, -1), RangeError);
    await assert.rejects(l.reward(key, 1.5), RangeError);
    // A message names the points the caller gave, not reward's delta.
    await assert.rejects(l.reward(key, 1.5), /got 1\.5$/);
    await assert.rejects(l.reward(key, 2 ** 60), /points 1152921504606846976 is above 2\^53/);
    // Bad input, so DRL_EINVAL, as every other bad points argument.
    await assert.rejects(l.reward(key, -1), { name: 'RangeError', code: 'DRL_EINVAL',
      message: /points -1 is negative/ });
    for (const call of [() => l.reward(key, 1e9 + 1), () => l.penalty(key, 1e9 + 1)]) {
      await assert.rejects(call(), { name: 'RangeError', code: 'DRL_EINVAL',
        message: /^points 1000000001 is above 1000000000/ });
    }
    await assert.rejects(l.penalty(7, 1), TypeError);
  }
}

// Before issue 41's C half (drl_adjust) is in the libdrl loaded, there is
// nothing to test: penalty()/reward() reject DRL_ENOTSUP.
const skip = !hasAdjust && 'the libdrl loaded has no drl_adjust()';

test('without drl_adjust(), penalty and reward reject DRL_ENOTSUP', { skip: hasAdjust }, async () => {
  const l = new RateLimiterDrl();
  await assert.rejects(l.penalty('k'), (e) => e.code === 'DRL_ENOTSUP');
  await assert.rejects(l.reward('k'), (e) => e.code === 'DRL_ENOTSUP');
});

test('memory://', { skip }, () => exact('memory://'));

test('redis://, each tx', { skip }, async (t) => {
  const r = await servers.redis(t);
  if (!r) return;
  t.after(() => r.stop());
  for (const tx of ['auto', 'lua', 'watch']) {
    await exact('redis://127.0.0.1:' + r.port + '?timeout_ms=10000&tx=' + tx);
  }
});

test('memcached://', { skip }, async (t) => {
  const m = await servers.memcached(t);
  if (!m) return;
  t.after(() => m.stop());
  await exact('memcached://127.0.0.1:' + m.port + '?timeout_ms=10000');
});
