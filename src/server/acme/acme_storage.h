// AcmeStorage: the directory ([acme] storage) where tern keeps what it
// gets from the CA. Several tern nodes may share it (a shared filesystem):
// one orders a certificate, all use it.
//
//   account.key                         the account's key (0600)
//   certificates/NAME/certificate.pem   a site's certificate and chain; NAME
//   certificates/NAME/key.pem           is its first name; the key 0600
//   challenges/TOKEN                    HTTP-01 answers being validated, for
//                                       whichever node the CA reaches
//   lock                                locked (fcntl) by the node that orders
//
// Directories are 0700; every file is written to a temporary name and
// renamed, so a reader sees the old file or the new one, never half of
// one. Any thread.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "server/process/privileges.h"

namespace tern::server {

class AcmeStorage {
 public:
  explicit AcmeStorage(std::string root);

  const std::string& root() const { return root_; }
  std::string account_key_path() const;
  std::string certificate_path(std::string_view name) const;
  std::string key_path(std::string_view name) const;
  // Empty for a token that is not base64url (it names no file).
  std::string challenge_path(std::string_view token) const;

  // Creates what does not exist of the directories, 0700, given to `owner`
  // when there is one (the user the process becomes). Throws
  // std::runtime_error naming the directory that fails.
  void prepare(const std::optional<Identity>& owner = std::nullopt) const;

  // `data` to `path` through a temporary file beside it, synced and renamed
  // over it, with `mode`. Throws std::runtime_error naming the path.
  static void write_file(const std::string& path, std::string_view data, mode_t mode);
  // The file's bytes; nullopt when it does not exist or cannot be read.
  static std::optional<std::string> read_file(const std::string& path);

  // The storage's lock, held while the node that has it orders: an open
  // file description's fcntl lock on `lock`, let go when the object goes
  // (or the process dies).
  class Lock {
   public:
    explicit Lock(int fd) : fd_(fd) {}
    Lock(Lock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
    Lock& operator=(Lock&& other) noexcept;
    ~Lock();

   private:
    int fd_;
  };
  // The lock, or nullopt when another process holds it. Throws
  // std::runtime_error when the file cannot be opened.
  std::optional<Lock> try_lock() const;

 private:
  std::string root_;
};

}  // namespace tern::server
