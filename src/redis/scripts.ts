/**
 * Lua scripts, registered with ioredis `defineCommand` (sent once, then run by their SHA). Keys
 * and values are parameters (KEYS, ARGV), never spliced into the script text.
 */

/** Adds field deltas to one bucket hash and renews its expiry. ARGV: ttl ms, field, delta, ... */
export const ADD = `
for i = 2, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 0
`;

/**
 * Pushes outcomes onto last-N rings kept in one hash: `scope|n` counts pushes, `scope|<slot>`
 * holds a value. ARGV: size, ttl ms, scope, value, ...
 */
export const RING = `
local size = tonumber(ARGV[1])
for i = 3, #ARGV, 2 do
  local n = redis.call('HINCRBY', KEYS[1], ARGV[i] .. '|n', 1)
  redis.call('HSET', KEYS[1], ARGV[i] .. '|' .. ((n - 1) % size), ARGV[i + 1])
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 0
`;

/**
 * Reads an agent's signals in one round trip, summed on the server: KEYS are the call buckets
 * (newest first), the task buckets, then the ring hash; ARGV: number of call buckets, number of
 * them that make the recent window. Returns flat field/value lists: calls, recent calls (ok and
 * failed counts only), tasks, rings.
 */
export const READ = `
local nc = tonumber(ARGV[1])
local recent = tonumber(ARGV[2])
local calls, rec, tasks = {}, {}, {}
for i = 1, nc do
  local flat = redis.call('HGETALL', KEYS[i])
  for j = 1, #flat, 2 do
    local f, v = flat[j], tonumber(flat[j + 1])
    calls[f] = (calls[f] or 0) + v
    if i <= recent and (string.sub(f, -3) == '|ok' or string.sub(f, -2) == '|f') then
      rec[f] = (rec[f] or 0) + v
    end
  end
end
for i = nc + 1, #KEYS - 1 do
  local flat = redis.call('HGETALL', KEYS[i])
  for j = 1, #flat, 2 do
    tasks[flat[j]] = (tasks[flat[j]] or 0) + tonumber(flat[j + 1])
  end
end
local function flatten(t)
  local out = {}
  for k, v in pairs(t) do
    out[#out + 1] = k
    out[#out + 1] = string.format('%d', v)
  end
  return out
end
return { flatten(calls), flatten(rec), flatten(tasks), redis.call('HGETALL', KEYS[#KEYS]) }
`;

/**
 * One alert of a kind per period for the whole fleet. KEYS: the gate, the count of alerts held
 * back; ARGV: period ms. Returns {1, held before} to send, {0, held so far} to hold.
 */
export const GATE = `
if redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then
  local held = tonumber(redis.call('GET', KEYS[2]) or '0')
  redis.call('DEL', KEYS[2])
  return {1, held}
end
local held = redis.call('INCR', KEYS[2])
redis.call('PEXPIRE', KEYS[2], 2 * tonumber(ARGV[1]))
return {0, held}
`;

/**
 * Claims a keyed write for the fleet. KEYS: the stored result, the in-flight marker; ARGV: this
 * worker's id, lease ms. Returns {"done", result} / {"mine"} / {"busy"}.
 */
export const CLAIM = `
local done = redis.call('GET', KEYS[1])
if done then return {'done', done} end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return {'mine'} end
return {'busy'}
`;

/** Frees an in-flight marker only if this worker holds it. KEYS: the marker; ARGV: worker id. */
export const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
`;

/**
 * Pushes one diagnosis (1: UNKNOWN) onto an agent's last-N windows, the tool's and the overall
 * one, and returns both windows' counts. KEYS: the hash; ARGV: size, ttl ms, tool scope, value.
 * A running count of hits per scope (`scope|h`) avoids reading every slot.
 */
export const DRIFT = `
local size = tonumber(ARGV[1])
local function push(scope, v)
  local n = redis.call('HINCRBY', KEYS[1], scope .. '|n', 1)
  local slot = scope .. '|' .. ((n - 1) % size)
  if redis.call('HGET', KEYS[1], slot) == '1' then redis.call('HINCRBY', KEYS[1], scope .. '|h', -1) end
  redis.call('HSET', KEYS[1], slot, v)
  if v == '1' then redis.call('HINCRBY', KEYS[1], scope .. '|h', 1) end
  return {math.min(n, size), tonumber(redis.call('HGET', KEYS[1], scope .. '|h') or '0')}
end
local overall = push('a', ARGV[4])
local tool = push(ARGV[3], ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {overall[1], overall[2], tool[1], tool[2]}
`;
