// A peer's client, for scripts/bench_client.sh only (never part of the
// library): rate-limiter-flexible's RateLimiterRedis on ioredis, one
// process, IN_FLIGHT consume() calls in flight on 10,000 keys for SECONDS,
// limits never reached. Prints "decisions seconds" on stdout.
//   node rlf_client.js PORT SECONDS IN_FLIGHT
'use strict';
const Redis = require('ioredis');
const { RateLimiterRedis } = require('rate-limiter-flexible');

const [port, seconds, inflight] = process.argv.slice(2).map(Number);
const redis = new Redis({ port, host: '127.0.0.1', enableOfflineQueue: true });
const limiter = new RateLimiterRedis({
  storeClient: redis,
  keyPrefix: 'rlf',
  points: 1000000,
  duration: 60,
});

async function main() {
  await limiter.consume('warm-up');
  let done = 0;
  const start = process.hrtime.bigint();
  const end = start + BigInt(Math.round(seconds * 1e9));
  async function caller() {
    while (process.hrtime.bigint() < end) {
      await limiter.consume('k' + Math.floor(Math.random() * 10000));
      done++;
    }
  }
  await Promise.all(Array.from({ length: inflight }, caller));
  const took = Number(process.hrtime.bigint() - start) / 1e9;
  console.log(done + ' ' + took.toFixed(3));
  redis.disconnect();
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
