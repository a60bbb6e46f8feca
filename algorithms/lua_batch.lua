-- Batch driver (appended at build time after `decide`, a twin wrapped in
-- a function; see scripts/embed_lua.py): decides many items of one limit
-- in order, in one script call, each exactly as the twin alone would.
-- KEYS[i]: item i's key (its key base, as the twin's KEYS[1]).
-- ARGV[1..m]: the twin's ARGV (as many as it reads: m = #ARGV - #KEYS),
--   shared by every item; ARGV[2] (the cost, -1 - cost for a peek) is
--   replaced per item by
-- ARGV[m + i]: item i's cost; it is a peek when the cost is 0, as
--   drl_allow_batch sets it.
-- Returns 5 integers per item, in item order: the twin's own answer
-- {allowed, remaining, reset_after_us, retry_after_us, undo} (a twin that
-- answers in a compact form of its own, one integer x or 2 to 4 of them,
-- gives them padded with zeros to 5: its algorithm's C side reads as
-- many as it answers), or, when the
-- twin failed for that item (an error reply, or an error raised by
-- redis.call, e.g. WRONGTYPE), {kind, 0, 0, 0, 0} with a negative kind:
-- -1 another error, -2 ECORRUPT (malformed state), -3 WRONGTYPE, -4 OOM,
-- -5 an answer that is not five numbers. One failed item never stops the
-- others. Error texts stay on the server: the kind is what the core reports.
-- All keys go to one script call: on Redis Cluster they must share a hash
-- slot (the caller groups them; today one Redis is assumed).
local kinds = {ECORRUPT = -2, WRONGTYPE = -3, OOM = -4}

local function failure(e)
  if type(e) == 'table' then
    e = e.err
  end
  e = tostring(e)
  -- "CODE text", or "script:line: CODE text" for a raised error
  local code = string.match(e, '^%-?(%u+) ') or string.match(e, '^[^ ]*:%d+: %-?(%u+) ')
  return kinds[code] or -1
end

local key, args, out = {}, {}, {}
local m = #ARGV - #KEYS
for j = 1, m do
  args[j] = ARGV[j]
end
for i = 1, #KEYS do
  local cost = tonumber(ARGV[m + i])
  key[1] = KEYS[i]
  args[2] = cost == 0 and -1 or cost
  local ok, r = pcall(decide, key, args)
  local at = (i - 1) * 5
  local kind = 0
  if not ok or (type(r) == 'table' and r.err) then
    kind = failure(r)
  elseif type(r) == 'number' then
    r = {r, 0, 0, 0, 0}
  elseif type(r) ~= 'table' or #r < 2 or #r > 5 then
    kind = -5
  else
    r[3], r[4], r[5] = r[3] or 0, r[4] or 0, r[5] or 0
    for j = 1, 5 do
      if type(r[j]) ~= 'number' then
        kind = -5
      end
    end
  end
  if kind == 0 then
    for j = 1, 5 do
      out[at + j] = r[j]
    end
  else
    out[at + 1], out[at + 2], out[at + 3], out[at + 4], out[at + 5] = kind, 0, 0, 0, 0
  end
end
return out
