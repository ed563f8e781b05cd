<?php
// php-hello: the smallest page, "hello\n" (what FastCGI itself costs).
header('Content-Type: text/plain');
echo "hello\n";
