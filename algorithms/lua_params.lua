-- Shared by the twins whose state records its parameters (token_bucket,
-- gcra; after lua_head.lua at build time). Their states are 57 bytes: a
-- tag, three fields of the twin's own (s1, s2, s3), then the parameters
-- they were written under (limit, period, burst, version), read here in
-- one unpack; `tag` is nil when there is no 57-byte state (the twin
-- checks it). A[6] is on_change + 8 * version; the core leaves it out
-- when it is 0 (drl__script_nargs): missing, it is keep_used, version 0.
-- The common case costs no more than a state without parameters: when
-- the stored parameters are this call's, nothing else happens here (they
-- passed the core's checks, so they are not checked again; no closure is
-- created). Only a mismatch checks them (`odd`: malformed) and creates
-- settle(level, name), the twin of drl__params_settle
-- (algorithms/params.c); the twin then refills at the stored limit `sl`
-- and settles. Nothing here is a function a common call creates (a
-- closure per call, lua_head.lua).
local limit, period, burst = A[3] + 0, A[4] + 0, A[5] + 0
local policy, version = 0, 0
local word = A[6]
if word then
  word = word + 0
  policy = word % 8
  version = (word - policy) / 8
end
local full = burst * period
-- the stored numbers decide (a newer version): answered with them
local theirs = false
-- converted into this call's numbers: written even when nothing is used
local changed = false
local blob = redis.call('GET', KEYS[1])
local tag, s1, s2, s3, sl, sp, sb, sv, settle
local odd = false
if blob and #blob == 57 then
  tag, s1, s2, s3, sl, sp, sb, sv = struct.unpack('<c1i8i8i8i8i8i8i8', blob)
  if sl ~= limit or sb ~= burst or sv ~= version or sp ~= period then
    odd = sp ~= period or sl < 1 or sl > 1000000000 or sb < 1 or sb > 1000000000 or
      sv < 0 or sv > 1000000000 or sb * period > 4503599627370496
    -- floor(x / d) for integers |x| < 2^53, d > 0, exactly (the
    -- division's rounding corrected)
    local function fdiv(x, d)
      local q = math.floor(x / d)
      if q * d > x then
        return q - 1
      elseif (q + 1) * d <= x then
        return q + 1
      end
      return q
    end
    -- The level (units of 1/period token available, within
    -- +-sb * period), refilled at sl, of the state: the level in the
    -- numbers that decide (limit, burst, full, version are set to them),
    -- or nil and the error to answer.
    settle = function(level, name)
      if sv > version then
        limit, burst, full, version, theirs = sl, sb, sb * period, sv, true
        return level
      elseif sv == version and version > 0 then
        return nil, 'ECORRUPT ' .. name .. ': version ' .. string.format('%d', version) ..
          ' of this limit is stored with other parameters: a changed limit needs a higher version'
      end
      changed = true
      local p = policy
      if p == 3 then -- additive: keep_used when the bucket grows, else keep_available
        p = burst > sb and 0 or 1
      end
      if p == 0 then -- keep_used: full - (sb * period - level)
        level = full - sb * period + level
      elseif p == 2 then -- scale: floor(level * burst / sb), exactly
        local m = level < 0 and -level or level
        -- m = q * sb + r, then r * burst (< 2^60) in halves of burst (< 2^15)
        local q = fdiv(m, sb)
        local r = m - q * sb
        local bh = math.floor(burst / 32768)
        local t = r * bh
        local q1 = fdiv(t, sb)
        local u = (t - q1 * sb) * 32768 + r * (burst - bh * 32768)
        local q2 = fdiv(u, sb)
        level = level < 0 and -(q * burst + q1 * 32768 + q2 + (u > q2 * sb and 1 or 0))
          or q * burst + q1 * 32768 + q2
      elseif p == 4 then -- reset
        level = full
      end
      if level > full then
        return full
      elseif level < -full then
        return -full
      end
      return level
    end
  end
end
