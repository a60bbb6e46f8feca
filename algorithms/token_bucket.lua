-- Twin of token_bucket.c: the same 25-byte state, the same decisions: a
-- request is decided at max(now, last refill), `ahead` µs after now.
-- The level is kept relative (units of 1/period token, at most
-- burst * period < 2^53), so no product leaves the exact range.
local full = burst * period
local level, last = full, now
local blob = redis.call('GET', KEYS[1])
if blob then
  if #blob ~= 25 or string.sub(blob, 1, 1) ~= 'T' then
    return corrupt('token_bucket')
  end
  local _, whole, frac, l = struct.unpack('<c1i8i8i8', blob)
  if whole < 0 or whole > burst or frac < 0 or frac >= period or l < 0 or l > TIME_MAX then
    return corrupt('token_bucket')
  end
  level, last = whole * period + frac, l
  if level > full then
    return corrupt('token_bucket')
  end
  if now > last then
    if now - last >= cdiv(full - level, limit) then
      level = full
    else
      level = level + (now - last) * limit
    end
    last = now
  end
end

local ahead = last - now
-- until the state no longer matters (the key's TTL, less the grace)
local function settled_after()
  return ahead + cdiv(full - level, limit)
end
-- reset_after: 0 when full (a refill time ahead of now holds no debt)
local function until_full()
  if level >= full then
    return 0
  end
  return settled_after()
end

if cost > burst then
  return {0, fdiv(level, period), until_full(), -1, 0}
end
local need = cost * period
if level < need then
  return {0, fdiv(level, period), until_full(), ahead + cdiv(need - level, limit), 0}
end
if peek == 0 and cost > 0 then
  level = level - need
  local whole = fdiv(level, period)
  redis.call('SET', KEYS[1],
    struct.pack('<c1i8i8i8', 'T', whole, level - whole * period, last),
    'PX', settled_after() + grace)
end
return {1, fdiv(level, period), until_full(), 0, cost}
