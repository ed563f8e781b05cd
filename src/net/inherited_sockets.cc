#include "net/inherited_sockets.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <string_view>

#include "net/sockets.h"

namespace tern::net {
namespace {

constexpr int kFirstFd = 3;  // SD_LISTEN_FDS_START

std::optional<long> env_number(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr) return std::nullopt;
  std::string_view view(text);
  long value = 0;
  auto [end, ec] = std::from_chars(view.data(), view.data() + view.size(), value);
  if (ec != std::errc() || end != view.data() + view.size()) return std::nullopt;
  return value;
}

int socket_option(int fd, int option) {
  int value = 0;
  socklen_t len = sizeof value;
  if (::getsockopt(fd, SOL_SOCKET, option, &value, &len) != 0) return -1;
  return value;
}

}  // namespace

InheritedSockets InheritedSockets::from_environment() {
  InheritedSockets set;
  std::optional<long> pid = env_number("LISTEN_PID");
  std::optional<long> count = env_number("LISTEN_FDS");
  ::unsetenv("LISTEN_PID");
  ::unsetenv("LISTEN_FDS");
  ::unsetenv("LISTEN_FDNAMES");
  if (!pid || !count || *pid != ::getpid() || *count <= 0 || *count > 4096) return set;
  for (int fd = kFirstFd; fd < kFirstFd + *count; ++fd) {
    if (::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
      ++set.ignored_;  // not open
      continue;
    }
    Socket socket(fd);
    const int domain = socket_option(fd, SO_DOMAIN);
    if (socket_option(fd, SO_ACCEPTCONN) != 1 || socket_option(fd, SO_TYPE) != SOCK_STREAM ||
        (domain != AF_INET && domain != AF_INET6)) {
      ++set.ignored_;  // closed with `socket`
      continue;
    }
    // The flag is the open socket's, shared with whoever handed it over
    // (who accepts without blocking too).
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    const InetAddress address = sockets::local_address(fd);
    set.sockets_.emplace_back(address, std::move(socket));
  }
  return set;
}

std::optional<Socket> InheritedSockets::take(const InetAddress& address) {
  for (auto it = sockets_.begin(); it != sockets_.end(); ++it) {
    if (it->first == address) {
      Socket socket = std::move(it->second);
      sockets_.erase(it);
      return socket;
    }
  }
  return std::nullopt;
}

std::vector<InetAddress> InheritedSockets::close_rest() {
  std::vector<InetAddress> addresses;
  for (auto& [address, socket] : sockets_) addresses.push_back(address);
  sockets_.clear();
  return addresses;
}

}  // namespace tern::net
