<?php
// Fields that belong to the hop between PHP and the server, not to the
// response: Transfer-Encoding, Connection, directives to the server
// (X-Accel-*, X-Sendfile; X-Accel-Redirect is honoured, see test_sites.py).
// Cacheable, with a fresh token, for the response cache.
header('Cache-Control: public, max-age=60');
header('Transfer-Encoding: chunked');
header('Connection: close');
header('X-Accel-Limit-Rate: 1');
header('X-Accel-Buffering: yes');
header('X-Sendfile: /etc/passwd');
header('X-Kept: yes');
header('Content-Type: text/plain');
echo 'token ' . bin2hex(random_bytes(8)) . "\n";
