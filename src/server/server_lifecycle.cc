// Server's life as a process: the signals it answers (server.h lists
// them), the stop, and what it tells a service manager.
#include <sys/wait.h>

#include <csignal>
#include <string>

#ifdef TERN_PROFILER
#include <gperftools/profiler.h>
#endif

#include "base/log.h"
#include "base/task_pool.h"
#include "http/http_server.h"
#include "net/event_loop.h"
#include "server/observability/metrics.h"
#include "server/cache_zones.h"
#include "server/server.h"
#include "server/acme/acme_manager.h"
#include "server/process/service_notify.h"
#include "server/process/upgrade.h"

namespace tern::server {
namespace {

constexpr std::chrono::milliseconds kDrainPoll{50};

}  // namespace

void Server::on_signal(int signo) {
  if (signo == SIGRTMIN) return toggle_profiler();
  switch (signo) {
    case SIGHUP:
      service_notify::reloading();
      reload();
      return service_notify::ready(status_line());
    case SIGUSR1:
      return reopen_logs();
    case SIGUSR2:
      return upgrade();
    default:
      if (stopping_) {
        // Now means now: what waits for a task thread (password hashes
        // queued behind a login flood) is dropped, not worked through.
        const size_t dropped = tasks_ ? tasks_->discard_queued() : 0;
        TERN_LOG_WARN("second stop signal: exiting now{}",
                      dropped > 0 ? fmt::format(" ({} queued task(s) dropped)", dropped) : "");
        return loop_->quit();
      }
      return stop_gracefully(signo != SIGQUIT);
  }
}

void Server::toggle_profiler() {
#ifdef TERN_PROFILER
  // gperftools samples every thread that exists when it starts (it sets an
  // interval timer per process), so the I/O loops are in the profile.
  if (profiling_) {
    ProfilerStop();
    TERN_LOG_WARN("SIGRTMIN: CPU profile written to {}", profile_path_);
  } else {
    profile_path_ = "tern-" + std::to_string(::getpid()) + "-" +
                    std::to_string(loop_->clock().wall_seconds()) + ".prof";
    ProfilerStart(profile_path_.c_str());
    TERN_LOG_WARN("SIGRTMIN: CPU profiling to {} until the next SIGRTMIN", profile_path_);
  }
  profiling_ = !profiling_;
#else
  TERN_LOG_WARN("SIGRTMIN: this tern was built without -DTERN_PROFILER=ON");
#endif
}

void Server::reopen_logs() {
  try {
    access_log_.reopen();
    log::reopen();
    TERN_LOG_INFO("SIGUSR1: log files reopened");
  } catch (const std::exception& e) {
    TERN_LOG_ERROR("SIGUSR1: cannot reopen log files: {}", e.what());
  }
}

void Server::stop_gracefully(bool bounded) {
  stopping_ = true;
  stop_bounded_ = bounded;
  stop_deadline_ = std::chrono::steady_clock::now() + config_->shutdown_timeout;
  if (bounded) {
    TERN_LOG_INFO("stopping: finishing in-flight requests (up to {} ms)", config_->shutdown_timeout.count());
  } else {
    TERN_LOG_INFO("stopping: finishing in-flight requests (SIGQUIT: however long they take)");
  }
  if (status_timer_.valid()) loop_->cancel(status_timer_);
  status_timer_ = net::TimerId{};
  service_notify::stopping("stopping: " + status_line());
  http_->tcp_server().stop_accepting();
  http_->drain();
  check_drained();
}

void Server::check_drained() {
  size_t open = http_->tcp_server().connection_count();
  if (open == 0) {
    TERN_LOG_INFO("stopped: all connections closed");
    return loop_->quit();
  }
  if (stop_bounded_ && std::chrono::steady_clock::now() >= stop_deadline_) {
    TERN_LOG_WARN("stopped: closing {} connection(s) still open at the deadline", open);
    return loop_->quit();
  }
  loop_->run_after(kDrainPoll, [this] { check_drained(); });
}

std::string Server::status_line() const {
  std::string addresses;
  for (const net::InetAddress& a : listen_addresses()) addresses += (addresses.empty() ? "" : ", ") + a.to_ip_port();
  const size_t open = http_->tcp_server().connection_count();
  const uint64_t answered = metrics_->responses();
  return fmt::format("{} connection{} open, {} request{} answered; listening on {}", open, open == 1 ? "" : "s",
                     answered, answered == 1 ? "" : "s", addresses);
}

void Server::announce_ready() {
  // As the user the process became: the zones' files are that user's.
  if (caches_) caches_->start();
  ready_ = true;
  if (acme_) acme_->start();
  service_notify::ready(status_line());
  if (service_notify::enabled() && !status_timer_.valid()) {
    status_timer_ = loop_->run_every(std::chrono::seconds(5), [this] { service_notify::status(status_line()); });
  }
}

void Server::set_command_line(std::string executable, std::vector<std::string> argv) {
  executable_ = std::move(executable);
  argv_ = std::move(argv);
}

void Server::upgrade() {
  if (stopping_) return;
  if (upgrade_child_ > 0) {
    TERN_LOG_WARN("SIGUSR2: process {}, started by an earlier SIGUSR2, still runs: stop it or this one first",
                  upgrade_child_);
    return;
  }
  if (executable_.empty()) {
    TERN_LOG_ERROR("SIGUSR2: cannot upgrade: the path of this executable is unknown");
    return;
  }
  const std::vector<int> sockets = listening_descriptors();
  // The new process writes the pid file; this one's goes aside, where
  // `tern -s quit --pid-file PID_FILE.oldbin` finds it.
  if (pid_file_ && !pid_file_->move_aside()) return;
  Result<pid_t> child = start_upgrade(executable_, argv_, sockets);
  if (!child) {
    TERN_LOG_ERROR("SIGUSR2: cannot start {}: {}", executable_, child.error().message());
    if (pid_file_) pid_file_->move_back();
    return;
  }
  upgrade_child_ = *child;
  TERN_LOG_WARN("SIGUSR2: started {} as process {} with this one's {} listening socket(s); both serve until "
                "one is told to quit{}",
                executable_, upgrade_child_, sockets.size(),
                pid_file_ && !pid_file_->path().empty() ? " (this one: tern -s quit --pid-file " + pid_file_->path() + ")"
                                                        : "");
  upgrade_timer_ = loop_->run_every(std::chrono::milliseconds(200), [this] { watch_upgrade(); });
}

// A new binary that fails to start (a config it rejects, a port it cannot
// bind) exits: this process then is the server again, pid file and all.
void Server::watch_upgrade() {
  int status = 0;
  const pid_t done = ::waitpid(upgrade_child_, &status, WNOHANG);
  if (done == 0) return;
  if (done < 0 && errno == EINTR) return;
  const std::string how = done < 0                ? "is gone"
                          : WIFEXITED(status)     ? fmt::format("exited with status {}", WEXITSTATUS(status))
                          : WIFSIGNALED(status)   ? fmt::format("was killed by signal {}", WTERMSIG(status))
                                                  : "ended";
  TERN_LOG_WARN("upgrade: process {} {}; this one (pid {}) serves on", upgrade_child_, how, ::getpid());
  if (pid_file_) pid_file_->move_back();
  upgrade_child_ = 0;
  loop_->cancel(upgrade_timer_);
  upgrade_timer_ = net::TimerId{};
}

}  // namespace tern::server
