-- Twin of sliding_log.c: the same state, the same decisions. Times are µs
-- below 2^53.
-- State 'R' (sliding_log.c says it in full): 16-byte entries (time, count),
-- times strictly increasing: `dead` entries in front that have left the
-- window, then the n live ones; then a 57-byte trailer (dead, n, the live
-- counts' sum, the first live entry's time, LIMIT, PERIOD, version, 'R').
-- Anything else (the 'S', 'M' and 'L' states written before, under keys
-- that named LIMIT) is ECORRUPT.
-- What a decision costs the server is the deployment's capacity, and it
-- must not grow with the log (up to 640 KB): the twin reads the trailer
-- and the newest entry (one GETRANGE of the last 73 bytes), the entries
-- that leave the window and, for a denial within the limit, as many as it
-- takes to free the cost (GETRANGE of 32 at a time), and writes the new
-- entry (or the newest's new count) with the trailer after it in one
-- SETRANGE: entries that leave stay in front, counted in `dead`, until
-- they outnumber the live ones by 32; then the live ones are rewritten
-- alone (a SET: amortised, each entry is copied at most once more).
-- The twin checks what it reads and the bounds the trailer must meet;
-- sliding_log.c checks every entry.
-- A changed limit (A[6] = on_change + 8 * version): a newer stored version
-- decides with its LIMIT (answered as a 4th value); an older one, or none
-- on either side, is taken over: the trailer written with this call's
-- LIMIT and version even when nothing is used, the log kept (keep_used)
-- or emptied (reset, 4); the same version with another LIMIT is ECORRUPT.
-- The log is what was used: a log from a higher LIMIT is kept whole, so
-- the bounds are those of the largest LIMIT (10000,
-- DRL_SLIDING_LOG_LIMIT_MAX): up to 20000 live units and entries.
-- Answers {used, reset, x}: the count of the live entries before the call,
-- µs until the newest of them leaves the window (0: none), and x: the time
-- written (an allowed write), µs until enough entries leave for the cost (a
-- denial within the limit), else 0; {used, reset, x, limit} when a newer
-- stored version's limit decided; or `used` alone for a write at the
-- caller's own time (the common case: a table costs more than the
-- arithmetic). sliding_log.c's lua_answer decides from them exactly as its
-- step does.
-- A penalty (drl_adjust) may take the live sum to 2 * limit (and the
-- entries with it). Adjust mode: A[8] (after all seven arguments,
-- core/script.c) is the delta, the call a peek of cost 1: the log is read
-- whole, moved as adjust_step in sliding_log.c moves it, written
-- compacted, and the peek answered {used, reset, retry[, limit]}.
local limit, period = A[3] + 0, A[4] + 0
-- on_change + 8 * version; left out (nil) when both are 0 (core/script.c)
local version = (A[6] or 0) + 0
local policy = version % 8
version = (version - policy) / 8
local horizon = now - period
local K = KEYS[1]
local BAD = 'ECORRUPT sliding_log state in the store is malformed'
local TMAX = 4611686018427387904
local LIVE = 20000 -- 2 * DRL_SLIDING_LOG_LIMIT_MAX
-- dead and n entries, the live ones' sum, the first live one's time, the
-- newest (time, count)
local dead, n, sum, first_t, newest, last = 0, 0, 0, 0, -1, 0
-- theirs: a newer stored version decides; changed: taken over
local theirs, changed = false, false
-- (constant arguments as strings: Redis 7.0 formats a Lua number passed
-- to redis.call with "%.17g", about 2,300 instructions each, a tenth of
-- the common path: scripts/bench_twin_ab.sh BENCH_MEASURE=instructions)
local tail = redis.call('GETRANGE', K, '-73', '-1')
local tl = #tail
if tl > 0 then
  if string.byte(tail, tl) ~= 82 then -- 'R'
    return redis.error_reply(BAD)
  end
  -- one unpack of the newest entry and the trailer (each call into the
  -- struct library costs the server)
  local t, c, sl, sp, sv
  if tl == 73 then
    t, c, dead, n, sum, first_t, sl, sp, sv = struct.unpack('<i8i8i8i8i8i8i8i8i8', tail, 1)
  elseif tl == 57 then
    dead, n, sum, first_t, sl, sp, sv = struct.unpack('<i8i8i8i8i8i8i8', tail, 1)
  else
    return redis.error_reply(BAD)
  end
  if dead < 0 or dead > LIVE + 32 or n < 0 or n > LIVE or sum < n
      or sum > LIVE or (n == 0 and sum ~= 0) or (n > 0 and tl ~= 73)
      or (tl == 57) ~= (dead + n == 0) or sp ~= period or sl < 1
      or sl > 10000 or sv < 0 or sv > 1000000000 then
    return redis.error_reply(BAD)
  end
  if n > 0 then
    newest, last = t, c
    if last < 1 or first_t < 0 or newest < first_t or newest > TMAX
        or sum < last + n - 1 or (n == 1 and (sum ~= last or first_t ~= newest)) then
      return redis.error_reply(BAD)
    end
  end
  -- the numbers that decide (sliding_log.c's settle)
  if sv > version then
    limit, version, theirs = sl, sv, true
  elseif sv ~= version or sl ~= limit then
    if sv == version and version > 0 then
      return redis.error_reply('ECORRUPT sliding_log: version ' .. string.format('%d', version) ..
        ' of this limit is stored with other parameters: a changed limit needs a higher version')
    end
    changed = true
    if policy == 4 then -- reset: every entry as if it had left
      dead, n, sum, newest = dead + n, 0, 0, -1
    end
  end
end
local adj = A[8]
if adj then
  adj = adj + 0
  local ts, cs, m = {}, {}, 0 -- the live entries
  if n > 0 then
    local whole = redis.call('GET', K)
    if #whole ~= 57 + 16 * (dead + n) then
      return redis.error_reply(BAD)
    end
    local prev, total, at = -1, 0, 1 + 16 * dead
    for j = 1, n do
      local t, c = struct.unpack('<i8i8', whole, at + 16 * (j - 1))
      total = total + c
      if c < 1 or t <= prev or t > TMAX or total > LIVE or (j == 1 and t ~= first_t) then
        return redis.error_reply(BAD)
      end
      prev = t
      if t > horizon then
        m = m + 1
        ts[m], cs[m] = t, c
      end
    end
    if total ~= sum then
      return redis.error_reply(BAD)
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
  parts[m + 1] = struct.pack('<i8i8i8i8i8i8i8c1', 0, m, used, first, limit,
    period, version, 'R')
  local top = now - period
  if m > 0 then
    top = ts[m]
  end
  redis.call('SET', K, table.concat(parts, '', 1, m + 1), 'PX',
    math.floor((top + period - now + GRACE + 999) / 1000))
  -- the peek of cost 1 on the log as written
  local reset, x = 0, 0
  if m > 0 then
    reset = ts[m] + period - now
  end
  if used + 1 > limit then
    local excess, got = used + 1 - limit, 0
    for j = 1, m do
      got = got + cs[j]
      if got >= excess then
        x = ts[j] + period - now
        break
      end
    end
  end
  if theirs then
    return {used, reset, x, limit}
  end
  return {used, reset, x}
end

-- Entry i (0-based, dead ones included), read 32 at a time from the
-- store; the chunk read last is kept. Made only when entries are to be
-- walked (a closure costs the common case a few tenths of a µs): some
-- leave the window, or a denial within the limit may be.
local chunk, chunk_at, chunk_n, entry = nil, 0, 0, nil
if n > 0 and (first_t <= horizon or (cost <= limit and sum + cost > limit)) then
entry = function(i)
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

-- add: what this call writes; x: the answer's third value
local add, x = 0, 0
if cost > limit then
  x = 0
elseif used + cost > limit then
  -- until enough of the oldest live entries leave
  local excess, got = used + cost - limit, 0
  for i = dead + gone, dead + n - 1 do
    local t, c = entry(i)
    if c < 1 then
      return redis.error_reply(BAD)
    end
    got = got + c
    if got >= excess then
      x = t + period - now
      break
    end
  end
  if x == 0 then
    return redis.error_reply(BAD)
  end
elseif peek == 0 then
  add = cost
end
if add == 0 and (peek ~= 0 or not changed) then
  if theirs then
    return {used, reset, x, limit}
  end
  return {used, reset, x}
end

-- ours at max(now, newest): merged into the newest when it has our time
-- (only it can: times increase), appended otherwise; or (add 0: taken
-- over) the live entries as they are
local stamp = now
if live > 0 and newest > now then
  stamp = newest
end
local top = stamp -- the newest entry written
if add == 0 then
  top = live > 0 and newest or now - period
end
-- The key must live px ms more (until the newest entry leaves, and the
-- grace). A write gives it `keep`: px and a quarter of the period more; a
-- write in place asks PTTL first and extends the TTL only when it falls
-- short of px, so most decisions send one write command, not two (a
-- second write in a script costs the server about as much as the rest of
-- the common path: docs/performance.md). PTTL is the server's own clock:
-- callers' clock skew cannot make a key expire early. The keys of this
-- twin may so live up to a quarter period longer than the C step's.
local px = (top + period - now + GRACE + 999) / 1000
px = px - px % 1 -- floor: integers below 2^53, no call into math
local keep = period / 4000
keep = px + keep - keep % 1
local m, merge = live, add > 0 and live > 0 and newest == stamp
if add > 0 and not merge then
  m = m + 1
end
if live == 0 then
  first_t = add > 0 and stamp or 0
end
if live == 0 or dead + gone > live + 32 then
  -- rewritten: the live entries alone, ours, the trailer (dead = 0)
  local body = ''
  if live > 0 then
    body = redis.call('GETRANGE', K, 16 * (dead + gone), 16 * (dead + n) - 1)
    if #body ~= 16 * live then
      return redis.error_reply(BAD)
    end
  end
  if merge then
    body = string.sub(body, 1, -9) .. struct.pack('<i8', last + cost)
  elseif add > 0 then
    body = body .. struct.pack('<i8i8', stamp, cost)
  end
  redis.call('SET', K, body .. struct.pack('<i8i8i8i8i8i8i8c1', 0, m, used + add,
    first_t, limit, period, version, 'R'), 'PX', keep)
else
  -- in place: the newest's count or our entry, then the trailer, over the
  -- old trailer (or the trailer alone). A string longer than its trailer
  -- says is caught here (after the write: the state was malformed
  -- already), a shorter one when its entries are read (zeros padded in
  -- count 0)
  -- (one pack each: a Lua string made and hashed costs the server)
  local at, v = 16 * (dead + n), nil
  if merge then
    at, v = at - 8, struct.pack('<i8i8i8i8i8i8i8i8c1', last + cost, dead + gone,
      m, used + cost, first_t, limit, period, version, 'R')
  elseif add > 0 then
    v = struct.pack('<i8i8i8i8i8i8i8i8i8c1', stamp, cost, dead + gone, m,
      used + cost, first_t, limit, period, version, 'R')
  else
    v = struct.pack('<i8i8i8i8i8i8i8c1', dead + gone, m, used, first_t, limit,
      period, version, 'R')
  end
  if redis.call('SETRANGE', K, at, v) ~= at + #v then
    return redis.error_reply(BAD)
  end
  if redis.call('PTTL', K) < px then
    redis.call('PEXPIRE', K, keep)
  end
end
if add == 0 then
  return {used, reset, x}
end
if stamp == now and given and not theirs then
  return used -- written at the caller's own time: all it needs is `used`
end
if theirs then
  return {used, reset, stamp, limit}
end
return {used, reset, stamp}
