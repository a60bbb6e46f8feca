-- Twin of gcra.c: the same 17-byte state (TAT in µs + remainder in ticks of
-- 1/limit µs), the same decisions. Works on the debt TAT - now in ticks,
-- which stays below burst * period < 2^53 for states it wrote.
local tau = burst * period
local debt = 0
local blob = redis.call('GET', KEYS[1])
if blob then
  if #blob ~= 17 or string.sub(blob, 1, 1) ~= 'G' then
    return corrupt('gcra')
  end
  local _, us, rem = struct.unpack('<c1i8i8', blob)
  if us < 0 or us > TIME_MAX + FILL_TIME_MAX or rem < 0 or rem >= limit then
    return corrupt('gcra')
  end
  if us > now or (us == now and rem > 0) then
    debt = (us - now) * limit + rem
  end
end

if cost > burst then
  return {0, fdiv(tau - debt, period), cdiv(debt, limit), -1, 0}
end
local new_debt = debt + cost * period
if cost > 0 and new_debt > tau then
  return {0, fdiv(tau - debt, period), cdiv(debt, limit), cdiv(new_debt - tau, limit), 0}
end
if peek ~= 0 or cost == 0 then
  return {1, fdiv(tau - debt, period), cdiv(debt, limit), 0, 0}
end
local reset = cdiv(new_debt, limit)
local us = fdiv(new_debt, limit)
redis.call('SET', KEYS[1], struct.pack('<c1i8i8', 'G', now + us, new_debt - us * limit),
  'PX', reset + grace)
return {1, fdiv(tau - new_debt, period), reset, 0, cost}
