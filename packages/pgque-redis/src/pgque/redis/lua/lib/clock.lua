-- clock: the script's "now", and times written as text.

-- Lua's tostring keeps only 14 significant digits; times need all 17 to round-trip exactly.
local function fmt(x) return string.format('%.17g', x) end

-- The script's "now" from its argument: the caller's time (epoch seconds; an injected clock),
-- or the server's clock (TIME) when it is "".
-- The last "now" clock() returned (nil before its first call): ready_add compares scores
-- with it (lib/fairness.lua).
local script_now = nil
local function clock(arg)
  if arg ~= nil and arg ~= '' then
    script_now = tonumber(arg)
  else
    local t = redis.call('TIME')
    script_now = tonumber(t[1]) + tonumber(t[2]) / 1000000
  end
  return script_now
end
