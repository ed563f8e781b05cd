// The status page's script (status_page.h says what it draws): polls the
// page's own URL for JSON once a second and draws the samples on canvases.
// status_page.cc puts it between the page's markup and its end.
#include "server/observability/status_page.h"

namespace tern::server {

std::string_view status_page_script() {
  return R"tern('use strict';
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
)tern";
}

}  // namespace tern::server
