<?php
// The demo site's PHP page: tern passes it to php-fpm over FastCGI
// (scripts/run sets that up when php8.2-fpm is installed).
function h($value): string
{
    return htmlspecialchars((string) $value, ENT_QUOTES | ENT_SUBSTITUTE, 'UTF-8');
}

$params = [
    'REQUEST_METHOD', 'REQUEST_URI', 'QUERY_STRING', 'SCRIPT_NAME', 'SCRIPT_FILENAME',
    'DOCUMENT_ROOT', 'SERVER_PROTOCOL', 'SERVER_SOFTWARE', 'SERVER_NAME', 'SERVER_ADDR',
    'SERVER_PORT', 'REMOTE_ADDR', 'REMOTE_PORT', 'GATEWAY_INTERFACE', 'HTTP_HOST',
    'HTTP_USER_AGENT', 'HTTP_ACCEPT',
];
header('Content-Type: text/html; charset=utf-8');
?>
<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>PHP - tern</title>
  <link rel="stylesheet" href="/style.css">
  <style>
    table { width: 100%; border-collapse: collapse; background: white; border-radius: 0.6rem; overflow: hidden; box-shadow: 0 1px 4px rgba(23, 50, 77, 0.12); }
    th, td { padding: 0.45rem 0.8rem; text-align: left; vertical-align: top; border-bottom: 1px solid var(--foam); }
    th { width: 14rem; font-weight: 600; font-family: ui-monospace, monospace; font-size: 0.9rem; }
    td { word-break: break-all; }
  </style>
</head>
<body>
  <header><h1><a href="/">tern</a> / php</h1></header>
  <main>
    <p>This page is not a file that tern sends as it is: tern passed the
      request to php-fpm over FastCGI, and PHP <?= h(PHP_VERSION) ?>
      (<code><?= h(PHP_SAPI) ?></code>) wrote it for
      <code><?= h($_SERVER['REQUEST_METHOD'] ?? '') ?> <?= h($_SERVER['REQUEST_URI'] ?? '') ?></code>
      at <?= h(gmdate('H:i:s')) ?> UTC.</p>
    <p>Served by <code><?= h($_SERVER['SERVER_SOFTWARE'] ?? 'an unknown server') ?></code>.
      Some of the CGI parameters it sent:</p>
    <table>
<?php foreach ($params as $name): ?>
      <tr><th><?= h($name) ?></th><td><?= h($_SERVER[$name] ?? '') ?></td></tr>
<?php endforeach; ?>
    </table>
  </main>
  <footer>Served by tern and php-fpm</footer>
</body>
</html>
