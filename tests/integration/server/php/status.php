<?php
// A raw Status field (?code=N, default 103), as an application that sends an
// interim or a protocol-switching status would; ?upgrade=1 adds Upgrade.
$code = (int) ($_GET['code'] ?? 103);
header('Status: ' . $code . ' Odd');
if (isset($_GET['upgrade'])) {
    header('Upgrade: websocket');
    header('Connection: Upgrade');
}
echo "after the status\n";
