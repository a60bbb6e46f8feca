-- Twin of token_bucket.c: the same 57-byte state ('B', whole tokens, the
-- fraction in units of 1/period token, the last refill in µs, then the
-- parameters it was written under: limit, period, burst, version), the same
-- decisions: a request is decided at max(now, last refill), `ahead` µs
-- after now. The level (units of 1/period token) runs from -full (a
-- penalty's debt) to full: lua_bucket.lua (appended at build time, the
-- engine both bucket twins run on, as token_bucket.c runs on bucket.c)
-- reads, decides and writes it under the name and tag given here.
local TAG, NAME = 'B', 'token_bucket'
local BAD = 'ECORRUPT token_bucket state in the store is malformed'
