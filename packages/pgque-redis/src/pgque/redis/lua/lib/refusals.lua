-- refusals: how a script stops with an error the client raises as a typed one, and the
-- refusal every script on a queue's keys makes before anything else (it follows keys.lua).

-- Stop the script with a refusal the client turns into a typed error (pgque/redis/_errors.py,
-- script_refusal): "pgque: <kind>: <message>", kind one of "slot moving", "key layout", "bad
-- input". Raised as a plain string at level 0 (no position prefix): Redis 7 passes it through,
-- and Redis 6.2's error handler, which cannot take the table of redis.error_reply, wraps it in
-- "Error running script (...): @user_script:N: " before it; the client finds the text in both.
local function refuse(kind, message)
  error('pgque: ' .. kind .. ': ' .. message, 0)
end

-- Refuse (before any write) to serve a queue this node does not hold: the caller wrote to it
-- before, so its meta key must exist. It is missing when the queue's slot moved without its
-- keys (a half-done reshard), or its data was lost (a failover to a replica that had not got
-- it yet, a flush). The message starts with "pgque: slot moving" (the transports raise
-- QueueMoving for it).
if KNOWN and redis.call('EXISTS', META) == 0 then
  refuse('slot moving', 'the queue at ' .. P .. ' has no meta key '
    .. 'on this node, though it was written to before: its slot is moving or its data was '
    .. 'lost; nothing was changed')
end
