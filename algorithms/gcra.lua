-- Twin of gcra.c: the same 25-byte state (TAT in µs + remainder in ticks of
-- 1/limit µs, NEWEST in µs; the old 17-byte one is still read), the same
-- decisions: `now` is taken as max(now, NEWEST), ahead of now by `ahead`
-- µs. Works on the debt TAT - max(now, NEWEST) in ticks, at most
-- burst * period < 2^53 (the core sends no limit whose numbers do not fit).
-- Writes when the C step would, and answers the debt before the call, or
-- {debt, ahead} when NEWEST is ahead of now: gcra.c's lua_answer judges
-- those exactly as its step does (every field of the decision follows).
-- The debt runs to 2 * tau (a penalty's). Adjust mode (drl_adjust): A[8]
-- (after all seven arguments, core/script.c) is the delta, the call a peek of cost 1; the debt moves by delta
-- emission intervals within 0..2 * tau (adjust_step in gcra.c), is
-- written, and the peek is answered after it.
local limit, period, burst = A[3] + 0, A[4] + 0, A[5] + 0
local tau = burst * period
local ahead, debt = 0, 0
local blob = redis.call('GET', KEYS[1])
if blob then
  local n = #blob
  if (n ~= 25 and n ~= 17) or string.byte(blob, 1) ~= 71 then -- 'G'
    return redis.error_reply('ECORRUPT gcra state in the store is malformed')
  end
  local _, us, rem, newest
  if n == 25 then
    _, us, rem, newest = struct.unpack('<c1i8i8i8', blob)
  else
    _, us, rem = struct.unpack('<c1i8i8', blob)
  end
  if us < 0 or rem < 0 or rem >= limit then
    return redis.error_reply('ECORRUPT gcra state in the store is malformed')
  end
  if n == 25 then
    -- NEWEST <= TAT <= NEWEST + 2 * tau
    local d = us - newest
    if newest < 0 or newest > 4611686018427387904 or d < 0 or d * limit + rem > 2 * tau then
      return redis.error_reply('ECORRUPT gcra state in the store is malformed')
    end
  else
    -- no NEWEST: the earliest the TAT allows, ceil(TAT - tau), i.e.
    -- us - floor((tau - rem) / limit) (floor corrected: exact below 2^53)
    local x = tau - rem
    local q = math.floor(x / limit)
    if q * limit > x then
      q = q - 1
    elseif (q + 1) * limit <= x then
      q = q + 1
    end
    newest = us - q
    if newest > 4611686018427387904 then
      return redis.error_reply('ECORRUPT gcra state in the store is malformed')
    end
  end
  if newest > now then
    ahead = newest - now
  end
  local base = now + ahead
  if us > base or (us == base and rem > 0) then
    debt = (us - base) * limit + rem
  end
end

-- written when `write`: the adjusted debt (adjust mode), or the one
-- after an admitted cost
local new_debt = debt + cost * period
local write = peek == 0 and cost > 0 and cost <= burst and new_debt <= tau
local adj = A[8]
if adj then
  -- at most 2 * burst intervals either way can move the debt; a sum
  -- rounded beyond 0 or 2 * tau is clamped there (exact within)
  adj = adj + 0
  if adj > 2 * burst then
    adj = 2 * burst
  elseif adj < -2 * burst then
    adj = -2 * burst
  end
  debt = debt + adj * period
  if debt > 2 * tau then
    debt = 2 * tau
  elseif debt < 0 then
    debt = 0
  end
  new_debt, write = debt, true
end
if write then
  -- TAT = now + ahead + new_debt ticks: whole µs (floor) and remainder
  local us = math.floor(new_debt / limit)
  if us * limit > new_debt then
    us = us - 1
  elseif (us + 1) * limit <= new_debt then
    us = us + 1
  end
  local rem = new_debt - us * limit
  -- the TTL: until the meter is empty (ahead + ceil(new_debt / limit)
  -- µs), plus the grace, in whole ms rounded up
  local ttl = ahead + us + (rem > 0 and 1 or 0) + GRACE
  redis.call('SET', KEYS[1],
    struct.pack('<c1i8i8i8', 'G', now + ahead + us, rem, now + ahead),
    'PX', math.floor((ttl + 999) / 1000))
end
if ahead == 0 then
  return debt
end
return {debt, ahead}
