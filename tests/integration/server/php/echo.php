<?php
// What the request looked like to PHP, as JSON: every $_SERVER entry (the
// FastCGI params, plus php-fpm's environment since clear_env = no), the
// parsed query, form and cookies, the request headers and the raw body.
header('Content-Type: application/json');
echo json_encode([
    'server' => $_SERVER,
    'get' => $_GET,
    'post' => $_POST,
    'cookie' => $_COOKIE,
    'headers' => getallheaders(),
    'body' => file_get_contents('php://input'),
], JSON_INVALID_UTF8_SUBSTITUTE | JSON_UNESCAPED_SLASHES | JSON_PRETTY_PRINT), "\n";
