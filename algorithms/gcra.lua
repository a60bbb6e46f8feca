-- Twin of gcra.c: the same 25-byte state (TAT in µs + remainder in ticks of
-- 1/limit µs, NEWEST in µs; the old 17-byte one is still read), the same
-- decisions: `now` is taken as max(now, NEWEST), ahead of now by `ahead`
-- µs. Works on the debt TAT - max(now, NEWEST) in ticks, at most
-- burst * period < 2^53.
local tau = burst * period
local ahead, debt = 0, 0
local blob = redis.call('GET', KEYS[1])
if blob then
  if (#blob ~= 25 and #blob ~= 17) or string.sub(blob, 1, 1) ~= 'G' then
    return corrupt('gcra')
  end
  local _, us, rem = struct.unpack('<c1i8i8', blob)
  if us < 0 or rem < 0 or rem >= limit then
    return corrupt('gcra')
  end
  local newest
  if #blob == 25 then
    newest = struct.unpack('<i8', blob, 18)
    -- NEWEST <= TAT <= NEWEST + tau
    local d = us - newest
    if newest < 0 or newest > TIME_MAX or d < 0 or d > fdiv(tau, limit)
        or d * limit + rem > tau then
      return corrupt('gcra')
    end
  else
    -- no NEWEST: the earliest the TAT allows, ceil(TAT - tau)
    newest = us - fdiv(tau - rem, limit)
    if newest > TIME_MAX then
      return corrupt('gcra')
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

local reset = 0
if debt > 0 then
  reset = ahead + cdiv(debt, limit)
end
if cost > burst then
  return {0, fdiv(tau - debt, period), reset, -1, 0}
end
local new_debt = debt + cost * period
if new_debt > tau then
  return {0, fdiv(tau - debt, period), reset, ahead + cdiv(new_debt - tau, limit), 0}
end
if peek ~= 0 or cost == 0 then
  return {1, fdiv(tau - debt, period), reset, 0, 0}
end
reset = ahead + cdiv(new_debt, limit)
local us = fdiv(new_debt, limit)
redis.call('SET', KEYS[1],
  struct.pack('<c1i8i8i8', 'G', now + ahead + us, new_debt - us * limit, now + ahead),
  'PX', reset + grace)
return {1, fdiv(tau - new_debt, period), reset, 0, cost}
