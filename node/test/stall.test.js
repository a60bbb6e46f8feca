// A stalled Redis (SIGSTOP): other JS keeps running (a timer fires while
// the decision waits), and the promise settles at timeout_ms: rejected
// with an Error without on_error, decided by the on_error policy with it.
// Bounds are generous (no judgement of the machine's speed): the promise
// must not settle before timeout_ms, and must settle within 30 s.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { RateLimiterDrl, RateLimiterRes } = require('..');
const servers = require('./servers');

const TIMEOUT_MS = 400;

// Start call() on the stalled server (default: l.consume(key)); how it
// settled, how long it took and how many times a 10 ms timer fired
// meanwhile.
async function stalled(l, key, call = () => l.consume(key)) {
  let ticks = 0;
  const timer = setInterval(() => ticks++, 10);
  const t0 = process.hrtime.bigint();
  let guard;
  const outcome = await Promise.race([
    call().then((v) => ({ ok: v }), (e) => ({ err: e })),
    new Promise((resolve) => { guard = setTimeout(() => resolve({ hung: true }), 30000); }),
  ]);
  clearTimeout(guard);
  clearInterval(timer);
  outcome.ms = Number(process.hrtime.bigint() - t0) / 1e6;
  outcome.ticks = ticks;
  return outcome;
}

test('stalled redis-server: timers run, promises settle at timeout_ms', async (t) => {
  const r = await servers.redis(t);
  if (!r) return;
  // breaker_failures=0: every call goes to the stalled server.
  const base = 'redis://127.0.0.1:' + r.port + '?timeout_ms=' + TIMEOUT_MS + '&breaker_failures=0';
  try {
    for (const tx of ['auto', 'lua', 'watch']) {
      const store = base + '&tx=' + tx;
      const plain = new RateLimiterDrl({ store, points: 100, duration: 60, keyPrefix: 's' + tx });
      const deny = new RateLimiterDrl({ store, points: 100, duration: 60, keyPrefix: 'd' + tx, onError: 'deny' });
      const allow = new RateLimiterDrl({ store, points: 100, duration: 60, keyPrefix: 'a' + tx, onError: 'allow' });
      for (const l of [plain, deny, allow]) await l.consume('warm');
      await servers.pause(r.pid);
      try {
        // delete() and a store's open run on libuv's thread pool: the
        // JS thread does not wait for them either.
        const [p, d, a, del, open] = await Promise.all([stalled(plain, 'x'), stalled(deny, 'x'),
          stalled(allow, 'x'), stalled(plain, 'x', () => plain.delete('x')),
          stalled(null, null, () => new RateLimiterDrl({ store }).ready())]);
        for (const o of [p, d, a, del, open]) {
          assert.ok(!o.hung, tx + ': settled within 30 s');
          assert.ok(o.ms >= TIMEOUT_MS * 0.9, tx + ': settled after ' + o.ms + ' ms, before timeout_ms');
          assert.ok(o.ticks > 0, tx + ': the timer fired while the decision waited');
        }
        assert.ok(p.err instanceof Error, tx + ': ' + String(p.err || p.ok));
        assert.match(p.err.code, /^DRL_E(TIMEDOUT|UNAVAILABLE|STORE)$/);
        assert.ok(d.err instanceof RateLimiterRes, tx + ': on_error=deny rejects with a denial');
        assert.ok(a.ok instanceof RateLimiterRes, tx + ': on_error=allow resolves');
        assert.ok(del.err instanceof Error && /^DRL_E/.test(del.err.code), tx + ': delete ' + del.err);
        assert.ok(open.err instanceof Error && /^DRL_E/.test(open.err.code), tx + ': open ' + open.err);
      } finally {
        process.kill(r.pid, 'SIGCONT');
      }
      // Back: decisions from the store again (generous deadline).
      const deadline = Date.now() + 30000;
      for (;;) {
        const ok = await plain.consume('after').then(() => true, () => false);
        if (ok) break;
        assert.ok(Date.now() < deadline, tx + ': the store is back within 30 s');
        await servers.sleep(50);
      }
    }
  } finally {
    r.stop();
  }
});
