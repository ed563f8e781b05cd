-- wrk script: a site's many files, asked for at random. Each request is a
-- GET of /files/fNNNNN.html, NNNNN uniform in 0..COUNT-1 (default 10,000),
-- from a fixed seed so that every server gets the same sequence:
--   wrk -t1 -c100 -d10s -s bench/files.lua http://127.0.0.1:8080/ -- 10000

local count

init = function(args)
   count = tonumber(args[1]) or 10000
   math.randomseed(20261124)
end

request = function()
   return wrk.format(nil, string.format("/files/f%05d.html", math.random(0, count - 1)))
end
