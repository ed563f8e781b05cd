#include "server/observability/status_page.h"

#include <string>

namespace tern::server {
namespace {

// Literals, so that the page lives in the binary and a location needs no
// file for it: the markup and style here, the script in
// status_page_script.cc, joined once. Only ASCII: the few typographic
// characters are HTML entities or JavaScript escapes, whatever the
// compiler's source character set.
constexpr std::string_view kHead = R"tern(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<meta name="referrer" content="no-referrer">
<title>tern status</title>
<link rel="icon" href="data:,">
<style>
:root {
  --bg: #f6f7f9; --panel: #fff; --fg: #1f2328; --muted: #667085; --border: #d8dde3; --grid: #e9edf1;
  --ok: #1a7f37; --bad: #cf222e;
  --c1xx: #8250df; --c2xx: #1a7f37; --c3xx: #0969da; --c4xx: #bc4c00; --c5xx: #cf222e;
  --p50: #0969da; --p90: #9a6700; --p99: #cf222e;
  --active: #1f2328; --reading: #0969da; --writing: #1a7f37; --idle: #8c959f;
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #0d1117; --panel: #161b22; --fg: #e6edf3; --muted: #8d96a0; --border: #30363d; --grid: #262c34;
    --ok: #3fb950; --bad: #f85149;
    --c1xx: #a371f7; --c2xx: #3fb950; --c3xx: #58a6ff; --c4xx: #d29922; --c5xx: #f85149;
    --p50: #58a6ff; --p90: #d29922; --p99: #f85149;
    --active: #e6edf3; --reading: #58a6ff; --writing: #3fb950; --idle: #6e7681;
  }
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
header { display: flex; flex-wrap: wrap; align-items: baseline; gap: .4rem 1.2rem; padding: .9rem 1.5rem;
  border-bottom: 1px solid var(--border); background: var(--panel); }
h1 { font-size: 1.15rem; margin: 0; font-weight: 600; }
h2 { font-size: .95rem; margin: 0 0 .4rem; font-weight: 600; }
code { font-size: .9em; }
.muted { color: var(--muted); }
.badge { display: inline-block; padding: 0 .55em; border: 1px solid currentColor; border-radius: 999px;
  font-size: .8rem; font-weight: 600; }
.ok { color: var(--ok); }
.bad { color: var(--bad); }
#error { margin: 1rem 1.5rem 0; padding: .6rem .8rem; border: 1px solid var(--bad); border-radius: 6px;
  color: var(--bad); background: var(--panel); }
#figures { display: grid; grid-template-columns: repeat(auto-fill, minmax(9.5rem, 1fr)); gap: .6rem;
  margin: 1rem 1.5rem 0; }
#figures div { min-width: 0; background: var(--panel); border: 1px solid var(--border); border-radius: 6px;
  padding: .45rem .7rem; }
#figures dt { font-size: .75rem; color: var(--muted); }
#figures dd { margin: 0; overflow: hidden; font-size: 1.05rem; font-variant-numeric: tabular-nums;
  white-space: nowrap; text-overflow: ellipsis; }
main { display: grid; grid-template-columns: repeat(auto-fit, minmax(26rem, 1fr)); gap: 1rem; padding: 1rem 1.5rem; }
section { min-width: 0; padding: .8rem 1rem; background: var(--panel); border: 1px solid var(--border);
  border-radius: 6px; }
.wide { grid-column: 1 / -1; }
canvas { display: block; width: 100%; height: 190px; }
.legend { display: flex; flex-wrap: wrap; gap: .2rem 1rem; margin-bottom: .3rem; font-size: .8rem; }
.legend i { display: inline-block; width: .9em; height: .25em; margin-right: .35em; vertical-align: middle; }
.legend b { font-weight: 600; font-variant-numeric: tabular-nums; }
.table { overflow-x: auto; }
table { width: 100%; border-collapse: collapse; font-size: .85rem; }
th, td { padding: .3rem .5rem; border-bottom: 1px solid var(--grid); text-align: left; white-space: nowrap; }
th { color: var(--muted); font-size: .75rem; font-weight: 600; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
td.empty { color: var(--muted); text-align: center; }
body[data-state="disconnected"] main, body[data-state="disconnected"] #figures { opacity: .55; }
footer { padding: 0 1.5rem 1.5rem; font-size: .8rem; }
</style>
</head>
<body data-state="connecting">
<header>
  <h1>tern status</h1>
  <span id="version" class="muted">tern</span>
  <span>up <b id="uptime">&ndash;</b></span>
  <span id="state" class="badge" role="status" aria-live="polite">connecting</span>
  <span class="muted">updated <span id="updated">&ndash;</span></span>
</header>
<p id="error" hidden></p>
<dl id="figures">
  <div><dt>Requests</dt><dd id="f-total">&ndash;</dd></div>
  <div><dt>Requests/s</dt><dd id="f-rps">&ndash;</dd></div>
  <div><dt>Received/s</dt><dd id="f-in">&ndash;</dd></div>
  <div><dt>Sent/s</dt><dd id="f-out">&ndash;</dd></div>
  <div><dt>Connections accepted</dt><dd id="f-accepted">&ndash;</dd></div>
  <div><dt>Connections shed</dt><dd id="f-shed">&ndash;</dd></div>
  <div><dt>TLS handshakes</dt><dd id="f-tls">&ndash;</dd></div>
  <div><dt>TLS resumed / failed</dt><dd id="f-tls-other">&ndash;</dd></div>
  <div><dt>Open-file cache hits</dt><dd id="f-files">&ndash;</dd></div>
  <div><dt>Response cache hits</dt><dd id="f-responses">&ndash;</dd></div>
  <div><dt>Log records dropped</dt><dd id="f-dropped">&ndash;</dd></div>
</dl>
<main>
  <section>
    <h2>Requests per second</h2>
    <div class="legend" id="legend-rps"></div>
    <canvas id="chart-rps" role="img" aria-label="Requests per second by status class, last two minutes"></canvas>
  </section>
  <section>
    <h2>Latency</h2>
    <div class="legend" id="legend-latency"></div>
    <canvas id="chart-latency" role="img"
      aria-label="Request latency percentiles in milliseconds, each second, last two minutes"></canvas>
  </section>
  <section>
    <h2>Connections</h2>
    <div class="legend" id="legend-connections"></div>
    <canvas id="chart-connections" role="img" aria-label="Open connections by state, last two minutes"></canvas>
  </section>
  <section>
    <h2>Upstreams</h2>
    <div class="table"><table id="upstreams">
      <thead><tr><th>State</th><th>Server</th><th>Group</th><th class="num">Req/s</th><th class="num">Failures</th>
        <th class="num">Mean latency</th></tr></thead>
      <tbody></tbody>
    </table></div>
  </section>
  <section class="wide" id="certificates-section" hidden>
    <h2>Certificates</h2>
    <div class="table"><table id="certificates">
      <thead><tr><th>State</th><th>Names</th><th>Expires</th><th>Last order</th></tr></thead>
      <tbody></tbody>
    </table></div>
  </section>
  <section class="wide">
    <h2>Requests by location</h2>
    <div class="table"><table id="locations">
      <thead><tr><th>Site</th><th>Location</th><th class="num">1xx</th><th class="num">2xx</th>
        <th class="num">3xx</th><th class="num">4xx</th><th class="num">5xx</th><th class="num">Total</th>
        <th class="num">Req/s</th></tr></thead>
      <tbody></tbody>
    </table></div>
  </section>
</main>
<footer class="muted">Polled each second from <code id="source"></code>; the charts keep the last two minutes.
  Latency percentiles are estimated from the duration histogram's buckets, as Prometheus' histogram_quantile()
  does, so they are no finer than the buckets.</footer>
<script>
)tern";

constexpr std::string_view kEnd = R"tern(</script>
</body>
</html>
)tern";

}  // namespace

std::string_view status_page_html() {
  static const std::string page = std::string(kHead) + std::string(status_page_script()) + std::string(kEnd);
  return page;
}

}  // namespace tern::server
