<?php
// Response headers and status set from PHP:
//   ?code=N        http_response_code(N) (default 201)
//   ?location=URL  a Location header (PHP makes it a 302 unless code is given)
//   ?cookie=VALUE  Set-Cookie: tern_test=VALUE
//   ?custom=TEXT   the value of X-Custom (default "from-php")
header('X-Custom: ' . ($_GET['custom'] ?? 'from-php'));
header('X-Multi: one', false);
header('X-Multi: two', false);
header('Content-Type: text/plain; charset=utf-8');
if (isset($_GET['cookie'])) {
    setcookie('tern_test', $_GET['cookie']);
}
if (isset($_GET['location'])) {
    header('Location: ' . $_GET['location']);
    if (isset($_GET['code'])) {
        http_response_code((int) $_GET['code']);
    }
} else {
    http_response_code(isset($_GET['code']) ? (int) $_GET['code'] : 201);
}
echo "headers set\n";
