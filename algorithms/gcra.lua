-- Twin of gcra.c: the same 57-byte state ('H', TAT in µs + remainder in
-- ticks of 1/limit µs, NEWEST in µs, then the parameters it was written
-- under: limit, period, burst, version), the same decisions: `now` is
-- taken as max(now, NEWEST), ahead of now by `ahead` µs. Works on the
-- debt TAT - max(now, NEWEST) in ticks, at most 2 * burst * period < 2^53
-- (the core sends no limit whose numbers do not fit). The debt is what is
-- used in units of 1/period token under any limit: a state written under
-- other parameters is settled (lua_params.lua, which reads the state and
-- compares its parameters) as token_bucket's level is,
-- and written even when nothing is consumed when it was converted.
-- Writes when the C step would, and answers the debt before the call, or
-- {debt, ahead} when NEWEST is ahead of now, or {debt, ahead, limit,
-- burst} when a newer stored version decided: bucket.c's drl__bucket_answer judges
-- those exactly as its step does (every field of the decision follows).
-- The debt runs to 2 * full (a penalty's). Adjust mode (drl_adjust): A[8]
-- (after all seven arguments, core/script.c) is the delta, the call a
-- peek of cost 1; the debt moves by delta emission intervals within
-- 0..2 * full (drl__bucket_adjust in bucket.c), is written, and the peek is
-- answered after it.
local ahead, debt = 0, 0
if blob then
  -- tag: nil unless the state is 57 bytes long (lua_params.lua)
  if tag ~= 'H' then
    return redis.error_reply('ECORRUPT gcra state in the store is malformed')
  end
  if odd then
    return redis.error_reply('ECORRUPT gcra state in the store is malformed (its parameters)')
  end
  local us, rem, newest = s1, s2, s3
  local stau = sb * period
  if us < 0 or rem < 0 or rem >= sl then
    return redis.error_reply('ECORRUPT gcra state in the store is malformed')
  end
  -- NEWEST <= TAT <= NEWEST + 2 * stau (ticks of the stored 1/sl µs)
  local d = us - newest
  if newest < 0 or newest > 4611686018427387904 or d < 0 or d * sl + rem > 2 * stau then
    return redis.error_reply('ECORRUPT gcra state in the store is malformed')
  end
  if newest > now then
    ahead = newest - now
  end
  local base = now + ahead
  if us > base or (us == base and rem > 0) then
    debt = (us - base) * sl + rem
  end
  -- the debt is what is used in units of 1/period token, under any limit
  if settle then
    local level, err = settle(stau - debt, 'gcra')
    if not level then
      return redis.error_reply(err)
    end
    debt = full - level
  end
end

-- written when `write`: the adjusted debt (adjust mode), or the one
-- after an admitted cost
local new_debt = debt + cost * period
local write = peek == 0 and cost > 0 and cost <= burst and new_debt <= full
if changed and peek == 0 and not write then
  -- converted: written even when nothing is consumed
  write, new_debt = true, debt
end
local adj = A[8]
if adj then
  -- at most 2 * burst intervals either way can move the debt; a sum
  -- rounded beyond 0 or 2 * full is clamped there (exact within)
  adj = adj + 0
  if adj > 2 * burst then
    adj = 2 * burst
  elseif adj < -2 * burst then
    adj = -2 * burst
  end
  debt = debt + adj * period
  if debt > 2 * full then
    debt = 2 * full
  elseif debt < 0 then
    debt = 0
  end
  new_debt, write = debt, true
end
if write then
  -- TAT = now + ahead + new_debt ticks: whole µs (floor, exactly;
  -- inline: a function would be a closure per call) and remainder
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
    struct.pack('<c1i8i8i8i8i8i8i8', 'H', now + ahead + us, rem, now + ahead,
      limit, period, burst, version),
    'PX', math.floor((ttl + 999) / 1000))
end
if theirs then
  return {debt, ahead, limit, burst}
elseif ahead == 0 then
  return debt
end
return {debt, ahead}
