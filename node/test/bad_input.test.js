// Bad input: each case throws or rejects a TypeError or RangeError whose
// message is the library's (or names the argument), and the process goes
// on (the addon never aborts).
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { RateLimiterDrl } = require('..');

const l = new RateLimiterDrl({ points: 10, duration: 60 });

// The call's rejection (or synchronous throw), which must be `cls`.
async function fails(fn, cls, pattern) {
  let e = null;
  try {
    await fn();
  } catch (x) {
    e = x;
  }
  assert.ok(e instanceof cls, 'expected a ' + cls.name + ', got ' + e);
  assert.match(e.message, pattern);
  // Every error has a code: bad input's is DRL_EINVAL, thrown by index.js
  // or by the addon alike.
  assert.strictEqual(e.code, 'DRL_EINVAL', e.message);
  return e;
}

test('points: negative, fractional, above 2^53, not a number', async () => {
  await fails(() => l.consume('k', -1), RangeError, /cost -1 is negative/);
  await fails(() => l.consume('k', 1.5), RangeError, /whole number/);
  await fails(() => l.consume('k', 2 ** 53), RangeError, /2\^53/);
  await fails(() => l.consume('k', Infinity), RangeError, /whole number/);
  await fails(() => l.consume('k', NaN), RangeError, /whole number/);
  await fails(() => l.consume('k', '1'), TypeError, /points must be a number/);
  await fails(() => l.consume('k', 2n), TypeError, /points must be a number/);
});

test('keys: not a string or Buffer, empty, too long', async () => {
  for (const key of [42, null, undefined, {}, ['a'], Symbol('s')]) {
    await fails(() => l.consume(key), TypeError, /key must be a string or a Buffer/);
    await fails(() => l.get(key), TypeError, /key must be a string or a Buffer/);
    await fails(() => l.delete(key), TypeError, /key must be a string or a Buffer/);
  }
  await fails(() => l.consume(''), RangeError, /key/);
  await fails(() => l.delete(''), RangeError, /key/);
  // An empty Buffer is refused as the empty string is: for its length.
  for (const empty of [Buffer.alloc(0), new Uint8Array(0)]) {
    await fails(() => l.consume(empty), RangeError, /key length 0 is outside/);
    await fails(() => l.get(empty), RangeError, /key length 0 is outside/);
  }
  await fails(() => l.consume('x'.repeat(1024 * 1024 + 1)), RangeError, /key/);
});

test('bad specs throw a TypeError with the library message', async () => {
  const e = await fails(() => new RateLimiterDrl({ points: -1 }), TypeError, /LIMIT "-1"/);
  assert.strictEqual(e.code, 'DRL_EINVAL');
  await fails(() => new RateLimiterDrl({ points: 1.5 }), TypeError, /LIMIT/);
  await fails(() => new RateLimiterDrl({ points: 2 ** 60 }), TypeError, /LIMIT/);
  await fails(() => new RateLimiterDrl({ duration: 0 }), TypeError, /PERIOD|period/);
  await fails(() => new RateLimiterDrl({ algorithm: 'leaky' }), TypeError, /leaky/);
  await fails(() => new RateLimiterDrl({ spec: 'token_bucket:10/1m,burst=x' }), TypeError, /burst/);
  await fails(() => new RateLimiterDrl({ points: '10' }), TypeError, /points must be a number/);
  await fails(() => new RateLimiterDrl({ onError: 'maybe' }), TypeError, /onError/);
  await fails(() => new RateLimiterDrl({ keyPrefix: 'p'.repeat(200) }), TypeError, /prefix/);
  await fails(() => new RateLimiterDrl({ store: 7 }), TypeError, /store must be/);
  // RLF's options that RateLimiterDrl does not carry over are refused, not ignored.
  await fails(() => new RateLimiterDrl({ blockDuration: 10 }), TypeError, /option blockDuration/);
  await fails(() => new RateLimiterDrl({ spec: 'gcra:5/1s', points: 5 }), TypeError, /spec replaces points/);
  await fails(() => new RateLimiterDrl({ storeClient: {} }), TypeError, /option storeClient/);
  await fails(() => new RateLimiterDrl(null), TypeError, /options must be an object/);
  await fails(() => new RateLimiterDrl({ batch: 0 }), RangeError, /batch must be/);
  await fails(() => new RateLimiterDrl({ keyPrefix: 7 }), TypeError, /keyPrefix must be/);
  await fails(() => l.penalty('k', -1), RangeError, /points -1 is negative/);
});

test('bad URIs reject every call with a TypeError and the library message', async () => {
  const cases = [
    ['nope://', /unknown store scheme "nope"/],
    ['redis://127.0.0.1:6379?tx=maybe', /tx/],
    ['redis://127.0.0.1:99999', /port/],
    ['memcached://?timeout_ms=-5', /timeout_ms/],
  ];
  for (const [store, pattern] of cases) {
    const b = new RateLimiterDrl({ store });
    await fails(() => b.consume('k'), TypeError, pattern);
    await fails(() => b.get('k'), TypeError, pattern);
    await fails(() => b.ready(), TypeError, pattern);
  }
});

test('the process is alive and still decides', async () => {
  assert.strictEqual((await l.consume('alive')).remainingPoints, 9);
});
