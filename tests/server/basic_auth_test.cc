// basic_credentials(): the Authorization field of the Basic scheme (RFC
// 7617) decoded, and everything else refused.
#include "server/access/basic_auth.h"

#include <gtest/gtest.h>

#include <string>

namespace tern::server {
namespace {

struct Decoded {
  bool ok = false;
  std::string user;
  std::string password;
};

Decoded decode(std::string_view field) {
  std::string scratch;
  std::string_view user, password;
  Decoded d;
  d.ok = basic_credentials(field, &scratch, &user, &password);
  if (d.ok) {
    d.user = user;
    d.password = password;
  }
  return d;
}

TEST(BasicCredentialsTest, DecodesUserAndPasswordOfTheBasicScheme) {
  Decoded d = decode("Basic YWxpY2U6b3BlbiBzZXNhbWU=");  // alice:open sesame
  EXPECT_TRUE(d.ok);
  EXPECT_EQ(d.user, "alice");
  EXPECT_EQ(d.password, "open sesame");
  // The scheme without regard to case, spaces around the token.
  d = decode("bASIC   YWxpY2U6b3BlbiBzZXNhbWU=  ");
  EXPECT_TRUE(d.ok && d.user == "alice");
  // A password may hold colons and be empty; the user is up to the first.
  d = decode("Basic YTpiOmM=");  // a:b:c
  EXPECT_TRUE(d.ok && d.user == "a" && d.password == "b:c");
  d = decode("Basic YTo=");  // a:
  EXPECT_TRUE(d.ok && d.user == "a" && d.password.empty());
}

TEST(BasicCredentialsTest, RefusesWhatIsNotOne) {
  for (std::string_view field : {"", "Basic", "Basic ", "BasicYTpi", "Bearer YTpi", "Basic YWJj",  // abc: no colon
                                 "Basic OmI=",                                                   // ":b": no user
                                 "Basic YTpi!", "Basic YT pi", "Basic YTpi===="}) {
    EXPECT_FALSE(decode(field).ok) << field;
  }
}

}  // namespace
}  // namespace tern::server
