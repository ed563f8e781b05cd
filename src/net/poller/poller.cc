#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "base/assert.h"
#include "base/log.h"
#include "net/buffer.h"
#include "net/channel.h"
#include "net/poller.h"
#include "net/poller/epoll_poller.h"
#include "net/poller/io_uring_poller.h"

namespace tern::net {
namespace {

std::atomic<IoBackend> g_default{IoBackend::kDefault};

// Unset: io_uring, where the kernel offers it (bench/results/io-profile.md:
// as cheap or cheaper per request on every row measured).
IoBackend from_environment() {
  const char* name = std::getenv("TERN_IO");
  if (name == nullptr || *name == '\0') return IoBackend::kIoUring;
  if (auto backend = parse_io_backend(name)) return *backend;
  static std::once_flag once;
  std::call_once(once, [name] {
    TERN_LOG_WARN("TERN_IO={}: not \"epoll\" or \"io_uring\"; using epoll", name);
  });
  return IoBackend::kEpoll;
}

}  // namespace

std::string_view to_string(IoBackend backend) {
  switch (backend) {
    case IoBackend::kDefault:
      return "default";
    case IoBackend::kEpoll:
      return "epoll";
    case IoBackend::kIoUring:
      return "io_uring";
  }
  return "?";
}

std::optional<IoBackend> parse_io_backend(std::string_view name) {
  if (name == "epoll") return IoBackend::kEpoll;
  if (name == "io_uring") return IoBackend::kIoUring;
  return std::nullopt;
}

void set_default_io_backend(IoBackend backend) { g_default.store(backend); }

IoBackend default_io_backend() {
  IoBackend chosen = g_default.load();
  return chosen != IoBackend::kDefault ? chosen : from_environment();
}

void Poller::start_send(Channel&, const char*, size_t, bool) {
  TERN_CHECK_MSG(false, "this poller does not send");
}

void Poller::abandon_send(Channel&, Buffer&&) { TERN_CHECK_MSG(false, "this poller does not send"); }

void Poller::forget_channel(Channel* channel) {
  channel->set_poller_state(Channel::PollerState::kNew);
}

std::unique_ptr<Poller> Poller::create(IoBackend backend) {
  // Asked for by name (a config, a flag, TERN_IO), a refused io_uring is
  // worth a warning; as the plain default, a line of information.
  const bool asked = backend != IoBackend::kDefault || g_default.load() != IoBackend::kDefault ||
                     (std::getenv("TERN_IO") != nullptr && *std::getenv("TERN_IO") != '\0');
  if (backend == IoBackend::kDefault) backend = default_io_backend();
  if (backend == IoBackend::kIoUring) {
    int err = 0;
    if (auto poller = IoUringPoller::create(&err)) return poller;
    static std::once_flag once;
    std::call_once(once, [err, asked] {
      if (asked) {
        TERN_LOG_WARN("io_uring unavailable ({}); using epoll", std::strerror(err));
      } else {
        TERN_LOG_INFO("io_uring unavailable ({}); using epoll", std::strerror(err));
      }
    });
  }
  return std::make_unique<EpollPoller>();
}

}  // namespace tern::net
