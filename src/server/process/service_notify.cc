#include "server/process/service_notify.h"

#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>

#include "base/log.h"

namespace tern::server::service_notify {
namespace {

void send(const std::string& state) {
  if (int r = ::sd_notify(0, state.c_str()); r < 0) {
    TERN_LOG_WARN("service manager: cannot notify ({}): error {}", state.substr(0, state.find('\n')), -r);
  }
}

// The line must not end the message early.
std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n') c = ' ';
  }
  return text;
}

}  // namespace

bool enabled() { return std::getenv("NOTIFY_SOCKET") != nullptr; }

void ready(const std::string& status) {
  // MAINPID: after a binary upgrade the ready process is the old one's
  // child, which systemd takes as the service's process (NotifyAccess=all).
  send("READY=1\nMAINPID=" + std::to_string(::getpid()) + "\nSTATUS=" + one_line(status));
}

void reloading() {
  // MONOTONIC_USEC lets systemd (253 and later, Type=notify-reload) match
  // this message to the reload it asked for.
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  const long long usec = static_cast<long long>(now.tv_sec) * 1'000'000 + now.tv_nsec / 1000;
  send("RELOADING=1\nSTATUS=reloading the configuration\nMONOTONIC_USEC=" + std::to_string(usec));
}

void stopping(const std::string& status) { send("STOPPING=1\nSTATUS=" + one_line(status)); }

void status(const std::string& status) { send("STATUS=" + one_line(status)); }

}  // namespace tern::server::service_notify
