// One cell of scripts/bench_node.sh: IN_FLIGHT consume() calls in flight
// in this one Node process, on KEYS (default 10,000) distinct keys, for
// SECONDS, limits never reached (every decision an allowed write), after
// a warm-up.
// Prints "decisions seconds cpu_seconds": cpu_seconds is this process's
// CPU time (user + system, all its threads: process.cpuUsage()) over the
// same SECONDS, which a busy neighbour does not inflate as it does the
// wall clock (the servers' CPU is not in it).
//   node bench.js drl|rlf|none redis|memcached|memory PORT IN_FLIGHT SECONDS [KEYS]
// KEYS: fewer keys keep both limiters' tables in the CPU's caches (100:
// what a decision costs without the cache misses of 10,000).
// drl: RateLimiterDrl (this addon: LIBDRL_NODE_ADDON or node/drl.node);
// rlf: rate-limiter-flexible's RateLimiterRedis (ioredis),
//      RateLimiterMemcache (memcached) or RateLimiterMemory, from
//      NODE_PATH (the script installs them from npm into a temporary folder).
// none: no limiter, each call a Promise.resolve() of a new RateLimiterRes
//      (the loop's own cost, which both pay; STORE and PORT unused).
// Both: fixed window (RLF's only kind; libdrl's default), 1,000,000
// points per 60 s, keyPrefix 'bench'.
'use strict';
const path = require('path');

const [lib, store, port, inflight, seconds, nkeys = '10000'] = process.argv.slice(2);
const NKEYS = Number(nkeys);
if (!Number.isInteger(NKEYS) || NKEYS < 1) throw new RangeError('KEYS must be a whole number >= 1');
const opts = { keyPrefix: 'bench-' + lib, points: 1000000, duration: 60 };
let limiter;
let close = () => {};
if (lib === 'none') {
  const { RateLimiterRes } = require(path.join(__dirname, '..'));
  limiter = { consume: () => Promise.resolve(new RateLimiterRes(1, 1, 1, false)) };
} else if (lib === 'drl') {
  const { RateLimiterDrl } = require(path.join(__dirname, '..'));
  const uri = { redis: 'redis://127.0.0.1:' + port, memcached: 'memcached://127.0.0.1:' + port,
    memory: 'memory://' }[store];
  limiter = new RateLimiterDrl({ store: uri, ...opts });
} else if (store === 'redis') {
  const Redis = require('ioredis');
  const { RateLimiterRedis } = require('rate-limiter-flexible');
  const client = new Redis({ port: Number(port), host: '127.0.0.1', enableOfflineQueue: true });
  limiter = new RateLimiterRedis({ storeClient: client, ...opts });
  close = () => client.disconnect();
} else if (store === 'memcached') {
  const Memcached = require('memcached');
  const { RateLimiterMemcache } = require('rate-limiter-flexible');
  const client = new Memcached('127.0.0.1:' + port);
  limiter = new RateLimiterMemcache({ storeClient: client, ...opts });
  close = () => client.end();
} else {
  const { RateLimiterMemory } = require('rate-limiter-flexible');
  limiter = new RateLimiterMemory(opts);
}

// The keys, made once: the loop measures the limiters, not string
// concatenation.
const keys = Array.from({ length: NKEYS }, (_, i) => 'k' + i);

// Callers, each awaiting its consume() in turn on a random key, until
// `end` (ns; the clock read every 16 decisions).
async function run(end, count) {
  let done = 0;
  async function caller() {
    while (process.hrtime.bigint() < end) {
      for (let i = 0; i < 16; i++) {
        await limiter.consume(keys[Math.floor(Math.random() * NKEYS)]);
      }
      done += 16;
    }
  }
  await Promise.all(Array.from({ length: count }, caller));
  return done;
}

async function main() {
  await limiter.consume('warm-up');
  await run(process.hrtime.bigint() + 500000000n, Number(inflight)); // 0.5 s
  const cpu0 = process.cpuUsage();
  const start = process.hrtime.bigint();
  const done = await run(start + BigInt(Math.round(Number(seconds) * 1e9)), Number(inflight));
  const took = Number(process.hrtime.bigint() - start) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  console.log(done + ' ' + took.toFixed(3) + ' ' + ((cpu.user + cpu.system) / 1e6).toFixed(3));
  close();
}
main().then(() => process.exit(0), (e) => {
  console.error(e);
  process.exit(1);
});
