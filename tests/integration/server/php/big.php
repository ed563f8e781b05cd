<?php
// A generated response of ?bytes=N (or ?mib=N) bytes, flushed every 64 KiB,
// without a Content-Length (?cl=1 sends one). The body is 64-byte lines:
// sprintf("%07d ", line number from 0) . FILL . "\n", the last one cut short
// at N bytes, so a client can check every byte.
header('Content-Type: application/octet-stream');
const FILL = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ012';
$total = isset($_GET['bytes']) ? (int) $_GET['bytes'] : (int) ($_GET['mib'] ?? 1) * 1048576;
if (isset($_GET['cl'])) {
    header('Content-Length: ' . $total);
}
$line = 0;
$sent = 0;
while ($sent < $total) {
    $chunk = '';
    for ($i = 0; $i < 1024; $i++) {
        $chunk .= sprintf("%07d ", $line++) . FILL . "\n";
    }
    if ($sent + strlen($chunk) > $total) {
        $chunk = substr($chunk, 0, $total - $sent);
    }
    echo $chunk;
    $sent += strlen($chunk);
    flush();
}
