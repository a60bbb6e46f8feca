-- Lean head of the twins that answer in their own compact form (gcra,
-- token_bucket, sliding_log; prepended at build time). ARGV as for every
-- twin (lua_prelude.lua): now (-1: the server's TIME), cost, peek (0|1),
-- limit, period_us, ttl grace (µs), burst, ..., integers as decimal
-- strings; a lean twin is sent only as many as it reads (its algorithm's
-- lua_nargs: each ARGV costs the server a Lua string and, read, a strtod,
-- together ~1,200 instructions, near a tenth of a twin's common path).
-- What one decision costs the server is the deployment's capacity
-- (docs/performance.md, "What a decision costs the server"), so a twin
-- reads only the arguments it needs, by arithmetic coercion (ARGV[i] + 0:
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
local cost, peek = A[2] + 0, A[3] + 0
