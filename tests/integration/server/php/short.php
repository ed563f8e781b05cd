<?php
// Promises ?promise=N bytes (default 100) and sends ?send=M (default 10).
$promise = (int) ($_GET['promise'] ?? 100);
$send = (int) ($_GET['send'] ?? 10);
header('Content-Type: text/plain');
header('Content-Length: ' . $promise);
echo str_repeat('s', $send);
