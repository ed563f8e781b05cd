#include "net/socket_address.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

#include "support/temp_dir.h"

namespace tern::net {
namespace {

// The path a unix address holds, read back from the sockaddr itself.
std::string sun_path_of(const SocketAddress& a) {
  const auto* un = reinterpret_cast<const sockaddr_un*>(a.sockaddr_ptr());
  return std::string(un->sun_path);
}

TEST(SocketAddress, ParsesAUnixPath) {
  auto a = SocketAddress::parse("unix:/run/php/php-fpm.sock");
  ASSERT_TRUE(a.ok()) << a.error().message();
  EXPECT_TRUE(a->is_unix());
  EXPECT_EQ(a->family(), AF_UNIX);
  EXPECT_EQ(a->sockaddr_ptr()->sa_family, AF_UNIX);
  EXPECT_EQ(sun_path_of(*a), "/run/php/php-fpm.sock");
  // The family, the path and its terminating NUL: what connect() is given.
  EXPECT_EQ(a->socklen(), offsetof(sockaddr_un, sun_path) + std::strlen("/run/php/php-fpm.sock") + 1);
  EXPECT_EQ(a->to_string(), "unix:/run/php/php-fpm.sock");
}

TEST(SocketAddress, UnixPathWithoutThePrefixIsTheSame) {
  auto direct = SocketAddress::unix_path("/tmp/a.sock");
  auto parsed = SocketAddress::parse("unix:/tmp/a.sock");
  ASSERT_TRUE(direct.ok() && parsed.ok());
  EXPECT_EQ(*direct, *parsed);
  // A relative path is a path too (resolved by connect() against the cwd).
  auto relative = SocketAddress::parse("unix:php.sock");
  ASSERT_TRUE(relative.ok());
  EXPECT_EQ(relative->to_string(), "unix:php.sock");
}

TEST(SocketAddress, ParsesIpv4AndIpv6) {
  auto v4 = SocketAddress::parse("127.0.0.1:9000");
  ASSERT_TRUE(v4.ok()) << v4.error().message();
  EXPECT_FALSE(v4->is_unix());
  EXPECT_EQ(v4->family(), AF_INET);
  EXPECT_EQ(v4->socklen(), sizeof(sockaddr_in));
  EXPECT_EQ(v4->inet(), InetAddress(9000, true));
  EXPECT_EQ(v4->to_string(), "127.0.0.1:9000");

  auto v6 = SocketAddress::parse("[::1]:9000");
  ASSERT_TRUE(v6.ok()) << v6.error().message();
  EXPECT_FALSE(v6->is_unix());
  EXPECT_EQ(v6->family(), AF_INET6);
  EXPECT_EQ(v6->socklen(), sizeof(sockaddr_in6));
  EXPECT_EQ(v6->inet(), InetAddress(9000, true, true));
  EXPECT_EQ(v6->to_string(), "[::1]:9000");
}

TEST(SocketAddress, ConvertsFromAnInetAddress) {
  SocketAddress a = InetAddress(8080, true);
  EXPECT_FALSE(a.is_unix());
  EXPECT_EQ(a.inet(), InetAddress(8080, true));
  EXPECT_EQ(a.to_string(), "127.0.0.1:8080");
  EXPECT_EQ(a, *SocketAddress::parse("127.0.0.1:8080"));
}

TEST(SocketAddress, RejectsEmptyAndOverlongPaths) {
  auto empty = SocketAddress::parse("unix:");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code, EINVAL);
  EXPECT_FALSE(SocketAddress::unix_path("").ok());

  // sun_path holds 108 bytes with the NUL: 107 is the longest path.
  const size_t max = sizeof(sockaddr_un::sun_path) - 1;
  ASSERT_EQ(max, 107u);
  auto longest = SocketAddress::unix_path("/" + std::string(max - 1, 'a'));
  ASSERT_TRUE(longest.ok());
  EXPECT_EQ(sun_path_of(*longest).size(), max);
  EXPECT_EQ(longest->socklen(), sizeof(sockaddr_un));
  auto too_long = SocketAddress::unix_path("/" + std::string(max, 'a'));
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.error().code, EINVAL);
  EXPECT_FALSE(SocketAddress::parse("unix:/" + std::string(max, 'a')).ok());
}

TEST(SocketAddress, RejectsAPathWithANulByte) {
  using namespace std::string_literals;
  EXPECT_FALSE(SocketAddress::unix_path("/tmp/a\0b"s).ok());
  // An abstract-namespace name (leading NUL) is not supported either.
  EXPECT_FALSE(SocketAddress::unix_path("\0abstract"s).ok());
}

TEST(SocketAddress, RejectsWhatIsNeitherAPathNorAnAddress) {
  EXPECT_FALSE(SocketAddress::parse("").ok());
  EXPECT_FALSE(SocketAddress::parse("localhost:9000").ok());  // no DNS
  EXPECT_FALSE(SocketAddress::parse("127.0.0.1").ok());       // no port
  EXPECT_FALSE(SocketAddress::parse("/run/php.sock").ok());   // no "unix:"
  EXPECT_FALSE(SocketAddress::parse("unix/run/php.sock").ok());
  EXPECT_FALSE(SocketAddress::parse("127.0.0.1:99999").ok());
}

TEST(SocketAddress, ToStringRoundTrips) {
  for (const char* text : {"unix:/run/php/php-fpm.sock", "unix:relative.sock", "127.0.0.1:9000",
                           "10.1.2.3:1", "[::1]:9000", "[fe80::1]:65535"}) {
    auto a = SocketAddress::parse(text);
    ASSERT_TRUE(a.ok()) << text;
    EXPECT_EQ(a->to_string(), text);
    auto again = SocketAddress::parse(a->to_string());
    ASSERT_TRUE(again.ok()) << text;
    EXPECT_EQ(*again, *a) << text;
  }
}

TEST(SocketAddress, EqualityComparesFamilyPathAndPort) {
  auto a = *SocketAddress::parse("unix:/tmp/a");
  EXPECT_EQ(a, *SocketAddress::parse("unix:/tmp/a"));
  EXPECT_NE(a, *SocketAddress::parse("unix:/tmp/b"));
  EXPECT_NE(a, *SocketAddress::parse("unix:/tmp/ab"));  // a prefix is not equal
  EXPECT_NE(*SocketAddress::parse("unix:/tmp/ab"), a);
  auto ip = *SocketAddress::parse("127.0.0.1:9000");
  EXPECT_EQ(ip, *SocketAddress::parse("127.0.0.1:9000"));
  EXPECT_NE(ip, *SocketAddress::parse("127.0.0.1:9001"));
  EXPECT_NE(ip, *SocketAddress::parse("127.0.0.2:9000"));
  EXPECT_NE(ip, *SocketAddress::parse("[::1]:9000"));
  EXPECT_NE(ip, a);
}

TEST(SocketAddress, TheLongestPathCanBeBoundAndConnectedTo) {
  tern::testing::TempDir dir;
  ASSERT_TRUE(dir.ok());
  const size_t max = sizeof(sockaddr_un::sun_path) - 1;
  std::string path = dir.path() + "/";
  path += std::string(max - path.size(), 's');
  ASSERT_EQ(path.size(), max);
  auto addr = SocketAddress::unix_path(path);
  ASSERT_TRUE(addr.ok());

  int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  ASSERT_EQ(::bind(listener, addr->sockaddr_ptr(), addr->socklen()), 0) << std::strerror(errno);
  ASSERT_EQ(::listen(listener, 1), 0);
  int client = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(client, 0);
  EXPECT_EQ(::connect(client, addr->sockaddr_ptr(), addr->socklen()), 0) << std::strerror(errno);
  ::close(client);
  ::close(listener);
}

}  // namespace
}  // namespace tern::net
