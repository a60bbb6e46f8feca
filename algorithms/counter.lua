-- Twin of the counter engine in subwindow.c (fixed_window, sliding_window,
-- subwindow). KEYS[1]: the key base; sub-window k is KEYS[1] .. ':' .. k,
-- or, when the store wants every key declared (Redis Cluster), the
-- caller's KEYS[2 + j] for the j-th sub-window back from now (the same
-- names: the C side builds them with drl__key_indexed).
-- ARGV[7] (trailing) plus 2: the counters are the fields of the hash
-- KEYS[1], sub-window k the field k (a store with counter groups; the
-- C side's drl__key_grouped names the same), trimmed as
-- algorithms/subwindow.c says at its top (the same D, W and TTL).
-- Atomic on the server, so it checks first and increments only when
-- admitting (the C path increments first and refunds: same decisions).
local grouped = trailing >= 2
if grouped then
  trailing = trailing - 2
end
local n = subwindows
local s = period / n -- a whole number: the spec parser checked it
local i = fdiv(now, s)
local e = now - i * s
local ttl = (n + 1) * s - e + grace
local last = n - 1
if trailing == 1 then
  last = n
end

local keys, c, got = {}, {}, nil
if grouped then
  for j = 0, last do
    keys[j] = string.format('%d', i - j)
  end
  got = redis.call('HMGET', KEYS[1], unpack(keys, 0, last))
end
for j = 0, last do
  local v
  if grouped then
    v = got[j + 1]
  else
    keys[j] = KEYS[2 + j] or (KEYS[1] .. ':' .. string.format('%d', i - j))
    v = redis.call('GET', keys[j])
  end
  c[j] = 0
  if v then
    c[j] = tonumber(v)
    if not c[j] or c[j] > COUNT_MAX then
      return redis.error_reply('ECORRUPT counter state in the store is malformed')
    end
    if c[j] < 0 then
      c[j] = 0 -- a refund that outlived its key: counts nothing
    end
  end
end

-- Adds a (a formatted integer) to the current sub-window, as the C side's
-- add does. Grouped, the first write of its sub-window (c[0] absent or at
-- most 0) trims the group's dead fields and sets the hash's TTL
-- (algorithms/subwindow.c, at its top); a key of its own gets its TTL
-- (µs to whole ms) with every write.
local function add_current(a)
  if grouped then
    redis.call('HINCRBY', KEYS[1], keys[0], a)
    if c[0] == 0 then
      local k = cdiv(grace, s)
      local dead, dropped = i - (n + 1 + k), {}
      for j = 0, n + 3 * k do
        dropped[j + 1] = string.format('%d', dead - j)
      end
      redis.call('HDEL', KEYS[1], unpack(dropped))
      redis.call('PEXPIRE', KEYS[1], cdiv(ttl + k * s, 1000))
    end
  else
    redis.call('INCRBY', keys[0], a)
    redis.call('PEXPIRE', keys[0], cdiv(ttl, 1000))
  end
end

-- Adjust mode (drl_adjust): ARGV[8] (after the seven, core/script.c) is
-- the delta, the call a peek of
-- cost 1 (ARGV[2]). A penalty adds to the current sub-window, never
-- taking it beyond 2 * limit (nor adding when it is there); a reward takes
-- from the sub-windows newest first, the trailing one last, none below 0
-- (drl__counter_adjust in subwindow.c). Then the peek, after it.
local adj = ARGV[8]
if adj then
  adj = adj + 0
  if adj > 0 then
    local add = 2 * limit - c[0]
    if add > adj then
      add = adj
    end
    if add > 0 then
      add_current(string.format('%d', add))
      c[0] = c[0] + add
    end
  else
    local r = -adj
    for j = 0, last do
      local take = c[j]
      if take > r then
        take = r
      end
      if take > 0 then
        local a = string.format('%d', -take)
        if grouped then
          redis.call('HINCRBY', KEYS[1], keys[j], a)
        else
          redis.call('INCRBY', keys[j], a)
        end
        c[j], r = c[j] - take, r - take
      end
    end
  end
end

-- the estimate (inline, and retry_after below only on a denial: a
-- closure made per call costs the server more than its arithmetic)
local est = 0
for j = 0, n - 1 do
  est = est + c[j]
end
if trailing == 1 then
  est = est + fdiv(c[n] * (s - e), s)
end

local function reset_after()
  for j = 0, last do
    if c[j] > 0 then
      local r = (n - j) * s - e
      if trailing == 1 then
        r = r + s
      end
      return r
    end
  end
  return 0
end

if cost == 0 then
  return {1, limit - est, reset_after(), 0, i}
end
if cost > limit then
  return {0, limit - est, reset_after(), -1, i}
end
if est + cost > limit then
  local function retry_after()
    local need = limit - cost
    local full = 0
    for j = 0, n - 1 do
      full = full + c[j]
    end
    for m = 0, n do
      if m > 0 then
        full = full - c[n - m]
      end
      if full <= need then
        local start, base = 0, (s - e) + (m - 1) * s
        if m == 0 then
          start, base = e, 0
        end
        local old = 0
        if trailing == 1 then
          old = c[n - m]
        end
        if old == 0 then
          return base
        end
        local rmax = cdiv((need - full + 1) * s, old) - 1
        local at = 0
        if rmax < s then
          at = s - rmax
        end
        if at < start then
          at = start
        end
        return base + (at - start)
      end
    end
    return (s - e) + n * s
  end
  return {0, limit - est, reset_after(), retry_after(), i}
end
if peek == 0 then
  -- ARGV[2]: the cost as sent (a number is formatted anew, lua_head.lua)
  add_current(ARGV[2])
  c[0] = c[0] + cost -- a negative count read as 0, as in C
  est = est + cost
end
return {1, limit - est, reset_after(), 0, i}
