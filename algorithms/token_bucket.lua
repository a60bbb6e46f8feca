-- Twin of token_bucket.c: the same 57-byte state ('B', whole tokens, the
-- fraction in units of 1/period token, the last refill in µs, then the
-- parameters it was written under: limit, period, burst, version), the same
-- decisions: a request is decided at max(now, last refill), `ahead` µs
-- after now. The level is kept relative (units of 1/period token, at most
-- burst * period < 2^53: the core sends no limit whose numbers do not
-- fit), so no product leaves the exact range. Writes when the C step
-- would, and answers what is used before the call, full - level
-- (refilled; 0..2 * full, never negative: a batch reads a negative answer
-- as a failure), or {used, ahead} when the last refill is ahead of now:
-- bucket.c's drl__bucket_answer judges those exactly as its step does.
-- Parameters (algorithms/params.c, lua_params.lua: read and compared
-- there): a state written under other parameters is refilled at its own
-- limit, then decided by a newer stored version's numbers (answered as
-- {used, ahead, limit, burst}), or converted into this call's by
-- on_change and written even when nothing is consumed.
-- The level runs from -full (a penalty's debt) to full.
-- Adjust mode (drl_adjust): A[8] (after all seven arguments,
-- core/script.c) is the delta, the call a peek of cost 1; the level moves
-- by -delta tokens within -full..full (drl__bucket_adjust in bucket.c), is
-- written, and the peek is answered after it.
local level, last = full, now
if blob then
  -- tag: nil unless the state is 57 bytes long (lua_params.lua)
  if tag ~= 'B' then
    return redis.error_reply('ECORRUPT token_bucket state in the store is malformed')
  end
  if odd then
    return redis.error_reply('ECORRUPT token_bucket state in the store is malformed (its parameters)')
  end
  local whole, frac, l = s1, s2, s3
  local sfull = sb * period
  if whole < -sb or whole > sb or frac < 0 or frac >= period or l < 0 or l > 4611686018427387904 then
    return redis.error_reply('ECORRUPT token_bucket state in the store is malformed')
  end
  level, last = whole * period + frac, l
  if level > sfull or level < -sfull then
    return redis.error_reply('ECORRUPT token_bucket state in the store is malformed')
  end
  if now > last then
    -- refill at the stored limit: level + (now - last) * sl, capped at
    -- sfull; the product is only formed below the elapsed time that
    -- fills the bucket (ceil((sfull - level) / sl) µs), where it stays
    -- below 2^53
    local gap = sfull - level
    if (now - last) * sl >= gap or now - last >= gap then
      level = sfull
    else
      level = level + (now - last) * sl
    end
    last = now
  end
  if settle then
    local err
    level, err = settle(level, 'token_bucket')
    if not level then
      return redis.error_reply(err)
    end
  end
end

local ahead = last - now
local need = cost * period
-- the level to write: the adjusted one (adjust mode), or what is left
-- after an admitted cost; nil: nothing written
local left = nil
local adj = A[8]
if adj then
  -- at most 2 * burst tokens either way can move the level (products
  -- below 2^53); rounding beyond -full or full is clamped there
  adj = adj + 0
  if adj > 2 * burst then
    adj = 2 * burst
  elseif adj < -2 * burst then
    adj = -2 * burst
  end
  level = level - adj * period
  if level < -full then
    level = -full
  elseif level > full then
    level = full
  end
  left = level
elseif peek == 0 and cost > 0 and cost <= burst and level >= need then
  left = level - need
elseif changed and peek == 0 then
  left = level
end
if left then
  -- whole tokens and the fraction: floor(left / period), exactly
  -- (inline: a function would be a closure per call)
  local whole = math.floor(left / period)
  if whole * period > left then
    whole = whole - 1
  elseif (whole + 1) * period <= left then
    whole = whole + 1
  end
  -- the TTL: until the bucket is full again (ahead + ceil((full - left) /
  -- limit) µs, here taken as floor + 1: a TTL only cleans up, and one µs
  -- more changes nothing), plus the grace, in whole ms rounded up
  local ttl = ahead + math.floor((full - left) / limit) + 1 + GRACE
  redis.call('SET', KEYS[1],
    struct.pack('<c1i8i8i8i8i8i8i8', 'B', whole, left - whole * period, last,
      limit, period, burst, version),
    'PX', math.floor((ttl + 999) / 1000))
end
if theirs then
  return {full - level, ahead, limit, burst}
elseif ahead == 0 then
  return full - level
end
return {full - level, ahead}
