// The child process of worker.test.js. Its main thread never loads the
// addon: only its worker_threads do, so Node unloads the addon when each
// worker's environment is torn down. Each worker starts consume()s (and a
// get(), penalty() and delete()) on STORE, keeps starting more from a
// timer, and is terminated with them in flight; then another, ROUNDS
// times. Prints "alive N" (N: the workers that said they had started)
// and exits 0, unless terminating one crashed the process.
//   node worker_child.js STORE ROUNDS
'use strict';
const { Worker, isMainThread, workerData, parentPort } = require('worker_threads');
const path = require('path');

if (isMainThread) {
  const [store, rounds] = process.argv.slice(2);
  (async () => {
    let started = 0;
    for (let i = 0; i < Number(rounds); i++) {
      const w = new Worker(__filename, { workerData: { store } });
      await new Promise((resolve, reject) => {
        w.once('message', () => { started++; resolve(); });
        w.once('error', reject);
      });
      // Terminated at once, or after some of its decisions were made.
      if (i % 2) await new Promise((resolve) => setImmediate(resolve));
      await w.terminate();
    }
    console.log('alive ' + started);
  })().catch((e) => {
    console.error(e);
    process.exit(1);
  });
} else {
  const { RateLimiterDrl } = require(path.join(__dirname, '..'));
  const l = new RateLimiterDrl({ store: workerData.store, points: 1000000, duration: 60, batch: 4 });
  const ignore = () => {};
  for (let i = 0; i < 500; i++) l.consume('k' + (i % 50)).catch(ignore);
  l.get('k1').catch(ignore);
  l.penalty('k2', 3).catch(ignore);
  l.delete('k3').catch(ignore);
  setInterval(() => {
    for (let i = 0; i < 50; i++) l.consume('t' + i).catch(ignore);
  }, 1);
  // Once the store is open, so the worker ends with the loop attached.
  l.ready().then(() => parentPort.postMessage('started'), () => parentPort.postMessage('started'));
}
