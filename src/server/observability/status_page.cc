#include "server/observability/status_page.h"

namespace tern::server {
namespace {

// One literal, so that the page lives in the binary and a location needs no
// file for it. Only ASCII: the few typographic characters are HTML entities
// or JavaScript escapes, whatever the compiler's source character set.
constexpr std::string_view kPage = R"tern(<!doctype html>
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
'use strict';
(() => {
  const KEEP = 120;  // samples kept: two minutes at one a second
  const WINDOW_S = 120;  // seconds the charts span
  const PERIOD_MS = 1000;
  const TIMEOUT_MS = 5000;  // a poll unanswered this long has failed
  const CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx'];
  const STATES = ['active', 'reading', 'writing', 'idle'];
  const PERCENTILES = [['p50', 0.5], ['p90', 0.9], ['p99', 0.99]];
  const DASH = '\u2013';
  const url = location.pathname + '?format=json';
  const $ = (id) => document.getElementById(id);

  // What has been drawn, for people and tests: every series is aligned with
  // `samples` (the JSON as polled) and `times` (their server times); a rate
  // or percentile is null where there is no interval to take it over.
  const state = {
    samples: [], times: [], draws: 0, polls: 0, errors: 0, connected: false, lastError: '',
    series: {rps: {}, p50: [], p90: [], p99: [], active: [], reading: [], writing: [], idle: []},
  };
  for (const c of CLASSES) state.series.rps[c] = [];
  window.ternStatus = state;

  const charts = [
    {id: 'rps', unit: '/s', min: 1,
     lines: ['2xx', '3xx', '4xx', '5xx'].map((c) => ({key: c, color: '--c' + c, values: () => state.series.rps[c]}))},
    {id: 'latency', unit: ' ms', min: 1,
     lines: PERCENTILES.map(([p]) => ({key: p, color: '--' + p, values: () => state.series[p]}))},
    {id: 'connections', unit: '', min: 4, integer: true,
     lines: STATES.map((s) => ({key: s, color: '--' + s, values: () => state.series[s]}))},
  ];

  function number(v) {
    if (v == null || !isFinite(v)) return DASH;
    const a = Math.abs(v);
    if (a >= 1e6) return (v / 1e6).toFixed(1) + 'M';
    if (a >= 1e4) return (v / 1e3).toFixed(1) + 'k';
    if (Number.isInteger(v)) return String(v);
    if (a >= 100) return v.toFixed(0);
    if (a >= 10) return v.toFixed(1);
    return v.toPrecision(2);
  }
  const count = (n) => (n == null ? DASH : n.toLocaleString('en-US'));

  function bytes(v) {
    if (v == null || !isFinite(v)) return DASH;
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (i === 0 ? v.toFixed(0) : v.toFixed(1)) + ' ' + units[i];
  }

  function uptime(seconds) {
    let s = Math.max(0, Math.floor(seconds));
    const parts = [[86400, 'd'], [3600, 'h'], [60, 'm']].flatMap(([unit, name]) => {
      const n = Math.floor(s / unit);
      s -= n * unit;
      return n ? [n + name] : [];
    });
    parts.push(s + 's');
    return parts.slice(0, 3).join(' ');
  }

  // The q-quantile, in milliseconds, of one interval's requests from the
  // histogram's cumulative bucket counts (the interval's deltas): linear
  // inside the bucket that holds the rank, as Prometheus' histogram_quantile();
  // a rank in the +Inf bucket gives the highest finite bound. Null when the
  // interval counted nothing.
  function quantile(q, bounds, counts) {
    const total = counts[counts.length - 1];
    if (!(total > 0)) return null;
    const rank = q * total;
    let i = 0;
    while (i < counts.length - 1 && counts[i] < rank) i++;
    if (i >= bounds.length) return bounds[bounds.length - 1] * 1000;
    const lower = i === 0 ? 0 : bounds[i - 1];
    const below = i === 0 ? 0 : counts[i - 1];
    const inside = counts[i] - below;
    return (lower + (bounds[i] - lower) * (inside > 0 ? (rank - below) / inside : 1)) * 1000;
  }

  // Appends a sample and its series; returns the seconds since the previous
  // one (0 for the first, or when the server restarted and its counts began
  // again).
  function add(s) {
    const prev = state.samples[state.samples.length - 1];
    const dt = prev && prev.start_time === s.start_time && s.time > prev.time ? s.time - prev.time : 0;
    const rate = (get) => {
      if (!dt) return null;
      const d = get(s) - get(prev);
      return d >= 0 ? d / dt : null;
    };
    for (const c of CLASSES) state.series.rps[c].push(rate((x) => x.requests.by_class[c]));
    let counts = null;
    if (dt) {
      counts = s.duration.buckets.map((n, i) => n - prev.duration.buckets[i]);
      if (counts.some((n) => n < 0)) counts = null;
    }
    for (const [name, q] of PERCENTILES) state.series[name].push(counts && quantile(q, s.duration.bounds, counts));
    for (const name of STATES) state.series[name].push(s.connections[name]);
    state.samples.push(s);
    state.times.push(s.time);
    while (state.samples.length > KEEP) {
      for (const list of [state.samples, state.times, ...Object.values(state.series.rps)]) list.shift();
      for (const name of ['p50', 'p90', 'p99', ...STATES]) state.series[name].shift();
    }
    return dt;
  }

  function cell(row, text, className) {
    const td = row.insertCell();
    td.textContent = text;
    if (className) td.className = className;
    return td;
  }

  function empty(body, columns, text) {
    const td = cell(body.insertRow(), text, 'empty');
    td.colSpan = columns;
  }

  const total = (byClass) => CLASSES.reduce((sum, c) => sum + byClass[c], 0);
  const ratio = (c) => (c.hits + c.misses ? (100 * c.hits / (c.hits + c.misses)).toFixed(1) + '%' : DASH);

  function renderFigures(s, prev, dt) {
    const per = (get) => (dt ? Math.max(0, (get(s) - get(prev)) / dt) : null);
    const set = (id, text) => { $(id).textContent = text; };
    set('version', 'tern ' + s.version);
    set('uptime', uptime(s.time - s.start_time));
    set('updated', new Date(s.time * 1000).toLocaleTimeString());
    set('f-total', count(s.requests.total));
    set('f-rps', number(per((x) => x.requests.total)));
    set('f-in', bytes(per((x) => x.bytes.received)) + '/s');
    set('f-out', bytes(per((x) => x.bytes.sent)) + '/s');
    set('f-accepted', count(s.connections.accepted));
    set('f-shed', count(s.connections.shed));
    set('f-tls', count(s.tls.handshakes));
    set('f-tls-other', count(s.tls.resumed) + ' / ' + count(s.tls.failed));
    set('f-files', ratio(s.caches.open_file));
    set('f-responses', ratio(s.caches.response));
    set('f-dropped', count(s.log.dropped.error + s.log.dropped.access));
  }

  function renderUpstreams(s, prev, dt) {
    const body = $('upstreams').tBodies[0];
    body.replaceChildren();
    for (const u of s.upstreams) {
      const before = prev && prev.upstreams.find((p) => p.kind === u.kind && p.group === u.group &&
                                                     p.server === u.server);
      const row = body.insertRow();
      const badge = document.createElement('span');
      badge.className = 'badge ' + (u.up ? 'ok' : 'bad');
      badge.textContent = u.up ? 'up' : 'down';
      row.insertCell().append(badge);
      cell(row, u.server);
      cell(row, u.group);
      const requests = dt && before ? u.requests - before.requests : null;
      cell(row, requests == null ? DASH : number(Math.max(0, requests) / dt), 'num');
      const failing = before && u.failures > before.failures;
      cell(row, count(u.failures), 'num' + (failing ? ' bad' : ''));
      const latency = requests > 0 ? (u.latency_sum - before.latency_sum) / requests
                                   : (u.requests ? u.latency_sum / u.requests : null);
      cell(row, latency == null ? DASH : number(latency * 1000) + ' ms', 'num');
    }
    if (!s.upstreams.length) empty(body, 6, 'No upstream or FastCGI servers in the configuration.');
  }

  // The sites with ACME: their certificates, shown when there are some.
  function renderCertificates(s) {
    const list = s.certificates || [];
    $('certificates-section').hidden = !list.length;
    const body = $('certificates').tBodies[0];
    body.replaceChildren();
    for (const c of list) {
      const row = body.insertRow();
      const failing = c.last_result.startsWith('failed');
      const badge = document.createElement('span');
      badge.className = 'badge ' + (c.self_signed || failing ? 'bad' : 'ok');
      badge.textContent = c.self_signed ? 'self-signed' : failing ? 'renewal failing' : 'valid';
      row.insertCell().append(badge);
      cell(row, c.names.join(', '));
      cell(row, c.not_after ? new Date(c.not_after * 1000).toISOString().slice(0, 16).replace('T', ' ') + ' UTC'
                            : DASH);
      cell(row, c.last_result || DASH, failing ? 'bad' : '');
    }
  }

  function renderLocations(s, prev, dt) {
    const body = $('locations').tBodies[0];
    body.replaceChildren();
    const rows = s.locations.slice().sort((a, b) => total(b.by_class) - total(a.by_class));
    for (const l of rows) {
      const before = prev && prev.locations.find((p) => p.site === l.site && p.location === l.location);
      const row = body.insertRow();
      cell(row, l.site || '(no site yet)');
      cell(row, l.location || '(no location)');
      for (const c of CLASSES) cell(row, count(l.by_class[c]), 'num' + (c[0] >= '4' && l.by_class[c] ? ' bad' : ''));
      cell(row, count(total(l.by_class)), 'num');
      const gained = total(l.by_class) - (before ? total(before.by_class) : 0);
      cell(row, dt ? number(Math.max(0, gained) / dt) : DASH, 'num');
    }
    if (!rows.length) empty(body, 9, 'No requests counted yet.');
  }

  // A top for the y axis: 1, 2, 2.5 or 5 times a power of ten (a multiple
  // of 4 for counts, so that the four grid lines fall on whole numbers).
  function top(max, chart) {
    const v = Math.max(max, chart.min);
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    const f = v / p;
    const nice = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * p;
    return chart.integer ? Math.ceil(nice / 4) * 4 : nice;
  }

  function legend(chart) {
    const box = $('legend-' + chart.id);
    if (!box.childElementCount) {
      for (const line of chart.lines) {
        const key = document.createElement('span');
        const swatch = document.createElement('i');
        swatch.style.background = 'var(' + line.color + ')';
        const value = document.createElement('b');
        value.id = 'value-' + chart.id + '-' + line.key;
        key.append(swatch, line.key + ' ', value);
        box.append(key);
      }
    }
    for (const line of chart.lines) {
      const values = line.values();
      const last = values[values.length - 1];
      $('value-' + chart.id + '-' + line.key).textContent = last == null ? DASH : number(last) + chart.unit;
    }
  }

  function drawChart(chart, css) {
    legend(chart);
    const canvas = $('chart-' + chart.id);
    const ratio = window.devicePixelRatio || 1;
    const width = canvas.clientWidth;
    const height = canvas.clientHeight;
    if (!width || !height) return;
    if (canvas.width !== Math.round(width * ratio)) canvas.width = Math.round(width * ratio);
    if (canvas.height !== Math.round(height * ratio)) canvas.height = Math.round(height * ratio);
    const ctx = canvas.getContext('2d');
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    const left = 46, right = 8, above = 8, below = 20;
    const w = width - left - right;
    const h = height - above - below;
    let max = 0;
    for (const line of chart.lines) {
      for (const v of line.values()) if (v != null && v > max) max = v;
    }
    const peak = top(max, chart);
    const now = state.times[state.times.length - 1];
    const x = (t) => left + w - (now - t) / WINDOW_S * w;
    const y = (v) => above + h - v / peak * h;
    ctx.font = '11px system-ui, sans-serif';
    ctx.lineWidth = 1;
    ctx.strokeStyle = css('--grid');
    ctx.fillStyle = css('--muted');
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    for (let i = 0; i <= 4; i++) {
      const at = Math.round(y(peak * i / 4)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(left, at);
      ctx.lineTo(left + w, at);
      ctx.stroke();
      ctx.fillText(number(peak * i / 4), left - 6, at);
    }
    ctx.textBaseline = 'top';
    for (const [ago, label, align] of [[WINDOW_S, '-2 min', 'left'], [WINDOW_S / 2, '-1 min', 'center'],
                                       [0, 'now', 'right']]) {
      ctx.textAlign = align;
      ctx.fillText(label, left + w - ago / WINDOW_S * w, above + h + 5);
    }
    ctx.save();
    ctx.beginPath();
    ctx.rect(left, above - 2, w, h + 4);
    ctx.clip();
    ctx.lineWidth = 1.75;
    ctx.lineJoin = 'round';
    let points = 0;
    for (const line of chart.lines) {
      ctx.strokeStyle = ctx.fillStyle = css(line.color);
      // Runs of consecutive values; a run of one is drawn as a dot.
      let run = [];
      const flush = () => {
        if (run.length === 1) {
          ctx.beginPath();
          ctx.arc(run[0][0], run[0][1], 1.75, 0, 2 * Math.PI);
          ctx.fill();
        } else if (run.length > 1) {
          ctx.beginPath();
          run.forEach(([px, py], i) => (i ? ctx.lineTo(px, py) : ctx.moveTo(px, py)));
          ctx.stroke();
        }
        run = [];
      };
      line.values().forEach((v, i) => {
        if (v == null || !isFinite(v)) return flush();
        run.push([x(state.times[i]), y(v)]);
        points++;
      });
      flush();
    }
    ctx.restore();
    if (!points) {
      ctx.fillStyle = css('--muted');
      ctx.textAlign = 'center';
      ctx.textBaseline = 'middle';
      ctx.fillText('waiting for data' + '\u2026', left + w / 2, above + h / 2);
    }
  }

  function draw() {
    if (!state.samples.length) return;
    const style = getComputedStyle(document.documentElement);
    const css = (name) => style.getPropertyValue(name).trim();
    for (const chart of charts) drawChart(chart, css);
    state.draws++;
  }

  function setConnected(ok, why) {
    state.connected = ok;
    document.body.dataset.state = ok ? 'live' : 'disconnected';
    const badge = $('state');
    badge.textContent = ok ? 'live' : 'disconnected';
    badge.className = 'badge ' + (ok ? 'ok' : 'bad');
    badge.title = ok ? '' : why;
    $('error').textContent = ok ? '' : 'Disconnected: ' + url + ' did not answer (' + why +
                                       '). Retrying each second; the figures below are the last received.';
    $('error').hidden = ok;
  }

  async function poll() {
    const started = performance.now();
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), TIMEOUT_MS);
    state.polls++;
    try {
      const response = await fetch(url, {cache: 'no-store', signal: abort.signal});
      if (!response.ok) throw new Error('HTTP ' + response.status);
      const sample = await response.json();
      if (!sample || !sample.requests || !sample.duration || !sample.connections) {
        throw new Error('not the status figures');
      }
      const prev = state.samples[state.samples.length - 1];
      const dt = add(sample);
      setConnected(true, '');
      renderFigures(sample, prev, dt);
      renderUpstreams(sample, prev, dt);
      renderCertificates(sample);
      renderLocations(sample, prev, dt);
      draw();
    } catch (e) {
      state.errors++;
      state.lastError = e && e.name === 'AbortError' ? 'no answer in ' + TIMEOUT_MS / 1000 + ' s'
                                                      : String((e && e.message) || e);
      setConnected(false, state.lastError);
    } finally {
      clearTimeout(timer);
    }
    setTimeout(poll, Math.max(0, PERIOD_MS - (performance.now() - started)));
  }

  $('source').textContent = url;
  window.addEventListener('resize', draw);
  window.matchMedia('(prefers-color-scheme: dark)').addEventListener('change', draw);
  poll();
})();
</script>
</body>
</html>
)tern";

}  // namespace

std::string_view status_page_html() { return kPage; }

}  // namespace tern::server
