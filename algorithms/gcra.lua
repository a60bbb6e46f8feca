-- Twin of gcra.c: the same 57-byte state ('H', TAT in µs + remainder in
-- ticks of 1/limit µs, NEWEST in µs, then the parameters it was written
-- under: limit, period, burst, version), the same decisions: `now` is
-- taken as max(now, NEWEST), ahead of now by `ahead` µs. The debt
-- TAT - max(now, NEWEST) in ticks is what is used in units of 1/period
-- token under any limit: lua_bucket.lua (appended at build time, the
-- engine both bucket twins run on, as gcra.c runs on bucket.c) reads,
-- decides and writes it under the name and tag given here.
local TAG, NAME = 'H', 'gcra'
local BAD = 'ECORRUPT gcra state in the store is malformed'
