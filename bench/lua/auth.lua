-- wrk script for the webapp's endpoints.  Arguments after `--`, as key=value:
--   expect=STR    a response passes only with status 200 and STR in its body
--   reject=STR    ... and without STR in its body
--   nocookie=1    ... and without a Set-Cookie header (a session read inside the update age)
--   cookie=NAME   send NAME=<token> on every request, the token given by:
--   token=VALUE   one fixed token, or
--   kind=K n=N    seeded tokens bench-K-<i> for i in 0..N-1 (bench/seed.py), in turn, each
--                 thread taking every `stride`-th one from its own start
--   extra=C=V     another cookie sent with it, as a browser holds them (the CSRF cookie)
--   stride=T      the number of wrk threads (-t)
--   method=M      the request method (default GET)
--   body=FORM     a form body; "%d" in it becomes a per-request number, so that each
--                 POST signin/email names a new address
-- At the end it prints "body-check: good=G bad=B" and, when the server adds them
-- (SQL_COUNT_HEADERS=true), "sql: requests=R statements=S writes=W".
local threads = {}
local next_id = 0

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

function init(args)
  opts = {}
  for _, a in ipairs(args) do
    local k, v = a:match("^([%w_]+)=(.*)$")
    if k then opts[k] = v end
  end
  good, bad, counted, statements, writes = 0, 0, 0, 0, 0
  expect, reject = opts.expect, opts.reject
  nocookie = opts.nocookie == "1"
  n = tonumber(opts.n or "0")
  stride = tonumber(opts.stride or "1")
  i = id
  others = opts.extra and ("; " .. opts.extra) or ""
  if opts.cookie and opts.token then
    wrk.headers["Cookie"] = opts.cookie .. "=" .. opts.token .. others
  end
  if opts.method then wrk.method = opts.method end
  if opts.body then wrk.headers["Content-Type"] = "application/x-www-form-urlencoded" end
  -- Requests that never change are formatted once.
  fixed = wrk.format()
end

function request()
  if n > 0 then
    local t = string.format("bench-%s-%032d", opts.kind, i % n)
    i = i + stride
    wrk.headers["Cookie"] = opts.cookie .. "=" .. t .. others
    return wrk.format()
  end
  if opts.body then
    i = i + stride
    return wrk.format(nil, nil, nil, string.format(opts.body, i))
  end
  return fixed
end

local function header(headers, name)
  return headers[name] or headers[string.lower(name)]
end

function response(status, headers, body)
  local ok = status == 200
    and (expect == nil or string.find(body, expect, 1, true) ~= nil)
    and (reject == nil or string.find(body, reject, 1, true) == nil)
    and not (nocookie and header(headers, "Set-Cookie"))
  if ok then good = good + 1 else bad = bad + 1 end
  local s = header(headers, "X-SQL-Statements")
  if s then
    counted = counted + 1
    statements = statements + tonumber(s)
    writes = writes + tonumber(header(headers, "X-SQL-Writes") or "0")
  end
end

function done(summary, latency, requests)
  local g, b, c, s, w = 0, 0, 0, 0, 0
  for _, t in ipairs(threads) do
    g, b = g + t:get("good"), b + t:get("bad")
    c, s, w = c + t:get("counted"), s + t:get("statements"), w + t:get("writes")
  end
  io.write(string.format("body-check: good=%d bad=%d\n", g, b))
  if c > 0 then io.write(string.format("sql: requests=%d statements=%d writes=%d\n", c, s, w)) end
end
