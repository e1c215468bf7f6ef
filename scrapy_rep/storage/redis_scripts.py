"""The Lua scripts of the Redis store: each lease step is one atomic script.

A lease key that is not a string (another program's key, a damaged data set) is
deleted before use: it is nobody's lease. ``PTTL`` is read on the server's clock, so
comparing it needs no agreement between the machines' clocks.
"""

from __future__ import annotations

_CLEAN_WRONG_TYPE = """
local kind = redis.call('type', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'string' then redis.call('del', KEYS[1]) end
"""

#: ARGV: holder, ttl ms, "absurd" ms. Returns {1, ""} when taken (free, expired, ours,
#: or broken: no TTL or more TTL than a renewal gives), else {0, current holder}.
ACQUIRE = (
    _CLEAN_WRONG_TYPE
    + """
local current = redis.call('get', KEYS[1])
if current then
    local left = redis.call('pttl', KEYS[1])
    if current ~= ARGV[1] and left >= 0 and left <= tonumber(ARGV[3]) then
        return {0, current}
    end
end
redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, ''}
"""
)

#: ARGV: holder, ttl ms. Extends our own lease only (never takes a free one).
RENEW = """
if redis.call('type', KEYS[1])['ok'] == 'string' and redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""

#: ARGV: the dead holder we saw, the new holder, ttl ms: compare and swap.
TAKEOVER = (
    _CLEAN_WRONG_TYPE
    + """
if redis.call('get', KEYS[1]) == ARGV[1] then
    redis.call('set', KEYS[1], ARGV[2], 'PX', ARGV[3])
    return 1
end
return 0
"""
)

#: ARGV: holder. Releases only a lease we still hold.
RELEASE = """
if redis.call('type', KEYS[1])['ok'] == 'string' and redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
"""

#: The current holder, or false (no lease, or a key that is not a lease).
HOLDER = """
if redis.call('type', KEYS[1])['ok'] ~= 'string' then return false end
return redis.call('get', KEYS[1])
"""

SCRIPTS = {
    "acquire": ACQUIRE,
    "renew": RENEW,
    "takeover": TAKEOVER,
    "release": RELEASE,
    "holder": HOLDER,
}
