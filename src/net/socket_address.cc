#include "net/socket_address.h"

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace tern::net {

SocketAddress::SocketAddress(const InetAddress& inet) : length_(inet.socklen()) {
  std::memcpy(&storage_, inet.sockaddr_ptr(), length_);
}

Result<SocketAddress> SocketAddress::unix_path(std::string_view path) {
  SocketAddress addr;
  auto* un = reinterpret_cast<sockaddr_un*>(&addr.storage_);
  if (path.empty() || path.size() >= sizeof un->sun_path || path.find('\0') != path.npos) {
    return Error{EINVAL, "unix socket path must be 1 to 107 bytes"};
  }
  un->sun_family = AF_UNIX;
  std::memcpy(un->sun_path, path.data(), path.size());
  addr.length_ = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
  return addr;
}

Result<SocketAddress> SocketAddress::parse(std::string_view text) {
  constexpr std::string_view kUnix = "unix:";
  if (text.starts_with(kUnix)) return unix_path(text.substr(kUnix.size()));
  auto inet = InetAddress::parse(text);
  if (!inet) return inet.error();
  return SocketAddress(*inet);
}

InetAddress SocketAddress::inet() const {
  return InetAddress::from_sockaddr(storage_);
}

std::string SocketAddress::to_string() const {
  if (!is_unix()) return inet().to_ip_port();
  const auto* un = reinterpret_cast<const sockaddr_un*>(&storage_);
  return "unix:" + std::string(un->sun_path);
}

bool operator==(const SocketAddress& a, const SocketAddress& b) {
  return a.length_ == b.length_ && std::memcmp(&a.storage_, &b.storage_, a.length_) == 0;
}

}  // namespace tern::net
