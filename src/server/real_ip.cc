#include "server/real_ip.h"

#include <algorithm>

namespace tern::server {

bool RealIpConfig::trusts(const net::InetAddress& address) const {
  return std::any_of(from.begin(), from.end(), [&](const Cidr& cidr) { return cidr.contains(address); });
}

std::optional<net::InetAddress> parse_forwarded_address(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return std::nullopt;
  text = text.substr(begin, text.find_last_not_of(" \t") - begin + 1);
  if (text.size() > 2 && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
    if (text.find(':') == std::string_view::npos) return std::nullopt;
  }
  auto address = net::InetAddress::from_ip_port(text, 0);
  if (!address) return std::nullopt;
  return *address;
}

net::InetAddress real_client(const RealIpConfig& config, const http::Request& request,
                             const net::InetAddress& connection_client) {
  if (config.source == RealIpConfig::Source::kProxyProtocol || !config.trusts(connection_client)) {
    return connection_client;
  }
  if (config.source == RealIpConfig::Source::kXRealIp) {
    auto named = parse_forwarded_address(request.header(http::FieldId::kXRealIp));
    return named ? *named : connection_client;
  }
  // X-Forwarded-For: its fields in order make one list; walk it from the
  // end.
  net::InetAddress client = connection_client;
  const auto headers = request.headers();
  for (auto field = headers.rbegin(); field != headers.rend(); ++field) {
    if (field->id != http::FieldId::kXForwardedFor) continue;
    std::string_view list = field->value;
    while (!list.empty()) {
      const size_t comma = list.rfind(',');
      const std::string_view entry = comma == std::string_view::npos ? list : list.substr(comma + 1);
      list = comma == std::string_view::npos ? std::string_view() : list.substr(0, comma);
      if (entry.find_first_not_of(" \t") == std::string_view::npos) continue;  // "a,,b"
      auto named = parse_forwarded_address(entry);
      if (!named) return client;
      client = *named;
      if (!config.recursive || !config.trusts(client)) return client;
    }
  }
  return client;
}

}  // namespace tern::server
