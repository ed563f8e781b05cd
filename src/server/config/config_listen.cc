// The `listen` entries: ADDRESS:PORT and its flags (tls, h2c, no-h2,
// proxy_protocol),
// gathered per flag, at the top level and by the sites.
#include <algorithm>
#include <string>

#include "server/config/config.h"
#include "server/config/config_section.h"

namespace tern::server {

std::optional<net::InetAddress> parse_listen(std::string_view text, ListenFlags* flags, std::string* error) {
  *flags = {};
  auto fail = [&](std::string why) -> std::optional<net::InetAddress> {
    if (error != nullptr) *error = "\"" + std::string(text) + "\": " + why;
    return std::nullopt;
  };
  constexpr std::string_view kBlank = " \t";
  const size_t space = std::min(text.find_first_of(kBlank), text.size());
  auto address = net::InetAddress::parse(text.substr(0, space));
  if (!address) {
    return fail("expected ADDRESS:PORT (\"[::1]:80\" for IPv6), then tls, h2c, no-h2 or proxy_protocol");
  }
  for (std::string_view rest = text.substr(space); !rest.empty();) {
    const size_t start = rest.find_first_not_of(kBlank);
    if (start == std::string_view::npos) break;
    rest.remove_prefix(start);
    const std::string_view word = rest.substr(0, std::min(rest.find_first_of(kBlank), rest.size()));
    rest.remove_prefix(word.size());
    if (word == "tls") {
      flags->tls = true;
    } else if (word == "h2c") {
      flags->h2c = true;
    } else if (word == "no-h2") {
      flags->no_h2 = true;
    } else if (word == "proxy_protocol") {
      flags->proxy_protocol = true;
    } else {
      return fail("unknown flag \"" + std::string(word) + "\" (tls, h2c, no-h2 or proxy_protocol)");
    }
  }
  if (flags->tls && flags->h2c) return fail("h2c is HTTP/2 without TLS; a tls address offers h2 by ALPN");
  if (flags->no_h2 && !flags->tls) return fail("no-h2 goes with tls (a plain address speaks HTTP/2 only with h2c)");
  return *address;
}

bool ListenConfig::add(std::string_view text, std::string* error) {
  ListenFlags flags;
  auto address = parse_listen(text, &flags, error);
  if (!address) return false;
  all.push_back(*address);
  if (flags.tls) tls.push_back(*address);
  if (flags.h2c) h2c.push_back(*address);
  if (flags.no_h2) no_h2.push_back(*address);
  if (flags.proxy_protocol) proxy_protocol.push_back(*address);
  return true;
}

std::vector<net::InetAddress> flagged_addresses(const Config& config,
                                                std::vector<net::InetAddress> ListenConfig::*flag) {
  std::vector<net::InetAddress> out;
  auto add = [&out](const net::InetAddress& address) {
    if (std::find(out.begin(), out.end(), address) == out.end()) out.push_back(address);
  };
  const bool top_used = std::any_of(config.sites.begin(), config.sites.end(),
                                    [](const SiteConfig& site) { return site.listen.empty(); });
  if (top_used || config.sites.empty()) {
    for (const net::InetAddress& address : config.listen.*flag) add(address);
  }
  for (const SiteConfig& site : config.sites) {
    for (const net::InetAddress& address : site.listen.*flag) add(address);
  }
  return out;
}

std::vector<Cidr> proxy_protocol_senders(const Config& config) {
  std::vector<Cidr> out = config.real_ip.from;
  for (const SiteConfig& site : config.sites) {
    for (const Cidr& cidr : site.real_ip.from) {
      if (std::find(out.begin(), out.end(), cidr) == out.end()) out.push_back(cidr);
    }
  }
  return out;
}

namespace config_detail {

void check_proxy_protocol(const std::string& file, const Config& c) {
  if (flagged_addresses(c, &ListenConfig::proxy_protocol).empty() || !proxy_protocol_senders(c).empty()) return;
  int line = c.listen_line;
  std::string key = "listen";
  const net::InetAddress* address = c.listen.proxy_protocol.empty() ? nullptr : &c.listen.proxy_protocol.front();
  const std::string* in = &file;
  for (size_t i = 0; address == nullptr && i < c.sites.size(); ++i) {
    if (c.sites[i].listen.proxy_protocol.empty()) continue;
    address = &c.sites[i].listen.proxy_protocol.front();
    line = c.sites[i].line;
    key = c.sites[i].where + ".listen";
    if (!c.sites[i].file.empty()) in = &c.sites[i].file;
  }
  throw ConfigError(*in, line, key,
                    address->to_ip_port() +
                        " proxy_protocol: no network may send the header; name the load balancers' in "
                        "real_ip.from (real_ip = { from = [\"10.0.0.0/8\"], header = \"proxy_protocol\" })");
}

void read_real_ip(Section s, const toml::table& table, RealIpConfig* out) {
  *out = RealIpConfig{};
  out->line = static_cast<int>(table.source().begin.line);
  auto from = s.get_strings("from");
  if (!from || from->empty()) s.fail(table, "from", "needs the trusted networks (\"10.0.0.0/8\")");
  for (const auto& [text, node] : *from) {
    auto cidr = Cidr::parse(text);
    if (!cidr) s.fail(*node, "from", "\"" + text + "\" is not an address or network (\"10.0.0.0/8\")");
    out->from.push_back(*cidr);
  }
  s.get_choice("header", &out->source,
               {{"X-Forwarded-For", RealIpConfig::Source::kXForwardedFor},
                {"X-Real-IP", RealIpConfig::Source::kXRealIp},
                {"proxy_protocol", RealIpConfig::Source::kProxyProtocol}});
  s.get_bool("recursive", &out->recursive);
  s.finish();
}

void read_listen(Section& s, ListenConfig* out) {
  auto listen = s.get_strings("listen");
  if (!listen) return;
  out->clear();
  for (const auto& [text, node] : *listen) {
    std::string error;
    if (!out->add(text, &error)) s.fail(*node, "listen", error);
  }
  if (out->empty()) s.fail(*s.node("listen"), "listen", "needs at least one address");
}

}  // namespace config_detail

}  // namespace tern::server
