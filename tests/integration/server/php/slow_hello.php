<?php
// 20 ms of "work", then a cacheable "hello" (for the cache benchmark).
usleep(20000);
header('Cache-Control: max-age=60');
header('Content-Type: text/plain');
echo "hello\n";
