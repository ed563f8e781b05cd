<?php
// The smallest page: "hello\n".
header('Content-Type: text/plain');
echo "hello\n";
