// RateLimiterDrl's API on memory:// and a real redis-server: what
// consume/get/delete resolve and reject with, RLF's conventions.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { Worker } = require('worker_threads');
const { RateLimiterDrl, RateLimiterRes } = require('..');
const servers = require('./servers');

const uniq = () => 'k' + process.pid + '-' + Math.random().toString(36).slice(2);

// consume() admits exactly `points`, then rejects with RateLimiterRes;
// get() reads without consuming; delete() forgets.
async function semantics(store) {
  const l = new RateLimiterDrl({ store, points: 3, duration: 3600, keyPrefix: 'api' });
  const key = uniq();
  assert.strictEqual(await l.get(key), null);
  const first = await l.consume(key);
  assert.ok(first instanceof RateLimiterRes);
  assert.deepStrictEqual([first.remainingPoints, first.consumedPoints, first.isFirstInDuration],
    [2, 1, true]);
  assert.ok(first.msBeforeNext > 0 && first.msBeforeNext <= 3600 * 1000);
  const second = await l.consume(key, 2);
  assert.deepStrictEqual([second.remainingPoints, second.consumedPoints, second.isFirstInDuration],
    [0, 3, false]);
  const denied = await l.consume(key).then(() => null, (e) => e);
  assert.ok(denied instanceof RateLimiterRes, 'a denial rejects with a RateLimiterRes');
  assert.strictEqual(denied.remainingPoints, 0);
  assert.strictEqual(denied.consumedPoints, 3, 'a denied request consumes nothing');
  assert.ok(denied.msBeforeNext > 0);
  const got = await l.get(key);
  assert.deepStrictEqual([got.remainingPoints, got.consumedPoints], [0, 3]);
  assert.strictEqual(await l.delete(key), true);
  assert.strictEqual(await l.get(key), null);
  assert.strictEqual((await l.consume(Buffer.from(key))).remainingPoints, 2,
    'a Buffer key is the same key as its string');
  // Too many points for the limit: never allowed.
  const never = await l.consume(uniq(), 4).then(() => null, (e) => e);
  assert.ok(never instanceof RateLimiterRes);
  assert.strictEqual(JSON.parse(String(got)).consumedPoints, 3);
}

test('memory://', () => semantics('memory://'));

// A time past 2^30 ms (where index.js stops passing counts on as small
// integers) comes back whole and exact: a token bucket of 2 per 300 days
// is full again 150 days after one is taken.
test('memory://: msBeforeNext past 2^30 ms is exact', async () => {
  const l = new RateLimiterDrl({ points: 2, duration: 300 * 86400, algorithm: 'token_bucket',
    keyPrefix: 'api' });
  await l.ready(); // then decided at once (decideNow), not through the loop
  const res = await l.consume(uniq());
  assert.ok(Number.isInteger(res.msBeforeNext), String(res.msBeforeNext));
  assert.ok(Math.abs(res.msBeforeNext - 150 * 86400e3) <= 1000, String(res.msBeforeNext));
  assert.deepStrictEqual([res.remainingPoints, res.consumedPoints], [1, 1]);
});

// One tick of calls, each its own answer. memory:// decides each call at
// once (decideNow: its fields and outcome in one shared Float64Array,
// read back before the next call); Redis through Node's loop, each
// promise settled by settleOne() from its slot id, the fields in the same
// array. Many consume()s and get()s made in one tick, on distinct keys
// and on one key, each settle with their own key's answer, in call order
// (Redis: the consume()s of one pipelined connection; a get() there is
// not ordered with them, so only its own consistency is checked); a bad
// argument rejects its own call only. Two rounds, so the second reuses
// the first's slots.
async function oneTick(store, getOrdered) {
  const l = new RateLimiterDrl({ store, points: 3, duration: 3600, keyPrefix: 'api' });
  await l.ready(); // memory://: then decided at once (decideNow)
  for (let round = 0; round < 2; round++) await oneTickRound(l, getOrdered);
}

async function oneTickRound(l, getOrdered) {
  const hot = uniq();
  const cold = Array.from({ length: 8 }, uniq);
  const calls = [];
  const call = (what, p) => calls.push([what, p.then((v) => ['ok', v], (e) => ['no', e])]);
  call('get fresh', l.get(cold[0]));
  for (let i = 0; i < 5; i++) {
    call('hot ' + i, l.consume(hot));
    call('cold ' + i, l.consume(cold[i], i < 4 ? i : 4)); // 4 > points: denied
    if (i === 1) call('get hot', l.get(hot));
  }
  call('bad key', l.consume(42));
  call('bad points', l.consume(cold[5], 1.5));
  call('negative points', l.consume(cold[5], -1));
  call('bad get', l.get({}));
  call('cold 5', l.consume(cold[5], 2));
  const got = {};
  for (const [what, p] of calls) got[what] = await p;
  const fields = ([how, r]) => [how, r.remainingPoints, r.consumedPoints, r.isFirstInDuration];
  assert.deepStrictEqual(got['get fresh'], ['ok', null]);
  for (let i = 0; i < 5; i++) {
    assert.ok(got['hot ' + i][1] instanceof RateLimiterRes, 'hot ' + i);
    assert.deepStrictEqual(fields(got['hot ' + i]),
      i < 3 ? ['ok', 2 - i, i + 1, i === 0] : ['no', 0, 3, false], 'hot ' + i);
  }
  const gh = fields(got['get hot']);
  if (getOrdered) {
    assert.deepStrictEqual(gh, ['ok', 1, 2, false]);
  } else {
    assert.ok(gh[0] === 'ok' && gh[1] + gh[2] === 3 && gh[2] >= 1, String(gh));
  }
  // cold[0]: 0 points (a read); cold[1..3]: that many; cold[4]: 4 > 3,
  // never allowed, nothing used.
  assert.deepStrictEqual(fields(got['cold 0']), ['ok', 3, 0, false]);
  for (let i = 1; i < 4; i++) {
    assert.deepStrictEqual(fields(got['cold ' + i]), ['ok', 3 - i, i, true], 'cold ' + i);
  }
  assert.deepStrictEqual(fields(got['cold 4']), ['no', 3, 0, false]);
  assert.ok(got['bad key'][1] instanceof TypeError, String(got['bad key'][1]));
  assert.ok(got['bad points'][1] instanceof RangeError, String(got['bad points'][1]));
  assert.ok(got['negative points'][1] instanceof RangeError, String(got['negative points'][1]));
  assert.ok(got['bad get'][1] instanceof TypeError, String(got['bad get'][1]));
  assert.deepStrictEqual(fields(got['cold 5']), ['ok', 1, 2, true],
    'the bad calls on cold[5] consumed nothing');
  // Many distinct keys in the same tick: each its own count.
  const many = Array.from({ length: 300 }, uniq);
  const firsts = await Promise.all(many.map((k, i) => l.consume(k, 1 + (i % 3))));
  firsts.forEach((r, i) => assert.deepStrictEqual([r.consumedPoints, r.remainingPoints],
    [1 + (i % 3), 2 - (i % 3)], 'key ' + i));
}

test('memory://: one tick of calls, each its own answer', () => oneTick('memory://', true));

// memory://'s consume()s of one tick are decided together (index.js
// queues them; one decideNowMany() from a microtask, up to 1,024 a call,
// drl_allow_batch in call order; rows of the shared batch array). Each
// gets its own key's answer in call order across queues of 1,024, a bad
// key or points (a lone call's message) or a store error fails its own
// call only, and a get() made between consume()s sees those before it.
test('memory://: a tick\'s consume()s decided together, each its own answer', async () => {
  const l = new RateLimiterDrl({ points: 1000, duration: 3600, keyPrefix: 'api' });
  await l.ready();
  // 2,500 on one key and one on another every 100th: three queues.
  const hot = uniq();
  const side = uniq();
  const ps = [];
  const sides = [];
  let got = null;
  for (let i = 0; i < 2500; i++) {
    ps.push(l.consume(hot).then((r) => ['ok', r], (r) => ['no', r]));
    if (i % 100 === 0) sides.push(l.consume(side, 2));
    if (i === 1500) got = l.get(hot);
  }
  const out = await Promise.all(ps);
  out.forEach(([how, r], i) => {
    assert.ok(r instanceof RateLimiterRes, 'call ' + i);
    assert.deepStrictEqual([how, r.consumedPoints, r.remainingPoints],
      i < 1000 ? ['ok', i + 1, 999 - i] : ['no', 1000, 0], 'call ' + i);
  });
  (await Promise.all(sides)).forEach((r, j) =>
    assert.deepStrictEqual([r.consumedPoints, r.isFirstInDuration], [2 * (j + 1), j === 0]));
  assert.strictEqual((await got).consumedPoints, 1000, 'get() after 1,501 consume()s');

  // Bad calls among good ones: the error a lone call gets, nothing
  // consumed; a long key (past the 256-byte buffer) and its Buffer are one.
  const long = 'L'.repeat(300) + uniq();
  const bad = [['', 1], ['x'.repeat((1 << 20) + 1), 1], [42, 1], [uniq(), 1.5], [uniq(), -1],
    [uniq(), 2 ** 53], [uniq(), 'x'], [uniq(), 1001]];
  const lone = [];
  for (const [k, p] of bad) lone.push(await l.consume(k, p).then(() => null, (e) => e));
  const tick = [];
  const longs = [];
  for (const [k, p] of bad) {
    tick.push(l.consume(k, p).then(() => null, (e) => e));
    longs.push(l.consume(long));
    longs.push(l.consume(Buffer.from(long)));
  }
  const errs = await Promise.all(tick);
  errs.forEach((e, j) => {
    assert.strictEqual(e.constructor, lone[j].constructor, 'bad call ' + j);
    assert.strictEqual(e.message, lone[j].message, 'bad call ' + j);
    if (e instanceof Error) assert.strictEqual(e.code, lone[j].code, 'bad call ' + j);
  });
  (await Promise.all(longs)).forEach((r, j) => assert.strictEqual(r.consumedPoints, j + 1));

  // A store error (max_keys=2: a third key does not fit) fails its own
  // call only, with the library's message.
  const full = new RateLimiterDrl({ store: 'memory://?max_keys=2', points: 5, duration: 3600 });
  await full.ready();
  const fp = ['a', 'b', 'c', 'a', 'd', 'b'].map((k) => full.consume(k).then((r) => r, (e) => e));
  const [a, b, c, a2, d, b2] = await Promise.all(fp);
  assert.deepStrictEqual([a.consumedPoints, b.consumedPoints, a2.consumedPoints,
    b2.consumedPoints], [1, 1, 2, 2]);
  for (const e of [c, d]) {
    assert.ok(e instanceof Error && !(e instanceof RateLimiterRes), String(e));
    assert.match(e.message, /max_keys=2/);
    assert.match(e.code, /^DRL_E/);
  }
});

// A tick's string keys, decided together (decideNowMany), each name the
// bytes a lone call's key does: its UTF-8 (a lone surrogate as U+FFFD,
// as Buffer.from writes it), with '\0' inside keys, a surrogate pair
// split across two keys, every length, and more than 4 KB in all.
// Buffer.from(key) in a later tick (read on its own) finds each key's
// one point.
test('memory://: a tick of string keys names the bytes lone calls do', async () => {
  const l = new RateLimiterDrl({ points: 100, duration: 3600, keyPrefix: 'joined' });
  await l.ready();
  const u = uniq();
  const keys = [u + '\uD83D', '\uDE00' + u, '\0', u + '\0' + u, '\uD83D\uDE00' + u, 'é' + u,
    '\u20AC' + u, '\uDFFFa', '\uD800', u + '\uD83D\uDE00', 'x', u + 'ÿ'];
  for (let i = 0; i < 24; i++) keys.push(u + i + 'y'.repeat(i * 20) + '\uD834\uDD1E'.repeat(i));
  const first = await Promise.all(keys.map((k) => l.consume(k)));
  first.forEach((r, i) => assert.strictEqual(r.consumedPoints, 1, 'key ' + i));
  for (const [i, k] of keys.entries()) {
    const r = await l.consume(Buffer.from(k));
    assert.strictEqual(r.consumedPoints, 2, 'key ' + i + ' as a Buffer');
  }
  // Mixed with a Buffer, a tick is read key by key: the same keys.
  const mixed = await Promise.all([...keys.map((k) => l.consume(k)), l.consume(Buffer.from('b'))]);
  mixed.slice(0, -1).forEach((r, i) => assert.strictEqual(r.consumedPoints, 3, 'key ' + i));
});

// A key read into a fixed buffer (256 bytes; a key of 4 KB past it too)
// is read again whole when it may have been cut: V8
// stops before a character that does not fit, a few bytes short of the
// end, so a key that only looked whole named its first bytes (two keys
// one limit, and a key not its Buffer's).
test('memory://: a key cut short by a buffer is read whole', async () => {
  const l = new RateLimiterDrl({ points: 10, duration: 3600, keyPrefix: 'cut' });
  await l.ready();
  const u = uniq();
  for (const room of [256, 4096]) {
    const stem = u + 'a'.repeat(room - 3 - u.length) + '\uD834\uDD1E';
    const [a, b] = [stem + 'X', stem + 'Y'];
    assert.strictEqual((await l.consume(a)).consumedPoints, 1, room + ': a');
    assert.strictEqual((await l.consume(b)).consumedPoints, 1, room + ': b, not a');
    assert.strictEqual(await l.get(stem + 'Z'), null, room + ': get(), not a');
    assert.strictEqual((await l.consume(Buffer.from(a))).consumedPoints, 2, room + ': Buffer a');
    const [a3] = await Promise.all([l.consume(a), l.consume(Buffer.from('m'))]);
    assert.strictEqual(a3.consumedPoints, 3, room + ': a in a mixed tick');
  }
});

test('redis://: one tick of calls through the loop, each its own answer', async (t) => {
  const r = await servers.redis(t);
  if (!r) return;
  try {
    await oneTick('redis://127.0.0.1:' + r.port + '?timeout_ms=10000', false);
  } finally {
    r.stop();
  }
});

test('redis://, each tx', async (t) => {
  const r = await servers.redis(t);
  if (!r) return;
  try {
    for (const tx of ['auto', 'lua', 'watch']) {
      await semantics('redis://127.0.0.1:' + r.port + '?timeout_ms=10000&tx=' + tx);
    }
  } finally {
    r.stop();
  }
});

test('every algorithm by name; fixed_window by default', async () => {
  assert.match(new RateLimiterDrl({ points: 5, duration: 60 }).spec, /^fixed_window:5\/60s$/);
  for (const algorithm of ['fixed_window', 'sliding_window', 'subwindow', 'token_bucket',
    'gcra', 'sliding_log']) {
    const l = new RateLimiterDrl({ algorithm, points: 2, duration: 0.5 });
    const key = uniq();
    await l.consume(key);
    await l.consume(key);
    await assert.rejects(l.consume(key), RateLimiterRes, algorithm);
  }
});

test('a store that cannot be reached rejects with an Error and the library message', async () => {
  // A port nothing listens on (freed at once).
  const net = require('net');
  const port = await new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
  const l = new RateLimiterDrl({ store: 'redis://127.0.0.1:' + port + '?timeout_ms=500' });
  const e = await l.consume('a').then(() => null, (x) => x);
  assert.ok(e instanceof Error, String(e));
  assert.match(e.code, /^DRL_E/);
  assert.match(e.message, /127\.0\.0\.1/);
});

test('a worker_thread has its own addon state and decides too', async () => {
  const code = `
    const { parentPort } = require('worker_threads');
    const { RateLimiterDrl } = require(${JSON.stringify(require.resolve('..'))});
    const l = new RateLimiterDrl({ points: 1, duration: 60 });
    l.consume('w').then((r) => l.consume('w').then(() => 'allowed twice', () => r.remainingPoints))
      .then((v) => parentPort.postMessage(v));`;
  const w = new Worker(code, { eval: true });
  const v = await new Promise((resolve, reject) => {
    w.on('message', resolve);
    w.on('error', reject);
  });
  assert.strictEqual(v, 0);
  await w.terminate();
});
