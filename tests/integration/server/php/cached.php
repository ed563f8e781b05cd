<?php
// Cacheable: Cache-Control max-age (?max_age=N, default 60) and a body with a
// fresh random token, so a cached copy is told from a new one by its body.
// ?cookie=1 adds a Set-Cookie (such a response must never be cached);
// ?nocc=1 leaves Cache-Control out. ?etag=V sends ETag "V", and a request
// whose If-None-Match is "V" gets 304 (a cache revalidating its entry).
if (!isset($_GET['nocc'])) {
    header('Cache-Control: public, max-age=' . (int) ($_GET['max_age'] ?? 60));
}
if (isset($_GET['cookie'])) {
    setcookie('tern_test', 'c' . mt_rand());
}
if (isset($_GET['etag'])) {
    $etag = '"' . $_GET['etag'] . '"';
    header('ETag: ' . $etag);
    if (($_SERVER['HTTP_IF_NONE_MATCH'] ?? '') === $etag) {
        http_response_code(304);
        exit;
    }
}
header('Content-Type: application/json');
echo json_encode([
    'token' => bin2hex(random_bytes(8)),
    'time' => microtime(true),
    'uri' => $_SERVER['REQUEST_URI'],
    'method' => $_SERVER['REQUEST_METHOD'],
]), "\n";
