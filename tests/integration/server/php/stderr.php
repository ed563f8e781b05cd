<?php
// error_log() with no error_log ini setting goes to the SAPI logger, which
// php-fpm sends to the web server as FCGI_STDERR ("PHP message: ...").
$message = $_GET['msg'] ?? 'tern-stderr-test';
error_log($message);
header('Content-Type: text/plain');
echo "logged\n";
