// libdrl for Node.js: a drop-in for rate-limiter-flexible's limiters
// (docs/node.md). Decisions run in C on Node's own event loop (libdrl's
// async API on libuv); the JS thread never waits for a store.
'use strict';
const path = require('path');

// The addon: LIBDRL_NODE_ADDON (a path; the build's tests set it), else
// drl.node beside this file (meson install, npm install), else
// build/drl.node (npm install from the repository builds it there).
function loadAddon() {
  const tries = [process.env.LIBDRL_NODE_ADDON,
    path.join(__dirname, 'drl.node'),
    path.join(__dirname, 'build', 'drl.node')].filter(Boolean);
  let first = null;
  for (const file of tries) {
    try {
      return require(file);
    } catch (e) {
      if (e.code !== 'MODULE_NOT_FOUND') throw e;
      first = first || e;
    }
  }
  throw first;
}
const native = loadAddon();

// The outcome of a decision, shaped as rate-limiter-flexible's
// RateLimiterRes: remainingPoints (requests of 1 point still allowed),
// msBeforeNext (allowed: until the quota is full again; denied: until
// this request could pass), consumedPoints (what the limit counts now;
// a denied request consumes nothing), isFirstInDuration (this request
// found the quota full).
class RateLimiterRes {
  constructor(remainingPoints = 0, msBeforeNext = 0, consumedPoints = 0,
    isFirstInDuration = false) {
    this.remainingPoints = remainingPoints;
    this.msBeforeNext = msBeforeNext;
    this.consumedPoints = consumedPoints;
    this.isFirstInDuration = isFirstInDuration;
  }

  toJSON() {
    return {
      remainingPoints: this.remainingPoints,
      msBeforeNext: this.msBeforeNext,
      consumedPoints: this.consumedPoints,
      isFirstInDuration: this.isFirstInDuration,
    };
  }

  toString() {
    return JSON.stringify(this.toJSON());
  }
}
// decideNow() (memory://'s get()) writes a decision's fields here, and in
// out[4] its outcome: 1 allowed, 0 denied, -1 (get()) nothing used.
const out = new Float64Array(5);
// A count read from out or bout, for a RateLimiterRes field: a small
// whole number as an integer (V8 keeps it in the object), a larger one as
// the double it is. Doubles alone would make V8 store every field of every
// RateLimiterRes as a separately allocated number.
const count = (x) => (x <= 0x3fffffff ? x | 0 : x);
// Bad input found here, in JS: a TypeError or RangeError with .code
// 'DRL_EINVAL', as the addon's (every error has a code: docs/node.md).
function invalid(Cls, message) {
  return Object.assign(new Cls(message), { code: 'DRL_EINVAL' });
}
// memcached:// consume()s made in one tick are decided together
// (RateLimiterDrl's _queue): at most BATCH_ITEMS a call, whose outcomes
// decideBatch() writes here before it calls settle(), 6 numbers a row:
// the item's index in its queue, a code (1 allowed, 0 denied, 2 failed)
// and RateLimiterRes's 4 fields. memory:// consume()s of one tick, too
// (_nowQueue): decideNowMany() reads item i's points from row i's first
// number and writes its code (1 allowed, 0 denied, 2 failed) and the 4
// fields after it (_nowFlush writes a string key's length in the second
// number first; the addon does not read it).
const BATCH_ITEMS = 1024;
const bout = new Float64Array(6 * BATCH_ITEMS);
// The consume()s of a tick decided a worker hand-off, by default
// (node/src/batch.c).
const BATCH = 16;

// Settle the n items of queue q whose outcomes are in bout (errs[j]: row
// j's Error when it failed).
function settle(q, n, errs) {
  const fns = q.fns;
  q.left -= n;
  if (q.left === 0 && q.wake !== null) q.wake.forEach((wake) => wake());
  for (let j = 0; j < 6 * n; j += 6) {
    const k = 2 * bout[j];
    const code = bout[j + 1];
    if (code === 2) {
      fns[k + 1](errs[j / 6]);
    } else {
      const res = new RateLimiterRes(count(bout[j + 2]), count(bout[j + 3]), count(bout[j + 4]),
        bout[j + 5] === 1);
      fns[code === 1 ? k : k + 1](res);
    }
  }
}
// _nowQueue's flush runs from a reaction to this settled promise: a
// microtask, as queueMicrotask() would make, without the AsyncResource
// and bound function Node makes for each of those.
const settled = Promise.resolve();
// The executor of a memory:// consume()'s promise: one function for all
// of them, not a closure each; its resolve goes to nowRes and its reject
// to nowRej, the queue's arrays (_nowQueue sets them just before).
let nowRes = null;
let nowRej = null;
function nowExecutor(resolve, reject) {
  nowRes.push(resolve);
  nowRej.push(reject);
}
// decide()'s promises: their functions by slot id, settled by
// settleOne(id, code, err) from node/src/decide.c (code 1 allowed, 0
// denied: the fields in out; 3 get() with nothing used: null; 2 failed:
// err). Free slots are reused.
const resolves = [];
const rejects = [];
const freeIds = [];

function settleOne(id, code, err) {
  const resolve = resolves[id];
  const reject = rejects[id];
  resolves[id] = undefined;
  rejects[id] = undefined;
  freeIds.push(id);
  if (code === 2) {
    reject(err);
  } else if (code === 3) {
    resolve(null);
  } else {
    const res = new RateLimiterRes(count(out[0]), count(out[1]), count(out[2]), out[3] === 1);
    (code === 1 ? resolve : reject)(res);
  }
}
native.init(RateLimiterRes, out, bout, settle, settleOne);

// A decision through Node's loop: decide() starts it, settleOne()
// settles the promise. A start that throws rejects it (the slot is
// free again).
function decide(h, key, points, get) {
  return new Promise((resolve, reject) => {
    const id = freeIds.length > 0 ? freeIds.pop() : resolves.length;
    resolves[id] = resolve;
    rejects[id] = reject;
    try {
      native.decide(h, key, points, get, id);
    } catch (e) {
      resolves[id] = undefined;
      rejects[id] = undefined;
      freeIds.push(id);
      throw e;
    }
  });
}

// A limiter's native handle is let go when the limiter is collected
// (node/src/limiter.c says why not by a Node-API finalizer).
const handles = new FinalizationRegistry((h) => native.release(h));

const ON_ERROR = new Set(['deny', 'allow', 'local']);
// The options RateLimiterDrl takes. Any other (RLF's blockDuration,
// execEvenly, insuranceLimiter, storeClient, ...) is a TypeError rather
// than silently ignored: a limit must not change meaning in a migration.
const OPTIONS = new Set(['store', 'points', 'duration', 'keyPrefix', 'algorithm', 'spec',
  'onError', 'batch']);

// The `batch` option: memcached:// consume()s of one tick decided a
// worker hand-off (1: each its own).
function batchOf(batch) {
  if (batch === undefined) return BATCH;
  if (!Number.isInteger(batch) || batch < 1 || batch > BATCH_ITEMS) {
    throw invalid(RangeError, 'batch must be a whole number from 1 to ' + BATCH_ITEMS);
  }
  return batch;
}

// The libdrl spec for RLF's options: ALGORITHM:POINTS/DURATION, DURATION
// in seconds (whole, or whole milliseconds). Values are passed on as
// written, so the library's own message names a bad one.
function specOf(opts) {
  if (opts.spec !== undefined) {
    if (typeof opts.spec !== 'string') throw invalid(TypeError, 'spec must be a string');
    for (const name of ['points', 'duration', 'algorithm', 'onError']) {
      if (opts[name] !== undefined) {
        throw invalid(TypeError, 'spec replaces ' + name + ': give one or the other');
      }
    }
    return opts.spec;
  }
  const algorithm = opts.algorithm === undefined ? 'fixed_window' : opts.algorithm;
  const points = opts.points === undefined ? 4 : opts.points;
  const duration = opts.duration === undefined ? 1 : opts.duration;
  if (typeof algorithm !== 'string') throw invalid(TypeError, 'algorithm must be a string');
  if (typeof points !== 'number') throw invalid(TypeError, 'points must be a number');
  if (typeof duration !== 'number') throw invalid(TypeError, 'duration must be a number');
  const ms = duration * 1000;
  const period = Number.isInteger(duration) ? duration + 's'
    : Number.isInteger(ms) ? ms + 'ms' : String(duration);
  let spec = algorithm + ':' + points + '/' + period;
  if (opts.onError !== undefined) {
    if (!ON_ERROR.has(opts.onError)) {
      throw invalid(TypeError, "onError must be 'deny', 'allow' or 'local'");
    }
    spec += ';on_error=' + opts.onError;
  }
  return spec;
}

// A limiter on a libdrl store, with rate-limiter-flexible's API.
//   new RateLimiterDrl({ store: 'redis://127.0.0.1:6379', points: 10,
//                        duration: 1, keyPrefix: 'api' })
// store: a libdrl URI (default memory://); algorithm: one of libdrl's
// (default fixed_window, RLF's); spec: a whole libdrl spec instead of
// points/duration/algorithm; onError: the store-failure policy.
// A bad spec throws a TypeError here; the store is opened on libuv's
// thread pool, and a bad URI or unreachable store rejects every call.
class RateLimiterDrl {
  constructor(opts = {}) {
    if (opts === null || typeof opts !== 'object') {
      throw invalid(TypeError, 'options must be an object');
    }
    for (const name of Object.keys(opts)) {
      if (!OPTIONS.has(name)) {
        throw invalid(TypeError, 'option ' + name + ' is not supported by RateLimiterDrl '
          + '(docs/node.md: ' + [...OPTIONS].join(', ') + ')');
      }
    }
    const store = opts.store === undefined ? 'memory://' : opts.store;
    const keyPrefix = opts.keyPrefix === undefined ? 'rlflx' : opts.keyPrefix;
    if (typeof store !== 'string') throw invalid(TypeError, 'store must be a URI string');
    if (typeof keyPrefix !== 'string') throw invalid(TypeError, 'keyPrefix must be a string');
    this.spec = specOf(opts);
    // RLF's properties (undefined when a spec stands for them).
    this.points = opts.spec !== undefined ? undefined : opts.points === undefined ? 4 : opts.points;
    this.duration = opts.spec !== undefined ? undefined
      : opts.duration === undefined ? 1 : opts.duration;
    this.keyPrefix = keyPrefix;
    this._handle = null;
    // memory:// decides on this thread (no I/O): a tick's consume()s
    // together from a microtask (decideNowMany), get() at once (decideNow);
    // memcached:// counters (fixed_window, sliding_window, subwindow)
    // on Node's loop through the store's channel, like Redis; the rest
    // of memcached:// (gets/cas state, policies, channels=0) on the
    // context's workers, `batch` consume()s of a tick a hand-off (set
    // once the store is open: native.direct says which).
    this._inproc = store === '' || store.startsWith('memory:');
    const batch = batchOf(opts.batch);
    this._batch = 0;
    this._q = null; // the queue of this tick's consume()s
    this._mq = null; // memory://: the queue of this tick's consume()s
    this._nowScheduled = false; // memory://: _nowTick is in the microtask queue
    // memory://: the microtask that flushes the queue then pending; one
    // function for the limiter's life, not a closure a queue.
    this._nowTick = () => {
      this._nowScheduled = false;
      if (this._mq !== null) this._nowFlush(this._mq);
    };
    this._last = null; // the last queue flushed
    this._unflushed = []; // queues made, not yet flushed, oldest first
    this._ready = native.open(store, this.spec, keyPrefix).then((h) => {
      if (store.startsWith('memcached') && !native.direct(h)) this._batch = batch;
      this._handle = h;
      handles.register(this, h);
      return h;
    });
    this._ready.catch(() => {}); // reported by the calls that use it
  }

  // Resolves once the store is open (rejects as the calls would).
  ready() {
    return this._ready.then(() => this);
  }

  _call(fn, a, b, c) {
    const h = this._handle;
    if (h === null) return this._ready.then((h2) => fn(h2, a, b, c));
    try {
      return fn(h, a, b, c);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  // Take `points` (default 1) from key's quota: resolves a RateLimiterRes
  // when allowed, rejects with one when denied (consuming nothing), rejects
  // with an Error (.code 'DRL_E...') when the store failed.
  consume(key, points = 1) {
    if (this._batch > 1 && this._handle !== null) return this._queue(key, points);
    if (this._inproc && this._handle !== null) return this._nowQueue(key, points);
    return this._call(decide, key, points, false);
  }

  // Queue a memory:// consume() for this tick, decided in call order by
  // one decideNowMany() from a microtask (_nowTick). Points that are not a
  // Number reject at once, with the TypeError decideNow() would throw.
  _nowQueue(key, points) {
    if (typeof points !== 'number') {
      return Promise.reject(invalid(TypeError, 'points must be a number'));
    }
    let q = this._mq;
    if (q === null) {
      q = this._mq = { keys: [], points: [], res: [], rej: [] };
      if (!this._nowScheduled) {
        this._nowScheduled = true;
        settled.then(this._nowTick);
      }
    }
    q.keys.push(key);
    q.points.push(points);
    // Stored only when it changes: storing a new object in the module's
    // scope takes V8's write barrier's slow path each time.
    if (nowRes !== q.res) {
      nowRes = q.res;
      nowRej = q.rej;
    }
    const p = new Promise(nowExecutor);
    // A full queue is decided now: so at most one waits, and an earlier
    // call is never decided after a later one.
    if (q.keys.length === BATCH_ITEMS) this._nowFlush(q);
    return p;
  }

  // Decide queue q, the pending one (this._mq), now and settle its
  // promises: from _nowTick; when full; or before a get(), delete(),
  // penalty() or reward() (_sync). A consume() made while they settle
  // starts the next queue.
  _nowFlush(q) {
    this._mq = null;
    const { keys, points: codes, res, rej } = q;
    const n = keys.length;
    // Each row's first number: the item's points. Each string key's
    // length is read here too, though unused: all of the tick's strings
    // touched in one loop, their cache misses overlap, rather than one
    // per Node-API read of a key.
    for (let i = 0, j = 0; i < n; i++, j += 6) {
      const key = keys[i];
      bout[j] = codes[i];
      if (typeof key === 'string') bout[j + 1] = key.length;
    }
    let errs;
    try {
      errs = native.decideNowMany(this._handle, ...keys);
    } catch (e) {
      // Thrown before any item was decided.
      for (let i = 0; i < n; i++) rej[i](e);
      return;
    }
    // Every outcome read before any promise settles: keys and codes
    // become the results and their codes.
    for (let i = 0, j = 0; i < n; i++, j += 6) {
      const code = bout[j + 1];
      codes[i] = code;
      keys[i] = code === 2 ? errs[i] : new RateLimiterRes(count(bout[j + 2]),
        count(bout[j + 3]), count(bout[j + 4]), bout[j + 5] === 1);
    }
    for (let i = 0; i < n; i++) (codes[i] === 1 ? res : rej)[i](keys[i]);
  }

  // Queue a consume() for this tick's batch, decided in call order by one
  // decideBatch() from a microtask (_flush). A bad key or points rejects
  // its own promise only, with the message decide() would give.
  _queue(key, points) {
    let q = this._q;
    if (q === null) {
      q = this._q = { keys: [], points: [], fns: [], left: 0, wake: null, done: false };
      this._unflushed.push(q);
      queueMicrotask(() => this._flush(q));
    }
    q.keys.push(key);
    q.points.push(points);
    if (q.keys.length === BATCH_ITEMS) this._q = null;
    return new Promise((resolve, reject) => {
      q.fns.push(resolve, reject);
    });
  }

  // Flush q and every queue made before it, oldest first. A queue is
  // decided once the one flushed before it is (its items may name the
  // same keys, on other workers): the tick's consume()s are decided in
  // call order, more than BATCH_ITEMS of them too, and a get() waiting
  // for the last queue flushed waits for every one before it.
  _flush(q) {
    if (q.done) return;
    while (this._unflushed.length > 0) {
      const p = this._unflushed.shift();
      if (this._q === p) this._q = null;
      p.done = true;
      p.left = p.keys.length;
      const prev = this._last;
      this._last = p;
      if (prev !== null && prev.left > 0) {
        if (prev.wake === null) prev.wake = [];
        prev.wake.push(() => queueMicrotask(() => this._decide(p)));
      } else {
        this._decide(p);
      }
      if (p === q) break;
    }
  }

  _decide(q) {
    try {
      native.decideBatch(this._handle, q.keys, q.points, q, this._batch);
    } catch (e) {
      // Thrown before any item was decided.
      for (let k = 1; k < q.fns.length; k += 2) q.fns[k](e);
      q.left = 0;
      if (q.wake !== null) q.wake.forEach((wake) => wake());
    }
  }

  // get(), delete(), penalty() and reward() start once the consume()s
  // of the last queue (this tick's, flushed now) are decided: a promise
  // to wait for, or null.
  _sync() {
    if (this._mq !== null) this._nowFlush(this._mq);
    if (this._q !== null) this._flush(this._q);
    const q = this._last;
    if (q === null || q.left === 0) return null;
    if (q.wake === null) q.wake = [];
    return new Promise((resolve) => {
      q.wake.push(resolve);
    });
  }

  // A memory:// get(), made now; settled as decide()'s promise would be.
  _nowGet(key) {
    try {
      native.decideNow(this._handle, key);
    } catch (e) {
      return Promise.reject(e);
    }
    const allowed = out[4];
    if (allowed < 0) return Promise.resolve(null);
    const res = new RateLimiterRes(count(out[0]), count(out[1]), count(out[2]), out[3] === 1);
    return allowed ? Promise.resolve(res) : Promise.reject(res);
  }

  // The key's quota now, consuming nothing: a RateLimiterRes, or null when
  // nothing of it is used.
  get(key) {
    const wait = this._sync();
    if (wait !== null) return wait.then(() => this.get(key));
    if (this._inproc && this._handle !== null) return this._nowGet(key);
    return this._call(decide, key, 0, true);
  }

  // Forget the key on this limiter: resolves true (libdrl's reset does not
  // say whether anything was stored).
  delete(key) {
    const wait = this._sync();
    if (wait !== null) return wait.then(() => this.delete(key));
    return this._call(native.reset, key);
  }

  // Consume `points` whatever the quota (may go over the limit).
  penalty(key, points = 1) {
    return this._adjust(key, points, 1);
  }

  // Give back `points` (never beyond a full quota).
  reward(key, points = 1) {
    return this._adjust(key, points, -1);
  }

  _adjust(key, points, sign) {
    const wait = this._sync();
    if (wait !== null) return wait.then(() => this._adjust(key, points, sign));
    if (!native.hasAdjust) {
      return Promise.reject(Object.assign(new Error('penalty/reward need drl_adjust(), '
        + 'not in this libdrl (' + native.version + ')'), { code: 'DRL_ENOTSUP' }));
    }
    // The points as given (checked by the addon, so a message names the
    // caller's number) and the sign apart: reward's delta is -points.
    return this._call(native.adjust, key, points, sign);
  }
}

// hasAdjust: whether penalty()/reward() work (the libdrl loaded has
// drl_adjust()).
module.exports = {
  RateLimiterDrl, RateLimiterRes, version: native.version, hasAdjust: native.hasAdjust,
};
