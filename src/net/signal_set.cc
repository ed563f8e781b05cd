#include "net/signal_set.h"

#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/assert.h"
#include "net/event_loop.h"

namespace tern::net {
namespace {

sigset_t make_set(std::initializer_list<int> signals) {
  sigset_t set;
  sigemptyset(&set);
  for (int signo : signals) sigaddset(&set, signo);
  return set;
}

int open_signalfd(std::initializer_list<int> signals) {
  sigset_t set = make_set(signals);
  int fd = ::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  TERN_CHECK_MSG(fd >= 0, "signalfd: {}", std::strerror(errno));
  return fd;
}

}  // namespace

void SignalSet::block(std::initializer_list<int> signals) {
  sigset_t set = make_set(signals);
  int rc = ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  TERN_CHECK_MSG(rc == 0, "pthread_sigmask: {}", std::strerror(rc));
}

SignalSet::SignalSet(EventLoop* loop, std::initializer_list<int> signals, Handler handler)
    : loop_(loop), fd_((block(signals), open_signalfd(signals))), channel_(loop, fd_.fd()),
      handler_(std::move(handler)) {
  loop_->assert_in_loop_thread();
  channel_.set_read_callback([this] { handle_read(); });
  channel_.enable_reading();
}

SignalSet::~SignalSet() { channel_.remove(); }

void SignalSet::handle_read() {
  signalfd_siginfo info;
  while (::read(fd_.fd(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    handler_(static_cast<int>(info.ssi_signo));
  }
}

}  // namespace tern::net
