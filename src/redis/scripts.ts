/**
 * Lua scripts, registered with ioredis `defineCommand` (sent once, then run by their SHA). Keys
 * and values are parameters (KEYS, ARGV), never spliced into the script text.
 */

/**
 * Applies one batch of one agent's records, once: a resend of the same batch (same id) is a
 * no-op. KEYS: the batch-id key, the bucket hashes, then (only if ARGV carries ring values) the
 * LLM ring hash. ARGV: id ttl ms, number of bucket hashes; per hash: its ttl ms, its number of
 * fields, then field, delta, ...; then (ring) size, ttl ms, scope, value, ... The ring keeps the
 * last N outcomes in one hash: `scope|n` counts pushes, `scope|<slot>` holds a value. Returns 1
 * when applied, 0 when the batch had been applied before. All or nothing: Redis does not undo a
 * script's writes when it fails halfway, so a key of another type (a name clash) is refused before
 * anything is written, the id included, and a resend applies the whole batch once it is cleared.
 */
export const APPLY = `
for k = 2, #KEYS do
  local t = redis.call('TYPE', KEYS[k]).ok
  if t ~= 'hash' and t ~= 'none' then
    return redis.error_reply('WRONGTYPE ' .. KEYS[k] .. ' holds a ' .. t .. ', not a hash: batch not applied')
  end
end
if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then return 0 end
local hashes = tonumber(ARGV[2])
local a = 3
for k = 2, hashes + 1 do
  local ttl, fields = ARGV[a], tonumber(ARGV[a + 1])
  a = a + 2
  for _ = 1, fields do
    redis.call('HINCRBY', KEYS[k], ARGV[a], ARGV[a + 1])
    a = a + 2
  end
  redis.call('PEXPIRE', KEYS[k], ttl)
end
if #KEYS > hashes + 1 then
  local ring = KEYS[hashes + 2]
  local size = tonumber(ARGV[a])
  for i = a + 2, #ARGV, 2 do
    local n = redis.call('HINCRBY', ring, ARGV[i] .. '|n', 1)
    redis.call('HSET', ring, ARGV[i] .. '|' .. ((n - 1) % size), ARGV[i + 1])
  end
  redis.call('PEXPIRE', ring, ARGV[a + 1])
end
return 1
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

/**
 * The fleet's epoch (when Redis last started without the fleet's state, server time ms), made if
 * missing, as a Lua function `epoch(key, knew, now)`. A worker that knew the fleet (`knew` '1':
 * it saw the epoch on an earlier round trip) and finds none sees the fleet's state lost (a
 * restart without persistence, a flush, an eviction): the epoch starts now, and with it the
 * restart grace. One that never knew the fleet cannot tell a new fleet from a lost one by itself:
 * the epoch is when this Redis started (INFO's whole-second uptime, taken as short as it may be),
 * so a Redis up longer than the grace (a new fleet on a running server) grants claims at once,
 * while one that started moments ago (it may have restarted, the old workers still on their way
 * back) keeps the grace. Redis without INFO in scripts: now, as before.
 */
const EPOCH_FUNCTION = `
local function epoch(key, knew, now)
  local born = tonumber(redis.call('GET', key) or '')
  if born then return born end
  born = now
  if knew ~= '1' then
    local ok, info = pcall(redis.call, 'INFO', 'server')
    local up = ok and type(info) == 'string' and tonumber(string.match(info, 'uptime_in_seconds:(%d+)'))
    if up then born = now - math.max(0, up - 1) * 1000 end
  end
  redis.call('SET', key, string.format('%.0f', born))
  return born
end
local function servertime()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`;

/**
 * Claims a keyed write for one call. KEYS: the stored result, the in-flight marker, the fleet's
 * epoch (see EPOCH_FUNCTION). ARGV: the call's claim id, its lease ms (its deadline), how long the
 * marker is kept ms, strict (1/0), the grace ms after an epoch starts, whether this worker knew
 * the fleet (1/0). The marker holds `claim id|lease end` (server time, ms), so a claimer tells a
 * sender still within its deadline (`busy`) from one that went silent past it: a strict claim
 * hears `lost` (the write may have gone out: never sent again), a lenient one takes the key.
 * During the grace after Redis came back without the fleet's state no new claim is granted
 * (`settle`): the workers are putting back the claims and results they hold. Returns
 * {kind, detail}.
 */
export const LEDGER_CLAIM = `${EPOCH_FUNCTION}
local now = servertime()
local born = epoch(KEYS[3], ARGV[6], now)
local done = redis.call('GET', KEYS[1])
if done then return {'done', done} end
local held = redis.call('GET', KEYS[2])
if held then
  local bar = string.find(held, '|', 1, true)
  local owner = bar and string.sub(held, 1, bar - 1) or held
  local lease = bar and tonumber(string.sub(held, bar + 1)) or 0
  if owner == ARGV[1] then return {'mine', string.format('%.0f', lease)} end
  if lease > now then return {'busy', string.format('%.0f', lease - now)} end
  if ARGV[4] == '1' then return {'lost', ''} end
else
  local grace = tonumber(ARGV[5])
  if now - born < grace then return {'settle', string.format('%.0f', born + grace - now)} end
end
local lease = now + tonumber(ARGV[2])
local value = ARGV[1] .. '|' .. string.format('%.0f', lease)
redis.call('SET', KEYS[2], value, 'PX', math.max(tonumber(ARGV[2]), tonumber(ARGV[3])))
return {'mine', string.format('%.0f', lease)}
`;

/**
 * A keyed write succeeded: its result is kept (the first one stored stays), and the call's
 * marker is let go if it still holds it. KEYS: the result, the marker; ARGV: the result's text,
 * its ttl ms, the claim id ('' for a write decided without the fleet).
 */
export const LEDGER_COMPLETE = `
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX')
if ARGV[3] ~= '' then
  local held = redis.call('GET', KEYS[2])
  if held and string.sub(held, 1, #ARGV[3] + 1) == ARGV[3] .. '|' then redis.call('DEL', KEYS[2]) end
end
return 0
`;

/** Frees an in-flight marker only if this call holds it. KEYS: the marker; ARGV: the claim id. */
export const LEDGER_RELEASE = `
local held = redis.call('GET', KEYS[1])
if held and string.sub(held, 1, #ARGV[1] + 1) == ARGV[1] .. '|' then redis.call('DEL', KEYS[1]) end
return 0
`;

/**
 * Puts back a breaker verdict after an outage, unless Redis holds one reached later: then
 * publishes it (and, for an open one, holds the probe lease for the open time left). KEYS: the
 * verdict, the lease; ARGV: the verdict (JSON), its time, lease ms (0: none), the lease holder,
 * the channel, the message, the verdict's ttl ms. Returns 1 when it was put back.
 */
export const VERDICT_RESYNC = `
local stored = redis.call('GET', KEYS[1])
if stored then
  local ok, v = pcall(cjson.decode, stored)
  if ok and type(v) == 'table' and tonumber(v.at) and tonumber(v.at) >= tonumber(ARGV[2]) then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[7])
if tonumber(ARGV[3]) > 0 then redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[3]) end
redis.call('PUBLISH', ARGV[5], ARGV[6])
return 1
`;

/**
 * Starts the fleet's epoch if Redis has none (see EPOCH_FUNCTION). KEYS: the epoch key; ARGV:
 * whether this worker knew the fleet (1/0).
 */
export const EPOCH = `${EPOCH_FUNCTION}
epoch(KEYS[1], ARGV[1], servertime())
return 0
`;
