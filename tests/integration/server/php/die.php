<?php
// Sends ?bytes=N bytes (default 256 KiB) of big.php's pattern, flushes them,
// then SIGKILLs its own php-fpm child: the FastCGI connection closes in the
// middle of the response, without an FCGI_END_REQUEST. ?cl=1 first
// promises a Content-Length of twice what it sends.
header('Content-Type: application/octet-stream');
const FILL = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ012';
$total = (int) ($_GET['bytes'] ?? 262144);
if (isset($_GET['cl'])) {
    header('Content-Length: ' . (2 * $total));
}
$out = '';
for ($line = 0; strlen($out) < $total; $line++) {
    $out .= sprintf("%07d ", $line) . FILL . "\n";
}
echo substr($out, 0, $total);
flush();
usleep(100000);
exec('kill -9 ' . getmypid());
sleep(10);
echo "not reached\n";
