#include "server/observability/metrics_text.h"

#include <fmt/format.h>

#include <iterator>

namespace tern::server {
namespace {

constexpr const char* kClasses[5] = {"1xx", "2xx", "3xx", "4xx", "5xx"};

using Out = std::back_insert_iterator<std::string>;

// A label value or a JSON string's contents: backslash, quote and line
// feed escaped (both formats escape them alike); other control bytes, which
// no label of ours holds, become spaces.
void escape(std::string& out, std::string_view value) {
  for (char c : value) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += static_cast<unsigned char>(c) < 0x20 ? ' ' : c;
    }
  }
}

void family(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  fmt::format_to(Out(out), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void sample(std::string& out, std::string_view name, auto value) {
  fmt::format_to(Out(out), "{} {}\n", name, value);
}

void upstream_labels(std::string& out, const MetricsSnapshot::Upstream& u) {
  out += "{kind=\"";
  escape(out, u.kind);
  out += "\",group=\"";
  escape(out, u.group);
  out += "\",server=\"";
  escape(out, u.server);
  out += "\"}";
}

double seconds(uint64_t ms) { return static_cast<double>(ms) / 1000.0; }

void prometheus_requests(std::string& out, const MetricsSnapshot& s) {
  family(out, "tern_requests_total", "counter", "Responses sent, by site, location and status class.");
  for (const MetricsSnapshot::Requests& series : s.requests) {
    for (size_t c = 0; c < 5; ++c) {
      if (series.by_class[c] == 0) continue;
      out += "tern_requests_total{site=\"";
      escape(out, series.site);
      out += "\",location=\"";
      escape(out, series.location);
      fmt::format_to(Out(out), "\",class=\"{}\"}} {}\n", kClasses[c], series.by_class[c]);
    }
  }
  family(out, "tern_request_duration_seconds", "histogram",
         "Time from a request's first byte until its whole response is queued for the client (a file as "
         "its region), by the loop's clock.");
  for (size_t b = 0; b < kDurationBoundsMs.size(); ++b) {
    fmt::format_to(Out(out), "tern_request_duration_seconds_bucket{{le=\"{}\"}} {}\n", kDurationBoundsMs[b] / 1000.0,
                   s.duration_buckets[b]);
  }
  const uint64_t count = s.duration_buckets.back();
  fmt::format_to(Out(out), "tern_request_duration_seconds_bucket{{le=\"+Inf\"}} {}\n", count);
  sample(out, "tern_request_duration_seconds_sum", seconds(s.duration_ms));
  sample(out, "tern_request_duration_seconds_count", count);
}

void prometheus_connections(std::string& out, const MetricsSnapshot& s) {
  family(out, "tern_received_bytes_total", "counter", "Bytes read from client connections (TLS: as sent).");
  sample(out, "tern_received_bytes_total", s.bytes_received);
  family(out, "tern_sent_bytes_total", "counter", "Bytes written to client connections (TLS: as sent).");
  sample(out, "tern_sent_bytes_total", s.bytes_sent);
  family(out, "tern_connections_active", "gauge", "Client connections open.");
  sample(out, "tern_connections_active", s.connections.active);
  family(out, "tern_connections", "gauge",
         "Client connections reading a request, writing a response, or idle (sampled each second).");
  fmt::format_to(Out(out), "tern_connections{{state=\"reading\"}} {}\n", s.connections.reading);
  fmt::format_to(Out(out), "tern_connections{{state=\"writing\"}} {}\n", s.connections.writing);
  fmt::format_to(Out(out), "tern_connections{{state=\"idle\"}} {}\n", s.connections.idle);
  family(out, "tern_connections_accepted_total", "counter", "Client connections accepted and served.");
  sample(out, "tern_connections_accepted_total", s.connections.accepted);
  family(out, "tern_connections_shed_total", "counter",
         "Client connections closed as they were accepted (connection limit, out of descriptors).");
  sample(out, "tern_connections_shed_total", s.connections.shed);
  family(out, "tern_tls_handshakes_total", "counter", "TLS handshakes completed.");
  sample(out, "tern_tls_handshakes_total", s.tls.handshakes);
  family(out, "tern_tls_resumed_total", "counter", "TLS handshakes that resumed a session.");
  sample(out, "tern_tls_resumed_total", s.tls.resumed);
  family(out, "tern_tls_handshake_failures_total", "counter", "TLS handshakes that failed.");
  sample(out, "tern_tls_handshake_failures_total", s.tls.failed);
  family(out, "tern_tls_kernel_connections_total", "counter",
         "TLS connections whose sending went to kernel TLS (files by sendfile).");
  sample(out, "tern_tls_kernel_connections_total", s.tls.kernel);
}

void prometheus_upstreams(std::string& out, const MetricsSnapshot& s) {
  struct Column {
    const char* name;
    const char* type;
    const char* help;
  };
  static constexpr Column kColumns[] = {
      {"tern_upstream_requests_total", "counter", "Attempts on an upstream or FastCGI server that ended."},
      {"tern_upstream_failures_total", "counter", "Attempts that failed (connect, reset, timeout, bad response)."},
      {"tern_upstream_response_seconds_total", "counter", "Time of the attempts, summed."},
      {"tern_upstream_up", "gauge", "1 while the server is in the rotation (health checks, max_fails)."},
  };
  for (size_t column = 0; column < std::size(kColumns); ++column) {
    family(out, kColumns[column].name, kColumns[column].type, kColumns[column].help);
    for (const MetricsSnapshot::Upstream& u : s.upstreams) {
      out += kColumns[column].name;
      upstream_labels(out, u);
      switch (column) {
        case 0: fmt::format_to(Out(out), " {}\n", u.requests); break;
        case 1: fmt::format_to(Out(out), " {}\n", u.failures); break;
        case 2: fmt::format_to(Out(out), " {}\n", seconds(u.latency_ms)); break;
        default: fmt::format_to(Out(out), " {}\n", u.up ? 1 : 0); break;
      }
    }
  }
}

void prometheus_limits(std::string& out, const MetricsSnapshot& s) {
  if (s.limits.empty()) return;
  family(out, "tern_limit_requests_total", "counter",
         "Requests a [[limit]] held for their turn (delayed) or refused, and connections it closed at accept.");
  for (const MetricsSnapshot::Limit& l : s.limits) {
    for (const bool refused : {false, true}) {
      if (!refused && l.kind != "rate") continue;
      out += "tern_limit_requests_total{limit=\"";
      escape(out, l.name);
      fmt::format_to(Out(out), "\",kind=\"{}\",result=\"{}\"}} {}\n", l.kind, refused ? "refused" : "delayed",
                     refused ? l.refused : l.delayed);
    }
  }
  family(out, "tern_limit_keys", "gauge", "Keys a [[limit]]'s table holds now.");
  for (const MetricsSnapshot::Limit& l : s.limits) {
    out += "tern_limit_keys{limit=\"";
    escape(out, l.name);
    fmt::format_to(Out(out), "\",kind=\"{}\"}} {}\n", l.kind, l.keys);
  }
}

void prometheus_cache_zones(std::string& out, const MetricsSnapshot& s) {
  if (s.cache_zones.empty()) return;
  struct Gauge {
    const char* name;
    const char* help;
    uint64_t MetricsSnapshot::CacheZone::*value;
  };
  static constexpr Gauge kGauges[] = {
      {"tern_cache_entries", "Entries a [[cache]] zone holds now.", &MetricsSnapshot::CacheZone::entries},
      {"tern_cache_disk_bytes", "Bytes of a [[cache]] zone's files now.", &MetricsSnapshot::CacheZone::disk_bytes},
      {"tern_cache_max_disk_bytes", "A [[cache]] zone's max_size.", &MetricsSnapshot::CacheZone::max_size},
      {"tern_cache_memory_bytes", "Memory a [[cache]] zone's index, heads and small bodies take now.",
       &MetricsSnapshot::CacheZone::memory_bytes},
      {"tern_cache_max_memory_bytes", "A [[cache]] zone's memory.", &MetricsSnapshot::CacheZone::memory},
  };
  for (const Gauge& g : kGauges) {
    family(out, g.name, "gauge", g.help);
    for (const MetricsSnapshot::CacheZone& z : s.cache_zones) {
      out += g.name;
      out += "{zone=\"";
      escape(out, z.name);
      fmt::format_to(Out(out), "\"}} {}\n", z.*g.value);
    }
  }
}

void prometheus_certificates(std::string& out, const MetricsSnapshot& s) {
  if (s.certificates.empty()) return;
  struct Gauge {
    const char* name;
    const char* help;
    int64_t (*value)(const MetricsSnapshot::Certificate&);
  };
  static constexpr Gauge kGauges[] = {
      {"tern_certificate_expiry_seconds", "When a certificate from ACME ends, in Unix seconds.",
       [](const MetricsSnapshot::Certificate& c) { return c.not_after; }},
      {"tern_certificate_self_signed", "1 while a site with ACME serves its self-signed stand-in.",
       [](const MetricsSnapshot::Certificate& c) -> int64_t { return c.self_signed ? 1 : 0; }},
      {"tern_certificate_renewal_failing", "1 when the last order of a certificate from ACME failed.",
       [](const MetricsSnapshot::Certificate& c) -> int64_t { return c.last_result.starts_with("failed") ? 1 : 0; }},
      {"tern_certificate_last_issued_seconds",
       "When this process last had a certificate issued, in Unix seconds (0: not yet).",
       [](const MetricsSnapshot::Certificate& c) { return c.last_issued; }},
  };
  for (const Gauge& g : kGauges) {
    family(out, g.name, "gauge", g.help);
    for (const MetricsSnapshot::Certificate& c : s.certificates) {
      out += g.name;
      out += "{names=\"";
      for (size_t i = 0; i < c.names.size(); ++i) {
        if (i > 0) out += ',';
        escape(out, c.names[i]);
      }
      fmt::format_to(Out(out), "\"}} {}\n", g.value(c));
    }
  }
}

}  // namespace

std::string prometheus_text(const MetricsSnapshot& s, std::string_view version) {
  std::string out;
  out.reserve(4096 + 160 * (s.requests.size() + 4 * s.upstreams.size()));
  family(out, "tern_build_info", "gauge", "The running build.");
  out += "tern_build_info{version=\"";
  escape(out, version);
  out += "\"} 1\n";
  family(out, "tern_start_time_seconds", "gauge", "When the process started, in Unix seconds.");
  fmt::format_to(Out(out), "tern_start_time_seconds {:.3f}\n", s.start_time);
  prometheus_requests(out, s);
  prometheus_connections(out, s);
  prometheus_upstreams(out, s);
  prometheus_limits(out, s);
  prometheus_cache_zones(out, s);
  prometheus_certificates(out, s);
  family(out, "tern_open_file_cache_hits_total", "counter", "Static file lookups the open-file cache answered.");
  sample(out, "tern_open_file_cache_hits_total", s.file_cache_hits);
  family(out, "tern_open_file_cache_misses_total", "counter", "Static file lookups that went to the file system.");
  sample(out, "tern_open_file_cache_misses_total", s.file_cache_misses);
  family(out, "tern_response_cache_hits_total", "counter", "Requests of proxied and FastCGI locations answered from a [[cache]].");
  sample(out, "tern_response_cache_hits_total", s.response_cache_hits);
  family(out, "tern_response_cache_misses_total", "counter", "GET and HEAD requests of locations with a [[cache]] that went to the application.");
  sample(out, "tern_response_cache_misses_total", s.response_cache_misses);
  family(out, "tern_response_cache_bypass_total", "counter", "Requests of locations with a [[cache]] that went to the application without a look in it (bypass).");
  sample(out, "tern_response_cache_bypass_total", s.response_cache_bypass);
  family(out, "tern_response_cache_stale_total", "counter", "Requests answered from a stale [[cache]] entry: the application failed (use_stale, stale-if-error), or another request was refreshing it (updating).");
  sample(out, "tern_response_cache_stale_total", s.response_cache_stale);
  family(out, "tern_response_cache_revalidated_total", "counter", "Stale [[cache]] entries the application confirmed with 304 and that answered the request.");
  sample(out, "tern_response_cache_revalidated_total", s.response_cache_revalidated);
  family(out, "tern_log_dropped_total", "counter", "Log records dropped because the log's queue was full.");
  fmt::format_to(Out(out), "tern_log_dropped_total{{log=\"error\"}} {}\n", s.error_log_dropped);
  fmt::format_to(Out(out), "tern_log_dropped_total{{log=\"access\"}} {}\n", s.access_log_dropped);
  return out;
}

std::string status_json(const MetricsSnapshot& s, std::string_view version) {
  std::string out;
  out.reserve(2048 + 160 * (s.requests.size() + s.upstreams.size()));
  auto classes = [&out](const std::array<uint64_t, 5>& by_class) {
    fmt::format_to(Out(out), "{{\"1xx\":{},\"2xx\":{},\"3xx\":{},\"4xx\":{},\"5xx\":{}}}", by_class[0], by_class[1],
                   by_class[2], by_class[3], by_class[4]);
  };
  out += "{\"version\":\"";
  escape(out, version);
  fmt::format_to(Out(out), "\",\"start_time\":{:.3f},\"time\":{:.3f},", s.start_time, s.now);
  std::array<uint64_t, 5> total{};
  for (const MetricsSnapshot::Requests& series : s.requests) {
    for (size_t c = 0; c < 5; ++c) total[c] += series.by_class[c];
  }
  fmt::format_to(Out(out), "\"requests\":{{\"total\":{},\"by_class\":", s.requests_total());
  classes(total);
  out += "},\"locations\":[";
  for (size_t i = 0; i < s.requests.size(); ++i) {
    out += i == 0 ? "{\"site\":\"" : ",{\"site\":\"";
    escape(out, s.requests[i].site);
    out += "\",\"location\":\"";
    escape(out, s.requests[i].location);
    out += "\",\"by_class\":";
    classes(s.requests[i].by_class);
    out += "}";
  }
  out += "],\"duration\":{\"bounds\":[";
  for (size_t b = 0; b < kDurationBoundsMs.size(); ++b) {
    fmt::format_to(Out(out), "{}{}", b == 0 ? "" : ",", kDurationBoundsMs[b] / 1000.0);
  }
  out += "],\"buckets\":[";
  for (size_t b = 0; b < kDurationBuckets; ++b) fmt::format_to(Out(out), "{}{}", b == 0 ? "" : ",", s.duration_buckets[b]);
  fmt::format_to(Out(out), "],\"sum\":{},\"count\":{}}},", seconds(s.duration_ms), s.duration_buckets.back());
  fmt::format_to(Out(out), "\"bytes\":{{\"received\":{},\"sent\":{}}},", s.bytes_received, s.bytes_sent);
  const MetricsSnapshot::Connections& c = s.connections;
  fmt::format_to(Out(out),
                 "\"connections\":{{\"active\":{},\"reading\":{},\"writing\":{},\"idle\":{},\"accepted\":{},"
                 "\"shed\":{}}},",
                 c.active, c.reading, c.writing, c.idle, c.accepted, c.shed);
  fmt::format_to(Out(out), "\"tls\":{{\"handshakes\":{},\"resumed\":{},\"failed\":{}}},\"upstreams\":[",
                 s.tls.handshakes, s.tls.resumed, s.tls.failed);
  for (size_t i = 0; i < s.upstreams.size(); ++i) {
    const MetricsSnapshot::Upstream& u = s.upstreams[i];
    out += i == 0 ? "{\"kind\":\"" : ",{\"kind\":\"";
    escape(out, u.kind);
    out += "\",\"group\":\"";
    escape(out, u.group);
    out += "\",\"server\":\"";
    escape(out, u.server);
    fmt::format_to(Out(out), "\",\"requests\":{},\"failures\":{},\"latency_sum\":{},\"up\":{}}}", u.requests,
                   u.failures, seconds(u.latency_ms), u.up ? "true" : "false");
  }
  out += "],\"limits\":[";
  for (size_t i = 0; i < s.limits.size(); ++i) {
    const MetricsSnapshot::Limit& l = s.limits[i];
    out += i == 0 ? "{\"name\":\"" : ",{\"name\":\"";
    escape(out, l.name);
    fmt::format_to(Out(out), "\",\"kind\":\"{}\",\"delayed\":{},\"refused\":{},\"keys\":{}}}", l.kind, l.delayed,
                   l.refused, l.keys);
  }
  out += "],\"certificates\":[";
  for (size_t i = 0; i < s.certificates.size(); ++i) {
    const MetricsSnapshot::Certificate& cert = s.certificates[i];
    out += i == 0 ? "{\"names\":[" : ",{\"names\":[";
    for (size_t n = 0; n < cert.names.size(); ++n) {
      out += n == 0 ? "\"" : ",\"";
      escape(out, cert.names[n]);
      out += '"';
    }
    fmt::format_to(Out(out), "],\"not_after\":{},\"self_signed\":{},\"last_result\":\"", cert.not_after,
                   cert.self_signed ? "true" : "false");
    escape(out, cert.last_result);
    fmt::format_to(Out(out), "\",\"last_attempt\":{},\"last_issued\":{}}}", cert.last_attempt, cert.last_issued);
  }
  fmt::format_to(Out(out),
                 "],\"caches\":{{\"open_file\":{{\"hits\":{},\"misses\":{}}},\"response\":{{\"hits\":{},\"misses\":{},\"bypass\":{},\"stale\":{},\"revalidated\":{}}}}},"
                 "\"log\":{{\"dropped\":{{\"error\":{},\"access\":{}}}}}}}\n",
                 s.file_cache_hits, s.file_cache_misses, s.response_cache_hits, s.response_cache_misses,
                 s.response_cache_bypass, s.response_cache_stale, s.response_cache_revalidated, s.error_log_dropped, s.access_log_dropped);
  return out;
}

}  // namespace tern::server
