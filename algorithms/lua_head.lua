-- Lean head of the twins that answer in their own compact form (gcra,
-- token_bucket, sliding_log; prepended at build time). ARGV as for every
-- twin (lua_prelude.lua): now (-1: the server's TIME), cost (a peek:
-- -1 - cost), limit, period_us, burst, ..., integers as decimal strings;
-- a lean twin is sent only as many as it reads (its algorithm's
-- lua_nargs).
-- What one decision costs the server is the deployment's capacity
-- (docs/performance.md, "What a decision costs the server"). Each ARGV
-- costs the server a Lua string, a slot in the ARGV table (Redis 7.0
-- grows it one element at a time: the 5th costs a rehash) and, read, a
-- strtod: a twin is sent few (the peek flag rides on the cost's sign, the
-- TTL grace is a constant), reads them by arithmetic coercion (ARGV[i] + 0:
-- half the cost of tonumber() in Redis 7's sandbox, exact for integers
-- below 2^53), defines no function (a closure per call), and answers with
-- one integer where it can (a table costs more than the arithmetic).
local A = ARGV
local now = A[1] + 0
local given = now >= 0 -- the caller's time, not the server's
if now < 0 then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end
local cost, peek = A[2] + 0, 0
if cost < 0 then
  cost, peek = -1 - cost, 1
end
local GRACE = 1000000 -- DRL__TTL_GRACE_US (scripts/embed_lua.py checks it)
