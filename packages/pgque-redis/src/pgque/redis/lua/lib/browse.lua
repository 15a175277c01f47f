-- browse: a message as messages() and message(id) show it (pgque.core.browse): its event's id
-- and kind, and a preview of its data cut in the script, so a page never carries a payload.

-- How many characters of the data's JSON text a preview keeps (pgque.core.browse.PREVIEW_CHARS).
local PREVIEW_CHARS = 200

-- The index of the quote that closes the JSON string opening at i of s, or nil.
local function string_end(s, i)
  local j = i + 1
  while true do
    local at = string.find(s, '["\\]', j)
    if not at then return nil end
    if string.byte(s, at) == 34 then return at end
    j = at + 2
  end
end

-- A JSON string literal's text (cjson only for one with escapes).
local function literal(text)
  if not string.find(text, '\\', 1, true) then return string.sub(text, 2, -2) end
  local ok, value = pcall(cjson.decode, text)
  if ok and type(value) == 'string' then return value end
  return nil
end

-- The event id, the kind and where the data's JSON text starts in body, when body has the
-- shape Event.to_json writes ({"id":"...","kind":"...","data":...); else nil (the client
-- then reads the body itself).
local function event_parts(body)
  if string.sub(body, 1, 7) ~= '{"id":"' then return nil end
  local id_end = string_end(body, 7)
  if not id_end or string.sub(body, id_end + 1, id_end + 9) ~= ',"kind":"' then return nil end
  local kind_end = string_end(body, id_end + 9)
  if not kind_end or string.sub(body, kind_end + 1, kind_end + 8) ~= ',"data":' then
    return nil
  end
  local id = literal(string.sub(body, 7, id_end))
  local kind = literal(string.sub(body, id_end + 9, kind_end))
  if not id or not kind then return nil end
  return id, kind, kind_end + 9
end

-- The first PREVIEW_CHARS characters (code points, as Python counts them) of the JSON value
-- that starts at byte from of s, and whether the value is longer. The walk follows strings and
-- brackets only as far as the preview goes (a multi-byte character holds no ASCII byte).
local function preview(s, from)
  local n = #s
  local first = string.byte(s, from)
  local scalar = first ~= 123 and first ~= 91 and first ~= 34  -- not {, [ or "
  local depth, in_string, escaped = 0, false, false
  local chars, i = 0, from
  while i <= n do
    local b = string.byte(s, i)
    -- a number, true, false or null ends at the delimiter after it
    if scalar and (b == 44 or b == 125 or b == 93) then break end
    if chars == PREVIEW_CHARS then return string.sub(s, from, i - 1), true end
    chars = chars + 1
    local width = 1
    if b >= 240 then width = 4 elseif b >= 224 then width = 3 elseif b >= 192 then width = 2 end
    i = i + width
    if in_string then
      if escaped then
        escaped = false
      elseif b == 92 then
        escaped = true
      elseif b == 34 then
        in_string = false
        if depth == 0 then break end
      end
    elseif b == 34 then
      in_string = true
    elseif b == 123 or b == 91 then
      depth = depth + 1
    elseif b == 125 or b == 93 then
      depth = depth - 1
      if depth == 0 then break end
    end
  end
  return string.sub(s, from, i - 1), false
end

-- The head of gid (its first message by place), remembered per script call.
local browse_heads = {}
local function head_of(gid)
  local head = browse_heads[gid]
  if head == nil then
    head = redis.call('ZRANGE', qkey(gid), 0, 0)[1] or false
    browse_heads[gid] = head
  end
  return head
end

-- Append to out the 12 strings of message id in gid (body its stored event): id, group id,
-- enqueue time, is head ("1"/"0"), attempts, size in bytes, due time ("" when in its group),
-- then either "p", event id, kind, preview, truncated ("1"/"0"), or "b" and the whole body
-- (an event of another shape, which the client reads), "", "".
local function browse_item(out, id, gid, body, enqueued, is_head, attempts, due)
  out[#out + 1] = id
  out[#out + 1] = gid
  out[#out + 1] = enqueued
  out[#out + 1] = is_head and '1' or '0'
  out[#out + 1] = attempts
  out[#out + 1] = tostring(#body)
  out[#out + 1] = due
  local event_id, kind, from = event_parts(body)
  if event_id then
    local text, cut = preview(body, from)
    out[#out + 1] = 'p'
    out[#out + 1] = event_id
    out[#out + 1] = kind
    out[#out + 1] = text
    out[#out + 1] = cut and '1' or '0'
  else
    out[#out + 1] = 'b'
    out[#out + 1] = body
    out[#out + 1] = ''
    out[#out + 1] = ''
    out[#out + 1] = ''
  end
end

-- browse_item for message id of gid as it waits (or is leased) in its group; false when it is
-- not in gid (any more).
local function group_item(out, id, gid, body)
  body = body or redis.call('HGET', MSG, id)
  if not body or not redis.call('ZSCORE', qkey(gid), id) then return false end
  browse_item(out, id, gid, body, redis.call('ZSCORE', ENQ, id) or '0', head_of(gid) == id,
    redis.call('HGET', ATT, id) or '0', '')
  return true
end
