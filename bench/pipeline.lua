-- wrk script: pipelined requests, as in wrk's scripts/pipeline.lua.
-- Every write carries DEPTH requests for the URL's path (default 16):
--   wrk -t1 -c100 -d10s -s bench/pipeline.lua http://127.0.0.1:8080/1k.html -- 16
-- wrk counts each response, so Requests/sec is responses per second.

local req

init = function(args)
   local depth = tonumber(args[1]) or 16
   local r = {}
   for i = 1, depth do
      r[i] = wrk.format()   -- GET of the URL's path, with its Host header
   end
   req = table.concat(r)
end

request = function()
   return req
end
