<?php
// Sleeps ?s=SECONDS (default 1, fractions allowed) before answering.
$seconds = (float) ($_GET['s'] ?? 1);
usleep((int) ($seconds * 1000000));
header('Content-Type: text/plain');
echo "slept $seconds\n";
