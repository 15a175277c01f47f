-- messages: a message's records (event, attempts, last error, enqueue time), its place in its
-- group, and its group's entry in the index of heads.
-- needs: clock

-- Keep gid's entry in P.."heads" right after its messages changed: scored by the enqueue
-- time of its head (its first message by place), or gone when it holds none.
local function refresh_head(gid)
  local head = redis.call('ZRANGE', qkey(gid), 0, 0)[1]
  local at = head and redis.call('ZSCORE', ENQ, head)
  if at then
    redis.call('ZADD', HEADS, at, gid)
  else
    redis.call('ZREM', HEADS, gid)
  end
end

-- The index of messages by id, P.."mg": one member "<id>:<group id>" per message in a group,
-- scored by its id, written wherever a message enters a group and removed wherever its
-- records go (forget_message). A message stored by a pgque before this index has no entry:
-- message(id) does not find it and messages() without a group does not list it (docs/redis.md,
-- "Keys"); an entry such a pgque left behind when it settled the message names no message
-- and is skipped.
local function index_message(gid, id)
  redis.call('ZADD', MG, id, id .. ':' .. gid)
end

-- Put message id (with its event) into gid, in its place (its id unless place is given).
local function add_message(gid, id, body, now, place)
  redis.call('ZADD', qkey(gid), place or id, id)
  index_message(gid, id)
  redis.call('HSET', MSG, id, body)
  redis.call('ZADD', ENQ, fmt(now), id)
  redis.call('ZADD', GROUPS, 0, gid)
  refresh_head(gid)
end

-- Delete the records of message id (it left its group).
local function forget_message(id)
  redis.call('HDEL', MSG, id)
  redis.call('HDEL', ATT, id)
  redis.call('HDEL', ERR, id)
  redis.call('ZREM', ENQ, id)
  -- (an element written by hand into a group, no message id, has no entry: only a canonical
  -- id, digits without a leading zero, names one; tonumber would take '007' or '1e3' too)
  if string.match(id, '^[1-9]%d*$') then redis.call('ZREMRANGEBYSCORE', MG, id, id) end
end
