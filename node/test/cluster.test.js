// Four processes (node's cluster module), each an http server with its own
// limiter on one shared store, admit exactly the limit on one key: Redis
// (tx=auto, lua, watch), memcached and a Redis Cluster.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const cluster = require('cluster');
const http = require('http');
const path = require('path');
const servers = require('./servers');

const WORKERS = 4;
const LIMIT = 40;
const REQUESTS = 3 * LIMIT;
const IN_FLIGHT = 16;

const agent = new http.Agent({ keepAlive: true, maxSockets: IN_FLIGHT });

function request(port, url) {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: url, agent }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ code: res.statusCode, worker: res.headers['x-worker'], body }));
    }).on('error', reject);
  });
}

// REQUESTS requests on one key, IN_FLIGHT at a time: counts by status.
async function hammer(port, name) {
  const key = 'one-key-' + Math.random().toString(36).slice(2);
  const codes = {};
  const workers = new Set();
  let next = 0;
  const errors = [];
  async function caller() {
    while (next < REQUESTS) {
      next++;
      const r = await request(port, '/' + name + '/' + key);
      codes[r.code] = (codes[r.code] || 0) + 1;
      workers.add(r.worker);
      if (r.code === 500) errors.push(r.body);
    }
  }
  await Promise.all(Array.from({ length: IN_FLIGHT }, caller));
  return { codes, workers, errors };
}

test('4 cluster workers admit exactly the limit on one key', async (t) => {
  const up = [];
  t.after(() => up.forEach((s) => s.stop()));
  for (const start of [servers.redis, servers.memcached, servers.cluster]) {
    const s = await start(t);
    if (!s) return; // skipped
    up.push(s);
  }
  const [r, m, c] = up;
  // A generous timeout: the test is about exactness on a loaded machine.
  const slow = 'timeout_ms=10000';
  const stores = {
    redis_auto: 'redis://127.0.0.1:' + r.port + '?tx=auto&' + slow,
    redis_lua: 'redis://127.0.0.1:' + r.port + '?tx=lua&' + slow,
    redis_watch: 'redis://127.0.0.1:' + r.port + '?tx=watch&' + slow,
    memcached: 'memcached://127.0.0.1:' + m.port + '?' + slow,
    cluster: c.uri + '?' + slow,
  };
  const port = await new Promise((resolve) => {
    const s = require('net').createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
  cluster.setupPrimary({ exec: path.join(__dirname, 'http_worker.js'), silent: false });
  const env = {
    STORES: JSON.stringify(stores), LIMIT: String(LIMIT), PORT: String(port),
    RUN: 'run' + process.pid + Date.now(),
  };
  const workers = [];
  try {
    await Promise.all(Array.from({ length: WORKERS }, () => new Promise((resolve, reject) => {
      const w = cluster.fork(env);
      workers.push(w);
      w.on('message', (msg) => msg === 'listening' && resolve());
      w.on('exit', (code) => reject(new Error('worker exited: ' + code)));
    })));
    for (const name of Object.keys(stores)) {
      const { codes, workers: seen, errors } = await hammer(port, name);
      assert.deepStrictEqual(errors, [], name + ': store errors');
      assert.strictEqual(codes[200], LIMIT, name + ': admitted ' + JSON.stringify(codes));
      assert.strictEqual(codes[429], REQUESTS - LIMIT, name + ': denied ' + JSON.stringify(codes));
      assert.ok(seen.size >= 2, name + ': served by ' + seen.size + ' workers');
    }
  } finally {
    agent.destroy();
    for (const w of workers) {
      w.removeAllListeners('exit');
      w.process.kill('SIGKILL');
    }
  }
});
