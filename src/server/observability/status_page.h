// The status page that a location with `metrics = "status"` answers: one
// self-contained HTML document, with no external scripts, styles, fonts or
// images, so that it works on a machine without internet access and loads
// nothing from another origin.
//
// The page polls `?format=json` of its own URL once a second (the figures of
// server/metrics_text.h's status_json()), keeps the last 120 samples (two
// minutes) and draws them on <canvas> with plain JavaScript: requests per
// second by status class, latency percentiles (p50, p90, p99) estimated
// from the histogram's bucket deltas as Prometheus' histogram_quantile()
// does, and connections by state; beside them, tables of the upstream
// servers and of the requests by site and location. A failed poll shows a
// "disconnected" badge and the page keeps polling. What it has drawn is
// left in `window.ternStatus` (samples, series, draws) for tests to read.
//
// A Content-Security-Policy for the page must allow its inline script and
// style; that is the location's business (`headers`), not the page's.
#pragma once

#include <string_view>

namespace tern::server {

// The page, UTF-8. The view is of static storage: valid for the life of the
// process. Any thread.
std::string_view status_page_html();

// The page's <script> content (status_page_script.cc). Any thread.
std::string_view status_page_script();

}  // namespace tern::server
