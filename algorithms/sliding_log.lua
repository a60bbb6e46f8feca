-- Twin of sliding_log.c: the same state ('L', n, n x (time, count)), the
-- same decisions. Times are µs below 2^53.
local ts, cnt, n = {}, {}, 0
local blob = redis.call('GET', KEYS[1])
if blob then
  if #blob < 9 or string.sub(blob, 1, 1) ~= 'L' then
    return corrupt('sliding_log')
  end
  local _, m = struct.unpack('<c1i8', blob)
  if m < 0 or m > limit or #blob ~= 9 + 16 * m then
    return corrupt('sliding_log')
  end
  local sum = 0
  for k = 1, m do
    local t, c = struct.unpack('<i8i8', blob, 10 + (k - 1) * 16)
    if c < 1 or t < 0 or t > TIME_MAX or (k > 1 and t <= ts[k - 1]) then
      return corrupt('sliding_log')
    end
    sum = sum + c
    if sum > limit then
      return corrupt('sliding_log')
    end
    ts[k], cnt[k] = t, c
  end
  n = m
end

local first = 1
while first <= n and ts[first] <= now - period do
  first = first + 1
end
local used = 0
for k = first, n do
  used = used + cnt[k]
end
local newest = -1
if n >= first then
  newest = ts[n]
end
local reset = 0
if newest >= 0 then
  reset = newest + period - now
end

if cost > limit or used + cost > limit then
  local retry = -1
  if cost <= limit then
    local excess, freed, k = used + cost - limit, 0, first
    while true do
      freed = freed + cnt[k]
      if freed >= excess then
        break
      end
      k = k + 1
    end
    retry = ts[k] + period - now
  end
  return {0, limit - used, reset, retry, 0}
end
if peek ~= 0 or cost == 0 then
  return {1, limit - used, reset, 0, 0}
end

local stamp = math.max(now, newest)
local parts, m, merged = {}, 0, false
for k = first, n do
  local c = cnt[k]
  if ts[k] == stamp then
    c = c + cost
    merged = true
  end
  m = m + 1
  parts[m + 1] = struct.pack('<i8i8', ts[k], c)
end
if not merged then
  m = m + 1
  parts[m + 1] = struct.pack('<i8i8', stamp, cost)
end
parts[1] = struct.pack('<c1i8', 'L', m)
reset = stamp + period - now
redis.call('SET', KEYS[1], table.concat(parts), 'PX', cdiv(reset + grace, 1000)) -- whole ms
return {1, limit - used - cost, reset, 0, stamp}
