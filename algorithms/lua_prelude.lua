-- Shared head of every libdrl script (prepended at build time).
-- ARGV: now (-1: use the server's TIME), cost (a peek: -1 - cost), limit,
--       period_us, burst, subwindows, trailing (0|1)
--       (core/script.c: drl__script_args; a lean twin is sent the first
--       of them it reads, lua_head.lua). The TTL grace is a constant.
-- Returns {allowed, remaining, reset_after_us, retry_after_us, undo}.
-- Lua numbers are doubles: the core only sends a limit here when every
-- product below stays under 2^53 (see drl__script_usable), and fdiv/cdiv
-- correct the rounding of the division so the results are exact.
-- (ARGV[i] + 0: arithmetic coercion, cheaper than tonumber(), lua_head.lua)
local now = ARGV[1] + 0
local cost = ARGV[2] + 0
local peek = 0
if cost < 0 then
  cost, peek = -1 - cost, 1
end
local limit = ARGV[3] + 0
local period = ARGV[4] + 0
local burst = ARGV[5] + 0
local subwindows = ARGV[6] + 0
local trailing = ARGV[7] + 0
local grace = 1000000 -- DRL__TTL_GRACE_US (scripts/embed_lua.py checks it)

-- floor(x / d) for integers |x| < 2^53, d > 0, exactly.
local function fdiv(x, d)
  local q = math.floor(x / d)
  if q * d > x then
    q = q - 1
  elseif (q + 1) * d <= x then
    q = q + 1
  end
  return q
end

-- ceil(x / d), same domain.
local function cdiv(x, d)
  return -fdiv(-x, d)
end

-- DRL_TIME_MAX_US, DRL_FILL_TIME_MAX_US, DRL__COUNT_MAX (exact as doubles)
local TIME_MAX = 4611686018427387904
local FILL_TIME_MAX = 4503599627370496
local COUNT_MAX = 4503599627370496

if now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
