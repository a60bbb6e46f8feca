-- Shared by the twins whose state records its parameters (token_bucket,
-- gcra; after lua_head.lua at build time): the numbers of this call, its
-- change rules (A[6] = on_change + 8 * version) and settle(), the twin of
-- drl__params_settle (algorithms/params.c), and fdiv. Two closures per
-- call: the price of sharing the conversion between the twins.
local limit, period, burst = A[3] + 0, A[4] + 0, A[5] + 0
local version = math.floor((A[6] + 0) / 8)
local policy = A[6] - 8 * version
local full = burst * period
-- the stored numbers decide (a newer version): answered with them
local theirs = false
-- converted into this call's numbers: written even when nothing is used
local changed = false

-- floor(x / d) for integers |x| < 2^53, d > 0, exactly (the division's
-- rounding corrected).
local function fdiv(x, d)
  local q = math.floor(x / d)
  if q * d > x then
    return q - 1
  elseif (q + 1) * d <= x then
    return q + 1
  end
  return q
end

-- The level (units of 1/period token available, within +-sb * period),
-- refilled at the stored limit sl, of a state written under (sl, sb, sv):
-- the level in the numbers that decide (limit, burst, full, version are
-- set to them), or nil and the error to answer.
local function settle(level, sl, sb, sv, name)
  if sv > version then
    limit, burst, full, version, theirs = sl, sb, sb * period, sv, true
    return level
  elseif sv == version and sl == limit and sb == burst then
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
