-- Twin of sliding_log.c: the same state, the same decisions. Times are µs
-- below 2^53.
-- State 'S' (sliding_log.c says it in full): 16-byte entries (time, count),
-- times strictly increasing: `dead` entries in front that have left the
-- window, then the n live ones; then a 33-byte trailer (dead, n, the live
-- counts' sum, the first live entry's time, 'S'). The older 'M' (header:
-- n, sum) and 'L' (header: n) are read whole and rewritten as 'S'.
-- What a decision costs the server is the deployment's capacity, and it
-- must not grow with the log (up to 160 KB): the twin reads the trailer
-- and the newest entry (one GETRANGE of the last 49 bytes), the entries
-- that leave the window and, for a denial within the limit, as many as it
-- takes to free the cost (GETRANGE of 32 at a time), and writes the new
-- entry (or the newest's new count) with the trailer after it in one
-- SETRANGE: entries that leave stay in front, counted in `dead`, until
-- they outnumber the live ones by 32; then the live ones are rewritten
-- alone (a SET: amortised, each entry is copied at most once more).
-- The twin checks what it reads and the bounds the trailer must meet;
-- sliding_log.c checks every entry.
-- Answers {used, reset, x}: the count of the live entries before the call,
-- µs until the newest of them leaves the window (0: none), and x: the time
-- written (an allowed write), µs until enough entries leave for the cost (a
-- denial within the limit), else 0; or `used` alone for a write at the
-- caller's own time (the common case: a table costs more than the
-- arithmetic). sliding_log.c's lua_answer decides from them exactly as its
-- step does.
-- A penalty (drl_adjust) may take the live sum to 2 * limit (and the
-- entries with it). Adjust mode: A[8] (after all seven arguments,
-- core/script.c) is the delta, the call a peek of cost 1: the log is read
-- whole, moved as adjust_step in sliding_log.c moves it, written
-- compacted, and the peek answered {used, reset, retry}.
local limit, period = A[3] + 0, A[4] + 0
local horizon = now - period
local K = KEYS[1]
local BAD = 'ECORRUPT sliding_log state in the store is malformed'
local TMAX = 4611686018427387904
-- dead and n entries, the live ones' sum, the first live one's time, the
-- newest (time, count); blob: an 'M' or 'L' state read whole, its entries
-- from byte `from`
local dead, n, sum, first_t, newest, last, blob, from = 0, 0, 0, 0, -1, 0, nil, 1
local adj = A[8]
if adj then
  adj = adj + 0
  local whole = redis.call('GET', K)
  local ts, cs, m = {}, {}, 0 -- the live entries
  if whole then
    local len, at, cnt = #whole, 1, 0
    if len >= 33 and string.byte(whole, len) == 83 then -- 'S'
      local d, k = struct.unpack('<i8i8', whole, len - 32)
      if d < 0 or d > 2 * limit + 32 or k < 0 or k > 2 * limit
          or len ~= 33 + 16 * (d + k) then
        return redis.error_reply(BAD)
      end
      at, cnt = 1 + 16 * d, k
    else
      local kind = string.byte(whole, 1)
      if kind == 77 and len >= 17 then
        at = 18
      elseif kind == 76 and len >= 9 then
        at = 10
      else
        return redis.error_reply(BAD)
      end
      cnt = struct.unpack('<i8', whole, 2)
      if cnt < 0 or cnt > 2 * limit or len ~= at - 1 + 16 * cnt then
        return redis.error_reply(BAD)
      end
    end
    local prev, total = -1, 0
    for j = 1, cnt do
      local t, c = struct.unpack('<i8i8', whole, at + 16 * (j - 1))
      total = total + c
      if c < 1 or t <= prev or t > TMAX or total > 2 * limit then
        return redis.error_reply(BAD)
      end
      prev = t
      if t > horizon then
        m = m + 1
        ts[m], cs[m] = t, c
      end
    end
  end
  local used = 0
  for j = 1, m do
    used = used + cs[j]
  end
  if adj > 0 then
    local add = 2 * limit - used
    if add > adj then
      add = adj
    end
    if add > 0 then
      local stamp = now
      if m > 0 and ts[m] > now then
        stamp = ts[m]
      end
      if m > 0 and ts[m] == stamp then
        cs[m] = cs[m] + add
      else
        m = m + 1
        ts[m], cs[m] = stamp, add
      end
      used = used + add
    end
  else
    local r = -adj
    while r > 0 and m > 0 do
      if cs[m] > r then
        cs[m], used, r = cs[m] - r, used - r, 0
      else
        r, used, m = r - cs[m], used - cs[m], m - 1
      end
    end
  end
  local parts, first = {}, 0
  for j = 1, m do
    parts[j] = struct.pack('<i8i8', ts[j], cs[j])
  end
  if m > 0 then
    first = ts[1]
  end
  parts[m + 1] = struct.pack('<i8i8i8i8c1', 0, m, used, first, 'S')
  local top = now - period
  if m > 0 then
    top = ts[m]
  end
  redis.call('SET', K, table.concat(parts, '', 1, m + 1), 'PX',
    math.floor((top + period - now + GRACE + 999) / 1000))
  -- the peek of cost 1 on the log as written
  local reset = 0
  if m > 0 then
    reset = ts[m] + period - now
  end
  if used + 1 > limit then
    local excess, got = used + 1 - limit, 0
    for j = 1, m do
      got = got + cs[j]
      if got >= excess then
        return {used, reset, ts[j] + period - now}
      end
    end
  end
  return {used, reset, 0}
end
-- (constant arguments as strings: Redis 7.0 formats a Lua number passed
-- to redis.call with "%.17g", about 2,300 instructions each, a tenth of
-- the common path: scripts/bench_twin_ab.sh BENCH_MEASURE=instructions)
local tail = redis.call('GETRANGE', K, '-49', '-1')
local tl = #tail
if tl > 0 and string.byte(tail, tl) == 83 then -- 'S'
  -- one unpack of the newest entry and the trailer (each call into the
  -- struct library costs the server)
  local t, c
  if tl == 49 then
    t, c, dead, n, sum, first_t = struct.unpack('<i8i8i8i8i8i8', tail, 1)
  elseif tl == 33 then
    dead, n, sum, first_t = struct.unpack('<i8i8i8i8', tail, 1)
  else
    return redis.error_reply(BAD)
  end
  if dead < 0 or dead > 2 * limit + 32 or n < 0 or n > 2 * limit or sum < n
      or sum > 2 * limit or (n == 0 and sum ~= 0) or (n > 0 and tl ~= 49) then
    return redis.error_reply(BAD)
  end
  if n > 0 then
    newest, last = t, c
    if last < 1 or first_t < 0 or newest < first_t or newest > TMAX
        or sum < last + n - 1 or (n == 1 and (sum ~= last or first_t ~= newest)) then
      return redis.error_reply(BAD)
    end
  end
elseif tl > 0 then
  -- 'M' (n, sum, entries) or 'L' (n, entries): read whole, every entry
  -- checked, then taken as n entries, none dead
  blob = redis.call('GET', K)
  local len, kind = #blob, string.byte(blob, 1)
  if kind == 77 and len >= 17 then
    from = 18
  elseif kind == 76 and len >= 9 then
    from = 10
  else
    return redis.error_reply(BAD)
  end
  n = struct.unpack('<i8', blob, 2)
  if n < 0 or n > 2 * limit or len ~= from - 1 + 16 * n then
    return redis.error_reply(BAD)
  end
  local prev, pos = -1, from
  for j = 1, n do
    local t, c = struct.unpack('<i8i8', blob, pos)
    if c < 1 or t <= prev or t > TMAX then
      return redis.error_reply(BAD)
    end
    sum = sum + c
    if sum > 2 * limit then
      return redis.error_reply(BAD)
    end
    if j == 1 then
      first_t = t
    end
    prev, newest, last, pos = t, t, c, pos + 16
  end
  if kind == 77 and struct.unpack('<i8', blob, 10) ~= sum then
    return redis.error_reply(BAD)
  end
end

-- Entry i (0-based, dead ones included), read 32 at a time from the
-- store (or from blob); the chunk read last is kept. Made only when
-- entries are to be walked (a closure costs the common case a few tenths
-- of a µs): some leave the window, or a denial within the limit may be.
local chunk, chunk_at, chunk_n, entry = nil, 0, 0, nil
if n > 0 and (first_t <= horizon or (cost <= limit and sum + cost > limit)) then
entry = function(i)
  if blob then
    return struct.unpack('<i8i8', blob, from + 16 * i)
  end
  if i < chunk_at or i >= chunk_at + chunk_n then
    chunk_at, chunk_n = i, dead + n - i
    if chunk_n > 32 then
      chunk_n = 32
    end
    chunk = redis.call('GETRANGE', K, 16 * i, 16 * (i + chunk_n) - 1)
    if #chunk ~= 16 * chunk_n then
      return -1, 0
    end
  end
  return struct.unpack('<i8i8', chunk, 1 + 16 * (i - chunk_at))
end
end

-- the entries that have left the window, in front of the live ones
local gone, freed, prev = 0, 0, -1
if n > 0 and first_t <= horizon then
  while gone < n do
    local t, c = entry(dead + gone)
    if c < 1 or t <= prev or (gone == 0 and t ~= first_t) then
      return redis.error_reply(BAD)
    end
    if t > horizon then
      first_t = t
      break
    end
    gone, freed, prev = gone + 1, freed + c, t
  end
  if gone == n and freed ~= sum then
    return redis.error_reply(BAD)
  end
end
local used, live = sum - freed, n - gone
local reset = 0
if live > 0 then
  reset = newest + period - now
end

if cost > limit then
  return {used, reset, 0}
end
if used + cost > limit then
  -- until enough of the oldest live entries leave
  local excess, got = used + cost - limit, 0
  for i = dead + gone, dead + n - 1 do
    local t, c = entry(i)
    if c < 1 then
      return redis.error_reply(BAD)
    end
    got = got + c
    if got >= excess then
      return {used, reset, t + period - now}
    end
  end
  return redis.error_reply(BAD)
end
if peek ~= 0 or cost == 0 then
  return {used, reset, 0}
end

-- ours at max(now, newest): merged into the newest when it has our time
-- (only it can: times increase), appended otherwise
local stamp = now
if live > 0 and newest > now then
  stamp = newest
end
-- The key must live px ms more (until the newest entry leaves, and the
-- grace). A write gives it `keep`: px and a quarter of the period more; a
-- write in place asks PTTL first and extends the TTL only when it falls
-- short of px, so most decisions send one write command, not two (a
-- second write in a script costs the server about as much as the rest of
-- the common path: docs/performance.md). PTTL is the server's own clock:
-- callers' clock skew cannot make a key expire early. The keys of this
-- twin may so live up to a quarter period longer than the C step's.
local px = (stamp + period - now + GRACE + 999) / 1000
px = px - px % 1 -- floor: integers below 2^53, no call into math
local keep = period / 4000
keep = px + keep - keep % 1
local m, merge = live, live > 0 and newest == stamp
if not merge then
  m = m + 1
end
if live == 0 then
  first_t = stamp
end
if blob or live == 0 or dead + gone > live + 32 then
  -- rewritten: the live entries alone, ours, the trailer (dead = 0)
  local body = ''
  if live > 0 then
    if blob then
      body = string.sub(blob, from + 16 * gone, from + 16 * n - 1)
    else
      body = redis.call('GETRANGE', K, 16 * (dead + gone), 16 * (dead + n) - 1)
    end
    if #body ~= 16 * live then
      return redis.error_reply(BAD)
    end
  end
  if merge then
    body = string.sub(body, 1, -9) .. struct.pack('<i8', last + cost)
  else
    body = body .. struct.pack('<i8i8', stamp, cost)
  end
  redis.call('SET', K, body .. struct.pack('<i8i8i8i8c1', 0, m, used + cost, first_t, 'S'),
    'PX', keep)
else
  -- in place: the newest's count or our entry, then the trailer, over the
  -- old trailer. A string longer than its trailer says is caught here
  -- (after the write: the state was malformed already), a shorter one
  -- when its entries are read (zeros padded in count 0)
  -- (one pack each: a Lua string made and hashed costs the server)
  local at, v = 16 * (dead + n), nil
  if merge then
    at, v = at - 8, struct.pack('<i8i8i8i8i8c1', last + cost, dead + gone, m,
      used + cost, first_t, 'S')
  else
    v = struct.pack('<i8i8i8i8i8i8c1', stamp, cost, dead + gone, m,
      used + cost, first_t, 'S')
  end
  if redis.call('SETRANGE', K, at, v) ~= at + #v then
    return redis.error_reply(BAD)
  end
  if redis.call('PTTL', K) < px then
    redis.call('PEXPIRE', K, keep)
  end
end
if stamp == now and given then
  return used -- written at the caller's own time: all it needs is `used`
end
return {used, reset, stamp}
