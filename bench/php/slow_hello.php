<?php
// php-uncached and php-cached: 20 ms of "work" (about 50 requests per second
// per php-fpm child), then a "hello" that caches may keep for an hour: longer
// than a whole bench run, so that no entry expires inside a measured run.
usleep(20000);
header('Cache-Control: max-age=3600');
header('Content-Type: text/plain');
echo "hello\n";
