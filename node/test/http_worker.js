// One worker of cluster.test.js: an http server whose every route
// /STORE/KEY consumes one point of KEY on the limiter for STORE (from the
// STORES environment variable: {"name": "uri"}), answering 200 when
// allowed, 429 when denied, 500 with the message when the store failed.
'use strict';
const http = require('http');
const { RateLimiterDrl } = require('..');

const stores = JSON.parse(process.env.STORES);
const limiters = {};
for (const [name, store] of Object.entries(stores)) {
  limiters[name] = new RateLimiterDrl({
    store, points: Number(process.env.LIMIT), duration: 86400, keyPrefix: process.env.RUN,
  });
}

http.createServer((req, res) => {
  const [, name, key] = req.url.split('/');
  const done = (code, body) => {
    res.writeHead(code, { 'x-worker': String(process.pid) });
    res.end(body);
  };
  limiters[name].consume(key).then(() => done(200, 'ok'),
    (e) => (e instanceof Error ? done(500, e.message) : done(429, 'denied')));
}).listen(Number(process.env.PORT), '127.0.0.1', () => process.send('listening'));
