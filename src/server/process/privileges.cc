#include "server/process/privileges.h"

#include <grp.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "base/log.h"

namespace tern::server {
namespace {

std::runtime_error failure(const std::string& what) {
  return std::runtime_error("privileges: " + what + ": " + std::strerror(errno));
}

std::string group_names(const std::vector<gid_t>& groups) {
  std::string out;
  for (gid_t gid : groups) {
    const struct group* g = ::getgrgid(gid);
    if (!out.empty()) out += ", ";
    out += g != nullptr ? std::string(g->gr_name) : std::to_string(gid);
  }
  return out.empty() ? "none" : out;
}

}  // namespace

std::optional<Identity> resolve_identity(const std::string& user, const std::string& group, std::string* error) {
  Identity id;
  const struct passwd* pw = ::getpwnam(user.c_str());
  if (pw == nullptr) {
    *error = "no user \"" + user + "\" on this system";
    return std::nullopt;
  }
  id.user = user;
  id.uid = pw->pw_uid;
  id.gid = pw->pw_gid;
  const struct group* gr = group.empty() ? ::getgrgid(pw->pw_gid) : ::getgrnam(group.c_str());
  if (gr == nullptr) {
    *error = group.empty() ? "user \"" + user + "\" has a primary group (" + std::to_string(pw->pw_gid) +
                                 ") this system does not name"
                           : "no group \"" + group + "\" on this system";
    return std::nullopt;
  }
  id.group = gr->gr_name;
  id.gid = gr->gr_gid;
  return id;
}

std::optional<Identity> future_owner(const std::string& user, const std::string& group) {
  if (user.empty() || ::geteuid() != 0) return std::nullopt;
  std::string error;
  return resolve_identity(user, group, &error);
}

void make_private_dirs(const std::string& path, const std::optional<Identity>& owner, const std::string& what) {
  const auto fail = [&](const char* step, const std::string& dir) {
    throw std::runtime_error(what + ": " + step + " " + dir + ": " + std::strerror(errno));
  };
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string part = path.substr(0, slash);
    const bool last = slash == std::string::npos;
    if (!part.empty()) {
      const bool made = ::mkdir(part.c_str(), 0700) == 0;
      if (!made && errno != EEXIST) fail("mkdir", part);
      if ((made || last) && owner && ::chown(part.c_str(), owner->uid, owner->gid) != 0) fail("chown", part);
    }
    if (last) return;
  }
}

void forbid_new_privileges(const std::string& user) {
  if (user.empty() || ::geteuid() != 0) return;
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) throw failure("PR_SET_NO_NEW_PRIVS");
}

void drop_privileges(const std::string& user, const std::string& group) {
  const uid_t euid = ::geteuid();
  if (user.empty()) {
    if (euid == 0) {
      TERN_LOG_WARN("privileges: running as root; set user (and group) in the config so that tern "
                    "gives root up once its ports are bound and its files open");
    }
    return;
  }
  std::string error;
  std::optional<Identity> id = resolve_identity(user, group, &error);
  if (!id) throw std::runtime_error("privileges: " + error);
  if (euid != 0) {
    // As nginx: only root can become someone else.
    if (euid != id->uid) {
      TERN_LOG_WARN("privileges: user = \"{}\" ignored: tern was not started as root (it runs as uid {})",
                    user, euid);
    }
    return;
  }
  if (id->uid == 0) {
    TERN_LOG_WARN("privileges: user = \"{}\" is root: tern keeps every privilege", user);
    return;
  }
  // glibc applies each of these to every thread of the process, the I/O
  // threads already running included.
  if (::initgroups(id->user.c_str(), id->gid) != 0) throw failure("initgroups(" + id->user + ")");
  if (::setresgid(id->gid, id->gid, id->gid) != 0) throw failure("setresgid(" + std::to_string(id->gid) + ")");
  // With every uid non-zero the kernel clears the capability sets.
  if (::setresuid(id->uid, id->uid, id->uid) != 0) throw failure("setresuid(" + std::to_string(id->uid) + ")");
  if (::setuid(0) == 0 || ::geteuid() == 0) throw std::runtime_error("privileges: root could be taken back");

  std::vector<gid_t> groups(static_cast<size_t>(std::max(::getgroups(0, nullptr), 0)));
  if (!groups.empty()) groups.resize(static_cast<size_t>(std::max(::getgroups(static_cast<int>(groups.size()), groups.data()), 0)));
  TERN_LOG_INFO("privileges: now user {} (uid {}), group {} (gid {}), supplementary groups: {}", id->user, id->uid,
                id->group, id->gid, group_names(groups));
}

}  // namespace tern::server
