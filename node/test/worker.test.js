// A worker_thread that alone loaded the addon, terminated with decisions
// in flight on memory://, memcached and Redis (a running server, and one
// stalled by SIGSTOP with a short timeout_ms): the process lives on. Node
// unloads such a worker's addon once its environment is torn down; the
// loop adapter's handles close on the loop's next iteration, in close
// callbacks that are the addon's code, so the addon's cleanup must hold
// the teardown until they have run (an async cleanup hook): before, the
// first termination with the loop attached was a SIGSEGV. Each case runs
// in a child process (worker_child.js) whose main thread never loads the
// addon.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { execFile } = require('child_process');
const path = require('path');
const servers = require('./servers');

const ROUNDS = 6;

// Run worker_child.js on store: its exit code, signal and output.
function child(store) {
  return new Promise((resolve) => {
    execFile(process.execPath, [path.join(__dirname, 'worker_child.js'), store, String(ROUNDS)],
      { timeout: 100000 }, (err, stdout, stderr) => {
        resolve({ code: err ? err.code : 0, signal: err ? err.signal : null, stdout, stderr });
      });
  });
}

function lives(out, store) {
  assert.deepStrictEqual([out.code, out.signal, out.stdout.trim()], [0, null, 'alive ' + ROUNDS],
    store + ': ' + out.stderr);
}

test('memory://', async () => {
  lives(await child('memory://'), 'memory://');
});

test('memcached and redis, running', async (t) => {
  const m = await servers.memcached(t);
  const r = await servers.redis(t);
  if (!m || !r) return;
  try {
    for (const store of ['memcached://127.0.0.1:' + m.port, 'redis://127.0.0.1:' + r.port,
      'redis://127.0.0.1:' + r.port + '?tx=lua']) {
      lives(await child(store), store);
    }
  } finally {
    m.stop();
    r.stop();
  }
});

test('a stalled redis (SIGSTOP, timeout_ms=300): the process lives', async (t) => {
  const r = await servers.redis(t);
  if (!r) return;
  try {
    process.kill(r.pid, 'SIGSTOP');
    const store = 'redis://127.0.0.1:' + r.port + '?timeout_ms=300&breaker_failures=0';
    lives(await child(store), store);
  } finally {
    process.kill(r.pid, 'SIGCONT');
    r.stop();
  }
});
