// Privileges: who the process is once it serves. Started as root (to bind
// port 80 or 443 and read keys only root may read), tern binds its
// listeners, opens its log files, loads its certificates and opens its
// database first, then becomes `user` (and `group`, and the user's
// supplementary groups) for good, before it serves a byte: every thread,
// with no capability left and no way back (setuid(0) fails, and
// PR_SET_NO_NEW_PRIVS keeps an execve from gaining any).
//
// What tern opens later, it opens as that user: log files reopened on
// SIGUSR1, certificates and roots re-read on SIGHUP, temp files, FastCGI
// sockets, a newly added port below 1024 (which then fails: a restart binds
// it). Started as root without `user`, tern stays root and says so in a
// warning: it does not guess an account (nginx would pick nobody) whose
// rights over the root, the database and the sockets nobody checked.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace tern::server {

struct Identity {
  std::string user;
  uid_t uid = 0;
  std::string group;
  gid_t gid = 0;
};

// The account `user` names and `group` (empty: the user's primary group),
// or nullopt with `*error` saying which name is unknown.
std::optional<Identity> resolve_identity(const std::string& user, const std::string& group, std::string* error);

// Who the files tern makes before it drops its privileges must belong to:
// `user`/`group` when the process runs as root with a user to become,
// nullopt when it stays who it is (then what it makes is its own already).
// A name this system does not know is nullopt too: drop_privileges reports it.
std::optional<Identity> future_owner(const std::string& user, const std::string& group);

// mkdir -p, each directory made with mode 0700; those it makes, and `path`
// itself, are chowned to `owner` when there is one. Throws
// std::runtime_error naming the directory that failed, after `what`.
void make_private_dirs(const std::string& path, const std::optional<Identity>& owner, const std::string& what);

// With a `user` to become, as root: sets PR_SET_NO_NEW_PRIVS, which no
// later execve can undo. Per thread and inherited, so called before any
// thread starts. Throws std::runtime_error.
void forbid_new_privileges(const std::string& user);

// Becomes `user`/`group` when the process runs as root; logs what it did or
// why it did nothing. Throws std::runtime_error when a step fails (the
// process must not serve half-dropped).
void drop_privileges(const std::string& user, const std::string& group);

}  // namespace tern::server
