-- keys: what every script on a queue's keys receives, and the keys it finds under the queue's
-- prefix. Every such script starts with this library (see pgque/redis/_scripts.py).
--
-- KEYS[1] is the queue's meta key, "{pgque:<queue>}:meta" (the prefix P, "{pgque:<queue>}:",
-- followed by "meta"); KEYS[2] its fence, P.."fence", a key that never exists. Every key a
-- script touches starts with P, so all of them hash to the one Redis Cluster slot of the
-- queue's hash tag. Both are declared so that Redis Cluster routes and guards the script:
-- while the queue's slot migrates, a node refuses (TRYAGAIN) a script whose declared keys it
-- holds only in part, and the fence is always missing; so no script runs on either node until
-- the slot is stable again, and a queue is never served half here, half there.
-- ARGV[1] is consumed here (removed, so each operation's ARGV starts at "now"): flags, "k" when
-- the caller knows this queue exists (it wrote to it before: the meta key must be here), "s"
-- to announce wake-ups on the sharded channel (SPUBLISH, Redis 7; Redis Cluster).
-- Then ARGV[1] is "now" as epoch seconds, or "" to read the server's clock (TIME).
--
-- Key layout 5 under the prefix P. Layout 1 kept a group's messages in a list; 2 is the keys
-- below up to P.."heads" without those of scheduled messages and ticks, without the fairness
-- keys' (P.."k...") and without P.."rl" and P.."rp"; 3 is 2 with scheduled messages and
-- ticks; 4 adds the fairness keys' indexes, which a pgque of layout 2 or 3 would not keep (it
-- refuses layout 4); 5 adds P.."rl" and P.."rp", which a pgque of layout 4 would not keep (it
-- refuses layout 5). This pgque indexes a queue of layout 2, 3 or 4 once, on its first call
-- (see check_layout):
--   P.."layout"       string "5": the layout of the data now in the queue
--   P.."seq"          INCR counter of message ids
--   P.."dseq"         INCR counter of dead-letter ids
--   P.."msg"          hash  message id -> event JSON
--   P.."att"          hash  message id -> deliveries that counted (absent = 0)
--   P.."err"          hash  message id -> its last recorded error (ErrorInfo JSON)
--   P.."enq"          zset  message id, scored by enqueue time (oldest_age_s)
--   P.."mg"           zset  "<id>:<group id>" for every message in a group, scored by the id:
--                           message(id) finds its group, messages() walks the queue in id
--                           order (not a layout of its own: see lib/messages.lua)
--   P.."q:"..gid      zset  the group's message ids, each scored by its place (see below): the
--                           lowest place is the head, and a redriven id goes back into its place
--   P.."g:"..gid      hash  prio; fk (its fairness key; absent: the default key ""); token, mid (the leased message id), holder and ls (its start) while a lease
--                           is out; blocked / paused ("1" while so); at (the group's ready-set
--                           score, kept so a lost entry can be put back)
--   P.."groups"       zset  every group id, score 0 (byte order, for groups())
--   P.."r"..prio      zset  ready set of tier prio: member gid, score COALESCE(until, 0)
--   P.."rl"           zset  the groups of a ready set that hold a lease (a token), each with
--                           its ready-set score (the lease's expiry): those above now are in
--                           flight (stats counts them by ZCOUNT)
--   P.."rp"           zset  the groups of a ready set without a lease whose score lay after
--                           the writer's now (a nack's delay), with that score: those above now
--                           are parked (stats); an entry whose time passed stays until the
--                           group's ready entry changes or goes
--   P.."blocked"      zset  blocked groups that are not paused, score 0
--   P.."paused"       zset  paused groups, score 0
--   P.."dead"         zset  dead-letter ids scored by themselves (id order)
--   P.."d:"..did      hash  one dead letter: g, m, b, p, a, r, t, e (its error) if any, s
--                           (its place in its group, when that was not its id), and k (its
--                           group's fairness key, if any), q (its message's enqueue time)
--   P.."sched"        zset  scheduled (delayed) message keys, scored by due time
--   P.."sids"         zset  the same keys, scored by message id (scheduled() pages by id)
--   P.."sq:"..gid     zset  the group's scheduled keys, scored by due time
--   P.."s:"..key      hash  one scheduled message: g (group), p (priority), b (event JSON),
--                           t (publish time), d (due time), k (its fairness key, if any)
--   P.."ticks"        hash  schedule entry -> its last published tick (publish_tick)
--   P.."heads"        zset  every group holding a message, scored by its head's enqueue time
--                           (oldest_groups); P.."heads:ok" is "1" once it lists every such
--                           group (a queue written before it existed is indexed by
--                           oldest_groups itself, P.."heads:at" its cursor meanwhile)
-- The fairness keys (lib/fairness.lua; fk is a key, "" the default key):
--   P.."kr:"..fk      zset  the key's groups in a ready set, each with its ready-set score (a
--                           copy of the tier's entry: claims walk a key's groups here)
--   P.."kg:"..fk      zset  the key's groups (every group hash with fk), score 0
--   P.."kl:"..fk      zset  the key's leased groups, scored by lease expiry: those above now
--                           are its in-flight groups (an expired lease frees its slot itself)
--   P.."kq"           zset  keys with groups in P.."kr:"..fk, scored by the finish tag of their
--                           last claim (claim order; a key whose ready set empties leaves)
--   P.."kf"           hash  key -> its finish tag while it is not in P.."kq" (idle)
--   P.."kv"           string the virtual clock of the fair share
--   P.."kb"           hash  key -> its token bucket, "<tokens> <at>" (keys under a rate)
--   P.."kp"           hash  key -> its policy "<weight> <cap> <rate> <per> <burst>" ("-" for
--                           none); the field "\0" (never a key) holds the default policy
--   P.."kall"         zset  keys with a group or a policy of their own, score 0 (keys() pages
--                           it by byte order)
-- The live workers (heartbeat.lua, goodbye.lua, workers.lua; docs/workers.md):
--   P.."w:"..id       hash  one worker: holder, host, pid, version, conc, every, slots (JSON),
--                           start and last (its first and last heartbeat)
--   P.."workers"      zset  worker ids, scored by their last heartbeat (the prune's order)
--   P.."meta"         string, written by the first write (publish, pause, ...) and kept by
--                           purge: a node without it does not hold the queue (see KEYS above);
--                           its value is the queue's store identity (see touch_meta)
--   P.."hist", P.."hlog", P.."hm:"..hour: the job history's setting, records and message
--                           index (see lib/history.lua)
--   P.."dd", P.."dd:"..key, P.."ddfloor", P.."pk:slots": pgque.partition's dedup windows and
--                           slot count (see partition/publish_dedup.lua and partition/purge.lua)
-- A scheduled message's key is its id left-padded with zeros to 16 digits, so that keys of
-- equal due time sort by id. At its due time it joins its group's tail: it keeps its id, and
-- its score in P.."q:"..gid is a fresh number of P.."seq" (a place after every message
-- published before it joined, before every one published after), so a group's scores are
-- places, the id for every message that never waited.
-- and the pub/sub channel P.."wake" (sharded on a cluster: it hashes to the queue's slot): a
-- message there tells idle workers to claim now.
--
-- A group exists while its hash does; it is then in P.."groups" and in exactly one of its
-- tier's ready set (it has messages, neither blocked nor paused), P.."blocked" or P.."paused".
-- A group without messages exists only while paused.
local META = KEYS[1]
local P = string.sub(META, 1, #META - #'meta')
local FLAGS = table.remove(ARGV, 1) or ''
local KNOWN = string.find(FLAGS, 'k', 1, true) ~= nil
local SHARDED = string.find(FLAGS, 's', 1, true) ~= nil
local SEQ = P .. 'seq'
local DSEQ = P .. 'dseq'
local MSG = P .. 'msg'
local ATT = P .. 'att'
local ERR = P .. 'err'
local ENQ = P .. 'enq'
local MG = P .. 'mg'
local GROUPS = P .. 'groups'
local BLOCKED = P .. 'blocked'
local PAUSED = P .. 'paused'
local DEAD = P .. 'dead'
local LEASED = P .. 'rl'
local WAITING = P .. 'rp'
local WAKE = P .. 'wake'
local LAYOUT_KEY = P .. 'layout'
local SCHED = P .. 'sched'
local SIDS = P .. 'sids'
local TICKS = P .. 'ticks'
local HEADS = P .. 'heads'
local HEADS_OK = P .. 'heads:ok'
local HEADS_AT = P .. 'heads:at'
local KQ = P .. 'kq'
local KF = P .. 'kf'
local KV = P .. 'kv'
local KB = P .. 'kb'
local KP = P .. 'kp'
local KALL = P .. 'kall'
local WORKERS = P .. 'workers'
-- The field of P.."kp" holding the default policy (no key holds NUL).
local DEFAULT_POLICY = '\0'

local function gkey(gid) return P .. 'g:' .. gid end
local function qkey(gid) return P .. 'q:' .. gid end
local function rkey(prio) return P .. 'r' .. prio end
local function dkey(did) return P .. 'd:' .. did end
local function skey(key) return P .. 's:' .. key end
local function sqkey(gid) return P .. 'sq:' .. gid end
local function krkey(fk) return P .. 'kr:' .. fk end
local function kgkey(fk) return P .. 'kg:' .. fk end
local function klkey(fk) return P .. 'kl:' .. fk end
local function wkey(id) return P .. 'w:' .. id end
-- A scheduled message's key: its id (a number or its digits), zero-padded to 16 digits; and
-- back (string work: tostring shows only 14 significant digits).
local function sched_key(id) return string.format('%016d', tonumber(id)) end
local function sched_id(key) return (string.gsub(key, '^0+', '')) end
