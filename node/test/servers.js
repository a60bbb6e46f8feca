// Test servers for node --test: redis-server, memcached and a small Redis
// Cluster, each started here on free loopback ports in a private folder,
// and stopped by PID (at stop(), and at the latest when this process
// exits). A missing binary is a skip, or a failure under CI=true (as the
// C suite's fixtures: tests/fixtures/server_fixture.c).
'use strict';
const { spawn, execFile } = require('child_process');
const fs = require('fs');
const net = require('net');
const os = require('os');
const path = require('path');

const started = new Set();
const dirs = new Set();
process.on('exit', () => {
  for (const p of started) {
    try { p.kill('SIGKILL'); } catch (e) { /* gone already */ }
  }
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

// Where a binary is, or null.
function which(bin) {
  for (const dir of (process.env.PATH || '').split(':').concat(['/usr/sbin', '/usr/bin'])) {
    const f = path.join(dir, bin);
    try {
      fs.accessSync(f, fs.constants.X_OK);
      return f;
    } catch (e) { /* next */ }
  }
  return null;
}

// Skip the test (t) when bin is missing; under CI=true, fail instead.
function need(t, bin) {
  const f = which(bin);
  if (f) return f;
  if (process.env.CI === 'true') throw new Error(bin + ' is missing (CI=true: a failure, not a skip)');
  t.skip(bin + ' is not installed');
  return null;
}

// A free loopback port (and port + 10000 free too when `bus`).
async function freePort(bus) {
  for (;;) {
    const port = await new Promise((resolve, reject) => {
      const s = net.createServer();
      s.on('error', reject);
      s.listen(0, '127.0.0.1', () => {
        const p = s.address().port;
        s.close(() => resolve(p));
      });
    });
    if (!bus) return port;
    if (port + 10000 > 65535) continue;
    const ok = await new Promise((resolve) => {
      const s = net.createServer();
      s.on('error', () => resolve(false));
      s.listen(port + 10000, '127.0.0.1', () => s.close(() => resolve(true)));
    });
    if (ok) return port;
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Whether something accepts on port.
function accepts(port) {
  return new Promise((resolve) => {
    const c = net.connect(port, '127.0.0.1');
    c.on('connect', () => { c.destroy(); resolve(true); });
    c.on('error', () => resolve(false));
  });
}

// redis-cli -p port args... -> its stdout.
function cli(port, ...args) {
  return new Promise((resolve, reject) => {
    execFile(which('redis-cli') || 'redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args],
      { timeout: 20000 }, (err, out) => (err ? reject(err) : resolve(out)));
  });
}

// Spawn bin with args (port from freePort); wait (30 s at most) until it
// accepts. Returns { port, pid, proc, stop() }: stop() kills it and
// resolves once it has exited.
async function serve(bin, argsOf, bus) {
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort(bus);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'drl-node-'));
    dirs.add(dir);
    const proc = spawn(bin, argsOf(port, dir), { stdio: 'ignore', cwd: dir });
    started.add(proc);
    proc.unref(); // never what keeps a test alive: killed at exit
    let exited = false;
    const gone = new Promise((resolve) => proc.on('exit', () => {
      exited = true;
      started.delete(proc);
      resolve();
    }));
    const deadline = Date.now() + 30000;
    while (!exited && Date.now() < deadline && !(await accepts(port))) await sleep(20);
    if (!exited && (await accepts(port))) {
      return {
        port,
        pid: proc.pid,
        proc,
        // SIGKILL; resolves once the process has exited (its port is
        // closed then), at once when it had.
        stop() {
          if (!exited) {
            proc.ref(); // the wait for its exit keeps the loop alive
            proc.kill('SIGKILL');
          }
          fs.rmSync(dir, { recursive: true, force: true });
          return gone;
        },
      };
    }
    proc.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  }
  throw new Error(bin + ' did not start on a free port in 5 tries');
}

function redisArgs(port, dir) {
  return ['--port', String(port), '--bind', '127.0.0.1', '--save', '',
    '--appendonly', 'no', '--dir', dir, '--daemonize', 'no'];
}

// A redis-server; null (skipped) when missing.
async function redis(t) {
  const bin = need(t, 'redis-server');
  return bin && serve(bin, redisArgs);
}

// A memcached; null (skipped) when missing.
async function memcached(t) {
  const bin = need(t, 'memcached');
  // memcached refuses to run as root without -u.
  const root = process.getuid && process.getuid() === 0 ? ['-u', 'root'] : [];
  return bin && serve(bin, (port) => ['-p', String(port), '-l', '127.0.0.1', '-U', '0', '-t', '2']
    .concat(root));
}

// A Redis Cluster of 3 masters, no replicas: { ports, uri, stop() }.
async function cluster(t) {
  const bin = need(t, 'redis-server');
  if (!bin || !need(t, 'redis-cli')) return null;
  const nodes = [];
  for (let i = 0; i < 3; i++) {
    nodes.push(await serve(bin, (port, dir) => redisArgs(port, dir).concat([
      '--cluster-enabled', 'yes', '--cluster-config-file', path.join(dir, 'nodes.conf'),
      '--cluster-node-timeout', '1000', '--cluster-announce-ip', '127.0.0.1']), true));
  }
  const stop = () => nodes.forEach((n) => n.stop());
  try {
    await cli(nodes[0].port, '--cluster', 'create',
      ...nodes.map((n) => '127.0.0.1:' + n.port), '--cluster-yes');
    const deadline = Date.now() + 60000;
    for (;;) {
      const infos = await Promise.all(nodes.map((n) => cli(n.port, 'cluster', 'info')));
      if (infos.every((s) => s.includes('cluster_state:ok'))) break;
      if (Date.now() > deadline) throw new Error('the cluster did not converge in 60 s');
      await sleep(100);
    }
  } catch (e) {
    stop();
    throw e;
  }
  return {
    ports: nodes.map((n) => n.port),
    uri: 'redis-cluster://' + nodes.map((n) => '127.0.0.1:' + n.port).join(','),
    stop,
  };
}

// Whether every thread of process pid is stopped (state T or t in
// /proc/PID/task/TID/stat).
function allStopped(pid) {
  let tids;
  try {
    tids = fs.readdirSync('/proc/' + pid + '/task');
  } catch (e) {
    return false;
  }
  return tids.every((tid) => {
    let stat;
    try {
      stat = fs.readFileSync('/proc/' + pid + '/task/' + tid + '/stat', 'latin1');
    } catch (e) {
      return false;
    }
    const state = stat.charAt(stat.lastIndexOf(')') + 2);
    return state === 'T' || state === 't';
  });
}

// SIGSTOP pid and resolve once every thread of it is stopped: a signal is
// delivered asynchronously, so a thread running on another core (memcached's
// workers, Redis's I/O threads) could still answer a request sent right
// after kill(). Rejects when it is not stopped within 60 s.
async function pause(pid) {
  process.kill(pid, 'SIGSTOP');
  const deadline = Date.now() + 60000;
  while (!allStopped(pid)) {
    if (Date.now() > deadline) throw new Error('process ' + pid + ' did not stop within 60 s');
    await sleep(1);
  }
}

module.exports = { redis, memcached, cluster, cli, sleep, need, pause };
