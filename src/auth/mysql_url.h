// MysqlUrl: the mysql:// (or mariadb://) URL that names a MariaDB or MySQL
// database for the users app ([auth] store), parsed. Value type; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace tern::auth {

// What a mysql:// (or mariadb://) URL names.
struct MysqlUrl {
  std::string user;      // percent-decoded; never empty
  std::string password;  // percent-decoded; may be empty
  std::string host;      // "localhost" when connecting through a socket
  uint16_t port = 3306;
  std::string database;  // never empty
  std::string socket;    // a Unix socket path, or empty for TCP

  // "mysql://user@host:3306/db" or "mysql://user@localhost/db?socket=/path":
  // for log lines, without the password.
  std::string describe() const;
};

// Parses mysql://USER[:PASS]@HOST[:PORT]/DB[?socket=PATH]. USER, PASS, DB
// and PATH are percent-decoded ("p%2Fss" is "p/ss"); HOST may be an [IPv6]
// literal. As in most URL parsers, the authority ends at the first '/' or
// '?' and the user part at its last '@', so an '@' or ':' in a password may
// stay as it is but a '/', '?' or '#' must be percent-encoded.
//
// Without socket= the connection is TCP, even to "localhost" (the client
// library would otherwise quietly use its compiled-in socket path); with
// socket= the host must be "localhost" or empty, and no port may be given.
// Errors are EINVAL, with `what` saying what is wrong ("mysql URL: the port
// must be a number from 1 to 65535").
Result<MysqlUrl> parse_mysql_url(std::string_view url);

}  // namespace tern::auth
