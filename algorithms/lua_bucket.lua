-- The engine of the bucket twins (token_bucket.lua, gcra.lua: appended
-- after the twin at build time, which names its state: TAG, NAME and BAD,
-- its ECORRUPT reply), as algorithms/bucket.c is the C steps': one
-- algorithm, a bucket of `burst` tokens refilled at `limit` per `period`,
-- in two encodings of one 57-byte state (read by lua_params.lua). Here the
-- bucket is `used`: what is used in units of 1/period token, full - level,
-- at max(now, the state's time), `ahead` µs after now; at most
-- 2 * burst * period < 2^53 (the core sends no limit whose numbers do not
-- fit), so no sum leaves the exact range. Only reading and writing the
-- state depend on its encoding: a branch on TAG (a function would be a
-- closure per call, lua_head.lua).
-- Parameters (algorithms/params.c, lua_params.lua: read and compared
-- there): a state written under other parameters is refilled at its own
-- limit, then decided by a newer stored version's numbers (answered as
-- {used, ahead, limit, burst}), or converted into this call's by
-- on_change and written even when nothing is consumed.
-- Writes when the C step would, and answers what is used before the call
-- (refilled; 0..2 * full, never negative: a batch reads a negative answer
-- as a failure), or {used, ahead} when the state's time is ahead of now:
-- bucket.c's drl__bucket_answer judges those exactly as its step does
-- (every field of the decision follows). `used` runs to 2 * full (a
-- penalty's). Adjust mode (drl_adjust): A[8] (after all seven arguments,
-- core/script.c) is the delta, the call a peek of cost 1; `used` moves by
-- delta tokens within 0..2 * full (drl__bucket_adjust in bucket.c), is
-- written, and the peek is answered after it.
local used, ahead = 0, 0
if blob then
  -- tag: nil unless the state is 57 bytes long (lua_params.lua)
  if tag ~= TAG then
    return redis.error_reply(BAD)
  end
  if odd then
    return redis.error_reply(BAD .. ' (its parameters)')
  end
  local sfull = sb * period
  -- the level (units of 1/period token) at max(now, the state's time),
  -- refilled at the stored limit `sl`, within -sfull..sfull
  local level
  if TAG == 'H' then
    local us, rem, newest = s1, s2, s3
    if us < 0 or rem < 0 or rem >= sl then
      return redis.error_reply(BAD)
    end
    -- NEWEST <= TAT <= NEWEST + 2 * sfull (ticks of the stored 1/sl µs)
    local d = us - newest
    if newest < 0 or newest > 4611686018427387904 or d < 0 or d * sl + rem > 2 * sfull then
      return redis.error_reply(BAD)
    end
    if newest > now then
      ahead = newest - now
    end
    -- the debt TAT - max(now, NEWEST), in ticks
    local base, debt = now + ahead, 0
    if us > base or (us == base and rem > 0) then
      debt = (us - base) * sl + rem
    end
    level = sfull - debt
  else
    local whole, frac, last = s1, s2, s3
    if whole < -sb or whole > sb or frac < 0 or frac >= period or last < 0 or last > 4611686018427387904 then
      return redis.error_reply(BAD)
    end
    level = whole * period + frac
    if level > sfull or level < -sfull then
      return redis.error_reply(BAD)
    end
    if now > last then
      -- refill: level + (now - last) * sl, capped at sfull; the product
      -- is only formed below the elapsed time that fills the bucket
      -- (ceil((sfull - level) / sl) µs), where it stays below 2^53
      local gap = sfull - level
      if (now - last) * sl >= gap or now - last >= gap then
        level = sfull
      else
        level = level + (now - last) * sl
      end
    else
      ahead = last - now
    end
  end
  if settle then
    local err
    level, err = settle(level, NAME)
    if not level then
      return redis.error_reply(err)
    end
  end
  used = full - level
end

-- written when `write`: the adjusted `used` (adjust mode), the one after
-- an admitted cost, or (converted) the one read
local new_used = used + cost * period
local write = peek == 0 and cost > 0 and cost <= burst and new_used <= full
if changed and peek == 0 and not write then
  write, new_used = true, used
end
local adj = A[8]
if adj then
  -- at most 2 * burst tokens either way can move `used`; a sum rounded
  -- beyond 0 or 2 * full is clamped there (exact within)
  adj = adj + 0
  if adj > 2 * burst then
    adj = 2 * burst
  elseif adj < -2 * burst then
    adj = -2 * burst
  end
  used = used + adj * period
  if used > 2 * full then
    used = 2 * full
  elseif used < 0 then
    used = 0
  end
  new_used, write = used, true
end
if write then
  -- the state's own fields, from x / d in whole numbers (q, floor,
  -- exactly: lua_prelude.lua's fdiv, inline, as a function would be a
  -- closure per call) and the remainder r, at the time `at` the state is
  -- advanced to
  local x, d = new_used, limit -- 'H': TAT - at, in µs and ticks
  if TAG == 'B' then
    x, d = full - new_used, period -- the level, in tokens and fraction
  end
  local q = math.floor(x / d)
  if q * d > x then
    q = q - 1
  elseif (q + 1) * d <= x then
    q = q + 1
  end
  local r, at = x - q * d, now + ahead
  -- the first field, and the TTL before the grace: until the state is
  -- settled, ahead + ceil(new_used / limit) µs (token_bucket takes it as
  -- floor + 1: a TTL only cleans up, and one µs more changes nothing)
  local first, ttl
  if TAG == 'H' then
    first, ttl = at + q, ahead + q + (r > 0 and 1 or 0)
  else
    first, ttl = q, ahead + math.floor(new_used / limit) + 1
  end
  redis.call('SET', KEYS[1],
    struct.pack('<c1i8i8i8i8i8i8i8', TAG, first, r, at, limit, period, burst, version),
    'PX', math.floor((ttl + GRACE + 999) / 1000))
end
if theirs then
  return {used, ahead, limit, burst}
elseif ahead == 0 then
  return used
end
return {used, ahead}
