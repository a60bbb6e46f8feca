-- A peer's script, for scripts/bench_server_cost.sh only (never run by
-- the library): go-redis/redis_rate v9 `allowN` (lua.go), itself from
-- rwz/redis-gcra. Copyright (c) 2017 Pavel Pravosud; go-redis/redis_rate
-- is BSD-2-Clause licensed. Kept as its authors wrote it, comments
-- shortened, so that the benchmark measures what its users run.
-- KEYS[1]: the key; ARGV: burst, rate, period (s), cost.
redis.replicate_commands()
local rate_limit_key = KEYS[1]
local burst = ARGV[1]
local rate = ARGV[2]
local period = ARGV[3]
local cost = tonumber(ARGV[4])
local emission_interval = period / rate
local increment = emission_interval * cost
local burst_offset = emission_interval * burst
local jan_1_2017 = 1483228800
local now = redis.call("TIME")
now = (now[1] - jan_1_2017) + (now[2] / 1000000)
local tat = redis.call("GET", rate_limit_key)
if not tat then
  tat = now
else
  tat = tonumber(tat)
end
tat = math.max(tat, now)
local new_tat = tat + increment
local allow_at = new_tat - burst_offset
local diff = now - allow_at
local remaining = math.floor(diff / emission_interval + 0.5)
if remaining >= 0 then
  local reset_after = new_tat - now
  redis.call("SET", rate_limit_key, new_tat, "EX", math.ceil(reset_after))
  local retry_after = -1
  return {cost, remaining, tostring(retry_after), tostring(reset_after)}
end
remaining = 0
local reset_after = tat - now
local retry_after = diff * -1
return {0, remaining, tostring(retry_after), tostring(reset_after)}
