// Test support: runs a check as an unprivileged user.
//
// Tests run as root in CI containers, and root ignores permission bits, so a
// "chmod 000 means 403" test would pass for the wrong reason or not at all.
// run_unprivileged() forks; the child drops to uid/gid 65534 ("nobody") and
// runs the check, whose return value becomes the child's exit status. When
// not root the check simply runs in-process.
#pragma once

#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>

namespace tern::testing {

// Exit status meaning "could not drop privileges"; the caller should skip.
inline constexpr int kCannotDropPrivileges = 77;

// Returns check()'s result (0..255; 0 for success by convention) or
// kCannotDropPrivileges. The check must not use gtest assertions: they
// would be reported in the child and lost.
inline int run_unprivileged(const std::function<int()>& check) {
  if (::geteuid() != 0) return check();
  pid_t pid = ::fork();
  if (pid < 0) return kCannotDropPrivileges;
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) {
      ::_exit(kCannotDropPrivileges);
    }
    ::_exit(check() & 0xff);
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return kCannotDropPrivileges;
  return WEXITSTATUS(status);
}

}  // namespace tern::testing
