-- Twin of sliding_log.c: the same state ('L', n, n x (time, count), times
-- strictly increasing, counts summing to at most LIMIT), the same
-- decisions. Times are µs below 2^53. The entries are read by one
-- struct.unpack per 500 of them and the ones kept are copied as bytes
-- (string.sub), never unpacked and packed again one by one. Answers {used,
-- reset, x}: the count of the live entries before the call, µs until the
-- newest of them leaves the window (0: none), and x: the time written (an
-- allowed write), µs until enough entries leave for the cost (a denial
-- within the limit), else 0; or `used` alone for a write at the caller's
-- own time (the common case: a table costs more than the arithmetic).
-- sliding_log.c's lua_answer makes the decision of them exactly as its
-- step does.
local limit, period = A[4] + 0, A[5] + 0
local blob = redis.call('GET', KEYS[1])
local n, first, used, newest = 0, 1, 0, -1
local v
if blob then
  local len = #blob
  if len < 9 or string.byte(blob, 1) ~= 76 then -- 'L'
    return redis.error_reply('ECORRUPT sliding_log state in the store is malformed')
  end
  n = struct.unpack('<i8', blob, 2)
  if n < 0 or n > limit or len ~= 9 + 16 * n then
    return redis.error_reply('ECORRUPT sliding_log state in the store is malformed')
  end
  -- v[2k - 1], v[2k]: entry k's time and count (one unpack for up to
  -- 500 entries, the common case; more are gathered 500 at a time)
  if n <= 500 then
    v = {struct.unpack('<' .. string.rep('i8i8', n), blob, 10)}
  else
    v = {}
    local k, pos = 0, 10
    while k < n do
      local c = n - k
      if c > 500 then
        c = 500
      end
      local part = {struct.unpack('<' .. string.rep('i8i8', c), blob, pos)}
      for j = 1, 2 * c do
        v[2 * k + j] = part[j]
      end
      k, pos = k + c, pos + 16 * c
    end
  end
  -- times strictly increasing from 0, counts >= 1 summing to at most
  -- LIMIT; the entries at or before now - PERIOD have left the window
  local sum, gone, prev, horizon = 0, 0, -1, now - period
  for j = 1, 2 * n, 2 do
    local t, c = v[j], v[j + 1]
    if c < 1 or t <= prev then
      return redis.error_reply('ECORRUPT sliding_log state in the store is malformed')
    end
    sum = sum + c
    if t <= horizon then
      first, gone = (j + 3) / 2, sum
    end
    prev = t
  end
  if sum > limit or prev > 4611686018427387904 then
    return redis.error_reply('ECORRUPT sliding_log state in the store is malformed')
  end
  used = sum - gone
  if n >= first then
    newest = prev
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
  local excess, freed, k = used + cost - limit, 0, first
  while true do
    freed = freed + v[2 * k]
    if freed >= excess then
      break
    end
    k = k + 1
  end
  return {used, reset, v[2 * k - 1] + period - now}
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
local m, body = 0, ''
if n >= first then
  m = n - first + 1
  if newest == stamp then
    body = string.sub(blob, 10 + 16 * (first - 1), 9 + 16 * (n - 1)) ..
      struct.pack('<i8i8', stamp, v[2 * n] + cost)
  else
    body = string.sub(blob, 10 + 16 * (first - 1), 9 + 16 * n) ..
      struct.pack('<i8i8', stamp, cost)
    m = m + 1
  end
else
  body = struct.pack('<i8i8', stamp, cost)
  m = 1
end
local ttl = stamp + period - now + A[9]
redis.call('SET', KEYS[1], struct.pack('<c1i8', 'L', m) .. body,
  'PX', math.floor((ttl + 999) / 1000))
if stamp == now and A[1] + 0 >= 0 then
  return used -- written at the caller's own time: all it needs is `used`
end
return {used, reset, stamp}
