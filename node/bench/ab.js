// Two builds of the addon's memory:// path in one Node process, for
// differences of a few per cent that separate processes on a shared
// machine cannot show: each build's RateLimiterDrl runs the loop of
// bench.js (IN_FLIGHT callers, 10,000 distinct keys, limits never
// reached) for MS milliseconds in turn, SLICES times each (A B, B A, ...),
// and the Node process's CPU time per decision is taken per slice. Prints
// the median per build and the median of the slices' B/A ratios.
//   node node/bench/ab.js REPO_A:BUILD_A REPO_B:BUILD_B [IN_FLIGHT] [SLICES] [MS]
// REPO/node/index.js with BUILD/node/drl.node (two files: one addon each;
// a copy of the same build will do). The addons share the libdrl loaded
// first (one soname), so this compares index.js and the addon, not libdrl.
'use strict';
const fs = require('fs');
const path = require('path');

const [a, b, inflight = '16', slices = '60', ms = '100'] = process.argv.slice(2);
if (!a || !b) {
  console.error('usage: node ab.js REPO_A:BUILD_A REPO_B:BUILD_B [IN_FLIGHT] [SLICES] [MS]');
  process.exit(2);
}

// One addon file each: a file loaded twice is one addon, whose init()
// the second index.js would take over from the first.
const addons = [a, b].map((spec) => fs.realpathSync(path.resolve(spec.split(':')[1], 'node',
  'drl.node')));
if (addons[0] === addons[1]) {
  console.error('ab.js: A and B load the same ' + addons[0] + ': copy it for one of them');
  process.exit(2);
}

function limiter(spec, name) {
  const [repo, build] = spec.split(':');
  process.env.LIBDRL_NODE_ADDON = path.resolve(build, 'node', 'drl.node');
  const { RateLimiterDrl } = require(path.resolve(repo, 'node'));
  return new RateLimiterDrl({ keyPrefix: 'ab-' + name, points: 1000000, duration: 60 });
}
const lims = { A: limiter(a, 'A'), B: limiter(b, 'B') };
const keys = Array.from({ length: 10000 }, (_, i) => 'k' + i);

// bench.js's loop: callers each awaiting consume() on a random key.
async function run(l, end, count) {
  let done = 0;
  async function caller() {
    while (process.hrtime.bigint() < end) {
      for (let i = 0; i < 16; i++) await l.consume(keys[Math.floor(Math.random() * 10000)]);
      done += 16;
    }
  }
  await Promise.all(Array.from({ length: count }, caller));
  return done;
}

const median = (xs) => {
  const s = [...xs].sort((x, y) => x - y);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
};

async function main() {
  const n = Number(inflight);
  for (const l of Object.values(lims)) {
    await l.ready();
    await run(l, process.hrtime.bigint() + 300000000n, n); // warm-up
  }
  const cpu = { A: [], B: [] };
  for (let s = 0; s < Number(slices); s++) {
    for (const k of s % 2 ? ['B', 'A'] : ['A', 'B']) {
      const c0 = process.cpuUsage();
      const done = await run(lims[k], process.hrtime.bigint() + BigInt(Number(ms) * 1e6), n);
      const c = process.cpuUsage(c0);
      cpu[k].push(((c.user + c.system) * 1000) / done);
    }
  }
  const ratio = median(cpu.B.map((x, i) => x / cpu.A[i]));
  console.log(`${n} in flight, ${slices} slices of ${ms} ms each: Node CPU ns per decision `
    + `A ${median(cpu.A).toFixed(0)}, B ${median(cpu.B).toFixed(0)}; B/A by slice ${ratio.toFixed(3)}`);
}
main().then(() => process.exit(0), (e) => {
  console.error(e);
  process.exit(1);
});
