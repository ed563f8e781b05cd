// AcmeStorage (the ACME account, certificates, challenge tokens and lock
// on disk) and make_private_dirs, which it shares with the cache zones.
#include "server/acme/acme_storage.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "server/process/privileges.h"
#include "support/temp_dir.h"

namespace tern::server {
namespace {

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

uid_t owner_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_uid;
}

TEST(MakePrivateDirs, MakesEachMissingDirectory0700AndGivesThemToTheOwner) {
  testing::TempDir dir;
  ASSERT_TRUE(dir.mkdir("kept"));
  make_private_dirs(dir.at("kept/a/b"), std::nullopt, "test");
  EXPECT_EQ(mode_of(dir.at("kept")), 0755u);  // there already: left as it was
  EXPECT_EQ(mode_of(dir.at("kept/a")), 0700u);
  EXPECT_EQ(mode_of(dir.at("kept/a/b")), 0700u);
  make_private_dirs(dir.at("kept/a/b"), std::nullopt, "test");  // again: nothing to do

  if (::geteuid() != 0) GTEST_SKIP() << "giving directories away needs root";
  const Identity nobody{"nobody", 65534, "nogroup", 65534};
  make_private_dirs(dir.at("given/x"), nobody, "test");
  EXPECT_EQ(owner_of(dir.at("given")), 65534u);  // made here: given, so the user can reach x
  EXPECT_EQ(owner_of(dir.at("given/x")), 65534u);
  EXPECT_EQ(owner_of(dir.path()), 0u);  // not made here: not given
}

TEST(MakePrivateDirs, AFailureNamesTheDirectory) {
  testing::TempDir dir;
  ASSERT_TRUE(dir.write("file", "x"));
  try {
    make_private_dirs(dir.at("file/below"), std::nullopt, "cache pages");
    FAIL() << "a directory under a file was made";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cache pages: mkdir " + dir.at("file/below")), std::string::npos)
        << e.what();
  }
}

TEST(AcmeStorage, WritesFilesWholeWithTheirModeAndReadsThemBack) {
  testing::TempDir dir;
  const AcmeStorage storage(dir.at("acme/"));
  storage.prepare();
  EXPECT_EQ(mode_of(dir.at("acme")), 0700u);
  EXPECT_EQ(mode_of(dir.at("acme/certificates")), 0700u);
  EXPECT_EQ(mode_of(dir.at("acme/challenges")), 0700u);
  const std::string key = storage.key_path("a.tern.test");
  EXPECT_EQ(key, dir.at("acme/certificates/a.tern.test/key.pem"));
  AcmeStorage::write_file(key, "secret", 0600);
  EXPECT_EQ(mode_of(key), 0600u);
  EXPECT_EQ(AcmeStorage::read_file(key), "secret");
  AcmeStorage::write_file(key, "another", 0600);  // replaced whole
  EXPECT_EQ(AcmeStorage::read_file(key), "another");
  EXPECT_FALSE(AcmeStorage::read_file(dir.at("acme/none")).has_value());
}

TEST(AcmeStorage, OnlyBase64UrlTokensNameAChallengeFile) {
  const AcmeStorage storage("/var/lib/tern/acme");
  EXPECT_EQ(storage.challenge_path("abc-_09XZ"), "/var/lib/tern/acme/challenges/abc-_09XZ");
  EXPECT_EQ(storage.challenge_path("../account.key"), "");
  EXPECT_EQ(storage.challenge_path("a/b"), "");
  EXPECT_EQ(storage.challenge_path(""), "");
  EXPECT_EQ(storage.challenge_path(std::string(257, 'a')), "");
}

TEST(AcmeStorage, OneHolderOfTheLockAtATime) {
  testing::TempDir dir;
  const AcmeStorage storage(dir.path());
  std::optional<AcmeStorage::Lock> held = storage.try_lock();
  ASSERT_TRUE(held.has_value());
  // Another open file description (as another node's) is refused while
  // it is held, even in the same process.
  EXPECT_FALSE(storage.try_lock().has_value());
  held.reset();
  EXPECT_TRUE(storage.try_lock().has_value());
}

}  // namespace
}  // namespace tern::server
