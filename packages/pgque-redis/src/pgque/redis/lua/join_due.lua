-- join_due. ARGV: now, limit. Moves up to limit of the queue's due scheduled messages into
-- their groups, in (due time, id) order (as a claim does first), and returns how many moved.
-- stats and groups call it until it moves fewer than limit, so a large backlog of due messages
-- is moved by many short scripts rather than by one that holds Redis.
-- needs: clock, store, enqueue
check_layout()
local now = clock(ARGV[1])
return join_due(now, tonumber(ARGV[2]))
