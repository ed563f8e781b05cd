#include "net/acceptor.h"

#include <fcntl.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "net/event_loop.h"
#include "net/sockets.h"

namespace tern::net {
namespace {

constexpr EventLoop::Millis kPauseAfterExhaustion{100};

int open_spare() { return ::open("/dev/null", O_RDONLY | O_CLOEXEC); }

}  // namespace

Result<Socket> Acceptor::bind_listen(const InetAddress& addr, bool reuse_port, int backlog) {
  auto fd = sockets::create_tcp(addr.family());
  if (!fd) return fd.error();
  Socket socket(*fd);
  if (auto r = sockets::set_reuse_addr(socket.fd(), true); !r) return r.error();
  if (reuse_port) {
    if (auto r = sockets::set_reuse_port(socket.fd(), true); !r) return r.error();
  }
  if (addr.is_ipv6()) {
    if (auto r = sockets::set_ipv6_only(socket.fd(), true); !r) return r.error();
  }
  if (auto r = sockets::bind(socket.fd(), addr); !r) return r.error();
  if (auto r = sockets::listen(socket.fd(), backlog); !r) return r.error();
  return socket;
}

Acceptor::Acceptor(EventLoop* loop, Socket listening_socket)
    : loop_(loop),
      socket_(std::move(listening_socket)),
      channel_(loop, socket_.fd()),
      spare_fd_(open_spare()) {
  channel_.set_read_callback([this] { handle_read(); });
}

Acceptor::~Acceptor() {
  if (resume_timer_.valid()) loop_->cancel(resume_timer_);
  channel_.remove();
}

void Acceptor::listen() {
  loop_->assert_in_loop_thread();
  listening_ = true;
  channel_.enable_reading();
}

void Acceptor::handle_read() {
  loop_->assert_in_loop_thread();
  for (int i = 0; i < kAcceptBurst; ++i) {
    InetAddress peer;
    int err = 0;
    int fd = sockets::accept(socket_.fd(), &peer, &err);
    if (fd >= 0) {
      if (callback_) {
        callback_(Socket(fd), peer);
      } else {
        sockets::close(fd);
      }
      continue;
    }
    if (err == EAGAIN || err == EWOULDBLOCK) return;
    if (!handle_accept_error(err)) return;
  }
}

bool Acceptor::handle_accept_error(int err) {
  switch (err) {
    case EMFILE:
    case ENFILE:
      ++exhaustion_events_;
      if (release_) {
        if (const size_t freed = release_(); freed > 0) {
          TERN_LOG_EVERY_SECOND(spdlog::level::warn,
                                "accept on fd {}: {}; {} cached descriptors let go of for connections",
                                socket_.fd(), std::strerror(err), freed);
          return true;
        }
      }
      TERN_LOG_EVERY_SECOND(spdlog::level::warn,
                            "accept on fd {}: {}; refusing connections until descriptors free up",
                            socket_.fd(), std::strerror(err));
      if (shed_one()) return true;
      pause_accepting();
      return false;
    case ENOBUFS:
    case ENOMEM:
      ++exhaustion_events_;
      TERN_LOG_EVERY_SECOND(spdlog::level::warn, "accept on fd {}: {}; pausing 100 ms",
                            socket_.fd(), std::strerror(err));
      pause_accepting();
      return false;
    default:
      // EPERM (firewall), EPROTO and friends concern one connection only.
      TERN_LOG_EVERY_SECOND(spdlog::level::warn, "accept on fd {}: {}", socket_.fd(),
                            std::strerror(err));
      return true;
  }
}

bool Acceptor::shed_one() {
  if (!spare_fd_.valid()) return false;
  spare_fd_.reset();
  int err = 0;
  int fd = sockets::accept(socket_.fd(), nullptr, &err);
  if (fd >= 0) {
    sockets::close(fd);
    loop_->load().shed.add();
  }
  spare_fd_.reset(open_spare());
  return fd >= 0;
}

void Acceptor::pause_accepting() {
  if (!channel_.is_reading()) return;
  channel_.disable_reading();
  resume_timer_ = loop_->run_after(kPauseAfterExhaustion, [this] {
    resume_timer_ = TimerId{};
    if (!spare_fd_.valid()) spare_fd_.reset(open_spare());
    if (listening_) channel_.enable_reading();
  });
}

}  // namespace tern::net
