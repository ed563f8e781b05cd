// Htpasswd: files as htpasswd(1) (apache2-utils) writes them, each scheme
// checked against hashes it made (the vectors below), wrong passwords and
// unknown users refused, weak schemes warned of, and lines it does not
// write refused with the file and line.
#include "auth/htpasswd.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tern::auth {
namespace {

// htpasswd -nb [-B -C 5 | -2 | -5 | -m | -s] bob 'open sesame', and
// alice's 'pässword:1' (a colon and UTF-8 in a password are fine).
constexpr const char* kFile =
    "# made by htpasswd\n"
    "bob:$2y$05$UWKnkFMl9H53YIiYpuAjqeSZCFSDmIjqh2GxcpbDQD0EeECyRtgGm\n"
    "\n"
    "bob256:$5$3ZS1Pvy.FAibITxV$c1boSRAC4q6m0cAfHhv8861YzNtDbwFhUeIdtCMQhg9\r\n"
    "bob512:$6$6XLoZKKFRQC90cJR$jqSxUKJ6eOVxVjkRHpw3.Rw38Qy5sSPBVHV32B9rvEtIYasDUqViV/uFU68VatBxYSymGaqgindzTpGBeOQVb0\n"
    "bobmd5:$apr1$Y9DDMZM8$o8jZ1FNsiiXa4ZV9nkUIQ.\n"
    "bobsha:{SHA}W8r/fyL/UzygmbNAjq2HbA67qac=\n"
    "alice:$2y$05$zGEJGehCDKQSM854gfRrY.uAgBTq4SKdSyG5cni4QGb0oFz8OiPj.\n"
    "alicemd5:$apr1$Cb5sqXYC$gxefr3lfCyBTDPeWqI2vw.\n"
    "carol:$apr1$JwCthHZo$9ZNaGtm3zbXn5R4aYZCM31\n"  // an empty password
    "dave:$5$3ZS1Pvy.FAibITxV$c1boSRAC4q6m0cAfHhv8861YzNtDbwFhUeIdtCMQhg9:Dave, ops\n";  // a comment

TEST(HtpasswdTest, EachSchemeHtpasswdWritesVerifies) {
  std::vector<std::string> warnings;
  const Htpasswd file = Htpasswd::parse(kFile, "users", &warnings);
  EXPECT_EQ(file.size(), 9u);
  EXPECT_TRUE(file.verify("dave", "open sesame"));
  for (const char* user : {"bob", "bob256", "bob512", "bobmd5", "bobsha"}) {
    EXPECT_TRUE(file.verify(user, "open sesame")) << user;
    EXPECT_FALSE(file.verify(user, "open sesamE")) << user;
    EXPECT_FALSE(file.verify(user, "open sesame ")) << user;
    EXPECT_FALSE(file.verify(user, "")) << user;
  }
  EXPECT_TRUE(file.verify("alice", "pässword:1"));
  EXPECT_TRUE(file.verify("alicemd5", "pässword:1"));
  EXPECT_FALSE(file.verify("alice", "pässword"));
  EXPECT_TRUE(file.verify("carol", ""));
  EXPECT_FALSE(file.verify("carol", "x"));
  // Names are exact.
  EXPECT_FALSE(file.verify("Bob", "open sesame"));
  EXPECT_FALSE(file.verify("nobody", "open sesame"));
  EXPECT_FALSE(file.verify("bob", std::string("open sesame\0", 12)));
  // Four users of weak schemes, each named with its line.
  ASSERT_EQ(warnings.size(), 4u);
  EXPECT_EQ(warnings[0], "users:6: bobmd5: apr1 (MD5) is a weak hash; htpasswd -B makes bcrypt");
  EXPECT_EQ(warnings[1], "users:7: bobsha: {SHA} (unsalted SHA-1) is a weak hash; htpasswd -B makes bcrypt");
}

TEST(HtpasswdTest, LinesHtpasswdDoesNotWriteAreRefusedWithTheirLine) {
  auto error = [](const std::string& text) {
    try {
      (void)Htpasswd::parse(text, "users", nullptr);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("(parsed)");
  };
  EXPECT_EQ(error("bob:$2y$05$UWKnkFMl9H53YIiYpuAjqeSZCFSDmIjqh2GxcpbDQD0EeECyRtgGm\nnocolon\n"),
            "users:2: expected user:hash");
  EXPECT_EQ(error(":{SHA}W8r/fyL/UzygmbNAjq2HbA67qac=\n"), "users:1: expected user:hash");
  // DES crypt (htpasswd -d) and plain text (-p).
  EXPECT_NE(error("alice:/vgfAkma45c9U\n").find("users:1: alice: a hash tern does not take"), std::string::npos);
  EXPECT_NE(error("alice:secret\n").find("users:1: alice: a hash tern does not take"), std::string::npos);
  EXPECT_EQ(error("a:{SHA}W8r/fyL/UzygmbNAjq2HbA67qac=\na:{SHA}W8r/fyL/UzygmbNAjq2HbA67qac=\n"),
            "users:2: a: named twice");
  EXPECT_NE(error("").find("(parsed)"), std::string::npos);  // an empty file: nobody
}

TEST(HtpasswdTest, AFileThatCannotBeReadIsNamed) {
  try {
    (void)Htpasswd::load("/nonexistent/htpasswd", nullptr);
    FAIL() << "loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "/nonexistent/htpasswd: No such file or directory");
  }
}

TEST(HtpasswdTest, AHashThatIsNotOneNeverMatches) {
  EXPECT_FALSE(password_matches("", ""));
  EXPECT_FALSE(password_matches("$2y$05$short", "x"));
  EXPECT_FALSE(password_matches("$apr1$", ""));
  EXPECT_FALSE(password_matches("{SHA}", ""));
}

}  // namespace
}  // namespace tern::auth
