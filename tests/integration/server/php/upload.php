<?php
// Reads the request body from php://input in 64 KiB pieces and answers its
// length and sha256 as JSON, with the CONTENT_LENGTH and CONTENT_TYPE params.
header('Content-Type: application/json');
$in = fopen('php://input', 'rb');
$hash = hash_init('sha256');
$length = 0;
while (!feof($in)) {
    $piece = fread($in, 65536);
    if ($piece === false || $piece === '') {
        break;
    }
    $length += strlen($piece);
    hash_update($hash, $piece);
}
fclose($in);
echo json_encode([
    'length' => $length,
    'sha256' => hash_final($hash),
    'content_length' => $_SERVER['CONTENT_LENGTH'] ?? null,
    'content_type' => $_SERVER['CONTENT_TYPE'] ?? null,
    'method' => $_SERVER['REQUEST_METHOD'],
]), "\n";
