-- Twin of sliding_log.c: the same state ('M', n, the counts' sum, n x
-- (time, count), times strictly increasing; the older 'L', n, entries is
-- still read and rewritten as 'M'), the same decisions. Times are µs below
-- 2^53.
-- What a decision costs the server is the deployment's capacity: from an
-- 'M' state the twin reads the header, the entries that have left the
-- window (in front) and the newest one, never the others (the sum says
-- what they count; the twin checks what it reads and the bounds the sum
-- must meet, sliding_log.c checks every entry), and copies the ones
-- it keeps as bytes (string.sub). Only a denial within the limit walks
-- the live entries, for its retry_after.
-- Answers {used, reset, x}: the count of the live entries before the call,
-- µs until the newest of them leaves the window (0: none), and x: the time
-- written (an allowed write), µs until enough entries leave for the cost (a
-- denial within the limit), else 0; or `used` alone for a write at the
-- caller's own time (the common case: a table costs more than the
-- arithmetic). sliding_log.c's lua_answer decides from them exactly as its
-- step does.
local limit, period = A[4] + 0, A[5] + 0
local horizon = now - period
local blob = redis.call('GET', KEYS[1])
-- base: the header's length; entry j (1-based) at base + 1 + 16 (j - 1)
local n, base, first, used, newest, last = 0, 17, 1, 0, -1, 0
if blob then
  local len, kind = #blob, string.byte(blob, 1)
  if kind == 77 and len >= 17 then -- 'M'
    local total
    n, total = struct.unpack('<i8i8', blob, 2)
    if n < 0 or n > limit or len ~= 17 + 16 * n or total < 0 or total > limit
        or (n == 0) ~= (total == 0) then
      return redis.error_reply('ECORRUPT sliding_log state in the store is malformed')
    end
    -- the entries that have left the window, in front
    local gone, prev, pos = 0, -1, 18
    while first <= n do
      local t, c = struct.unpack('<i8i8', blob, pos)
      if c < 1 or t <= prev then
        return redis.error_reply('ECORRUPT sliding_log state in the store is malformed')
      end
      if t > horizon then
        break
      end
      gone, prev, first, pos = gone + c, t, first + 1, pos + 16
    end
    used = total - gone
    if first <= n then
      local t, c = struct.unpack('<i8i8', blob, 2 + 16 * n)
      -- the live entries not read count 1 or more each; with none, the
      -- sum left is exactly the newest's
      if c < 1 or t <= prev or t > 4611686018427387904 or used < c + (n - first)
          or (first == n and used ~= c) then
        return redis.error_reply('ECORRUPT sliding_log state in the store is malformed')
      end
      newest, last = t, c
    elseif used ~= 0 then
      return redis.error_reply('ECORRUPT sliding_log state in the store is malformed')
    end
  elseif kind == 76 and len >= 9 then -- 'L': every entry read
    base = 9
    n = struct.unpack('<i8', blob, 2)
    if n < 0 or n > limit or len ~= 9 + 16 * n then
      return redis.error_reply('ECORRUPT sliding_log state in the store is malformed')
    end
    local sum, gone, prev, pos = 0, 0, -1, 10
    for j = 1, n do
      local t, c = struct.unpack('<i8i8', blob, pos)
      if c < 1 or t <= prev or t > 4611686018427387904 then
        return redis.error_reply('ECORRUPT sliding_log state in the store is malformed')
      end
      sum = sum + c
      if sum > limit then
        return redis.error_reply('ECORRUPT sliding_log state in the store is malformed')
      end
      if t <= horizon then
        first, gone = j + 1, sum
      end
      prev, last, pos = t, c, pos + 16
    end
    used = sum - gone
    if n >= first then
      newest = prev
    end
  else
    return redis.error_reply('ECORRUPT sliding_log state in the store is malformed')
  end
end
local reset = 0
if newest >= 0 then
  reset = newest + period - now
end

if cost > limit then
  return {used, reset, 0}
end
if used + cost > limit then
  -- until enough of the oldest live entries leave
  local excess, freed, pos = used + cost - limit, 0, base + 1 + 16 * (first - 1)
  while true do
    local t, c = struct.unpack('<i8i8', blob, pos)
    freed = freed + c
    if freed >= excess then
      return {used, reset, t + period - now}
    end
    pos = pos + 16
  end
end
if peek ~= 0 or cost == 0 then
  return {used, reset, 0}
end

-- the live entries as they are, then ours: merged into the newest when it
-- has our time (only it can: times increase), appended otherwise
local stamp = now
if newest > now then
  stamp = newest
end
local m, body = 1, ''
if n >= first then
  local from = base + 1 + 16 * (first - 1)
  m = n - first + 1
  if newest == stamp then
    body = string.sub(blob, from, base + 16 * (n - 1)) ..
      struct.pack('<i8i8', stamp, last + cost)
  else
    body = string.sub(blob, from, base + 16 * n) .. struct.pack('<i8i8', stamp, cost)
    m = m + 1
  end
else
  body = struct.pack('<i8i8', stamp, cost)
end
local ttl = stamp + period - now + A[9]
redis.call('SET', KEYS[1], struct.pack('<c1i8i8', 'M', m, used + cost) .. body,
  'PX', math.floor((ttl + 999) / 1000))
if stamp == now and A[1] + 0 >= 0 then
  return used -- written at the caller's own time: all it needs is `used`
end
return {used, reset, stamp}
