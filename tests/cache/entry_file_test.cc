#include "cache/entry_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace tern::cache {
namespace {

namespace fs = std::filesystem;

class EntryFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tern-entry-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  EntryHead head() const {
    EntryHead h;
    h.key = "httpshop.test/item?id=7";
    h.vary = {"Accept-Encoding", "Accept-Language"};
    h.variant = "gzip\nde";
    h.status = 404;
    h.fields = {{"Content-Type", "text/html"}, {"ETag", "\"v1\""}, {"X-Empty", ""}};
    h.stored = 1'700'000'000;
    h.expires = 1'700'000'600;
    h.stale_while_revalidate = 30;
    h.stale_if_error = 86400;
    h.flags = EntryHead::kNoStale;
    return h;
  }

  // The names of every file under the directory.
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(dir_)) {
      if (e.is_regular_file()) out.push_back(e.path().filename().string());
    }
    return out;
  }

  Result<EntryHead> read_back(const std::string& path) const {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0) << path;
    Result<EntryHead> out = read_entry_head(fd);
    ::close(fd);
    return out;
  }

  fs::path dir_;
};

TEST(KeyHash, IsTheSameForTheSameKeyAndReadsBackFromItsHex) {
  const KeyHash a = KeyHash::of("httpexample.com/");
  EXPECT_EQ(a, KeyHash::of("httpexample.com/"));
  EXPECT_NE(a, KeyHash::of("httpexample.com/?"));
  const std::string hex = a.hex();
  ASSERT_EQ(hex.size(), 32u);
  KeyHash back;
  ASSERT_TRUE(KeyHash::from_hex(hex, &back));
  EXPECT_EQ(back, a);
  EXPECT_FALSE(KeyHash::from_hex(hex.substr(1), &back));
  EXPECT_FALSE(KeyHash::from_hex("G" + hex.substr(1), &back));
  EXPECT_FALSE(KeyHash::from_hex("A" + hex.substr(1), &back));  // names are lowercase
  EXPECT_EQ(entry_path("/c", a), "/c/" + hex.substr(0, 2) + "/" + hex.substr(2, 2) + "/" + hex);
}

// KeyHash::of() remembers the hashes of the keys it hashed last: a key
// asked again, or one that shares its slot, gets its own BLAKE2b all the
// same (the names of the entries on disk depend on it).
TEST(KeyHash, IsBlake2bOfTheKeyWhetherRememberedOrNot) {
  auto blake2b = [](const std::string& key) {
    KeyHash h;
    crypto_generichash(h.bytes.data(), h.bytes.size(), reinterpret_cast<const unsigned char*>(key.data()),
                       key.size(), nullptr, 0);
    return h;
  };
  std::vector<std::string> keys = {"", std::string(512, 'k'), std::string(513, 'k'), std::string(4000, 'x')};
  for (int i = 0; i < 2000; ++i) keys.push_back("httpexample.com/page/" + std::to_string(i));
  for (int pass = 0; pass < 3; ++pass) {
    for (size_t i = 0; i < keys.size(); ++i) {
      const std::string& key = pass == 1 ? keys[keys.size() - 1 - i] : keys[i];
      ASSERT_EQ(KeyHash::of(key), blake2b(key)) << "pass " << pass << ", key of " << key.size() << " bytes";
      ASSERT_EQ(KeyHash::of(key), blake2b(key)) << "asked again: pass " << pass;
    }
  }
  EXPECT_NE(KeyHash::of(""), KeyHash{});
}

TEST_F(EntryFileTest, AnEntryReadsBackAsItWasWritten) {
  const KeyHash hash = KeyHash::of(head().key);
  EntryWriter writer;
  ASSERT_TRUE(writer.open(dir_.string(), hash, head()));
  ASSERT_TRUE(writer.append("<html>"));
  ASSERT_TRUE(writer.append(""));
  ASSERT_TRUE(writer.append("not found</html>"));
  Result<uint64_t> size = writer.commit();
  ASSERT_TRUE(size);
  const std::string path = entry_path(dir_.string(), hash);
  EXPECT_EQ(fs::file_size(path), *size);
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);

  Result<EntryHead> back = read_back(path);
  ASSERT_TRUE(back) << back.error().message();
  const EntryHead want = head();
  EXPECT_EQ(back->key, want.key);
  EXPECT_EQ(back->vary, want.vary);
  EXPECT_EQ(back->variant, want.variant);
  EXPECT_EQ(back->status, 404);
  EXPECT_EQ(back->fields, want.fields);
  EXPECT_EQ(back->field("etag"), "\"v1\"");
  EXPECT_EQ(back->field("Set-Cookie"), "");
  EXPECT_EQ(back->stored, want.stored);
  EXPECT_EQ(back->expires, want.expires);
  EXPECT_EQ(back->stale_while_revalidate, 30u);
  EXPECT_EQ(back->stale_if_error, 86400u);
  EXPECT_EQ(back->flags, EntryHead::kNoStale);
  EXPECT_EQ(back->body_size, 22u);
  std::ifstream in(path, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all.substr(back->body_offset), "<html>not found</html>");
  EXPECT_EQ(files(), std::vector<std::string>{hash.hex()});
}

// A revalidated entry gets a new head and the old file's body, copied (in
// the kernel where it can): the new file replaces the old one under its
// name, and a copy that runs past the old file's end is refused.
TEST_F(EntryFileTest, ABodyIsCopiedFromAnOlderEntrysFile) {
  const KeyHash hash = KeyHash::of(head().key);
  std::string body;
  for (int i = 0; body.size() < 300'000; ++i) body += "line " + std::to_string(i) + "\n";
  EntryWriter first;
  ASSERT_TRUE(first.open(dir_.string(), hash, head()));
  ASSERT_TRUE(first.append(body));
  ASSERT_TRUE(first.commit());
  const std::string path = entry_path(dir_.string(), hash);
  const int old = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(old, 0);
  const uint64_t offset = first.head_size();

  EntryHead renewed = head();
  renewed.fields.emplace_back("X-Revalidated", "yes");
  renewed.expires += 600;
  EntryWriter second;
  ASSERT_TRUE(second.open(dir_.string(), hash, renewed));
  ASSERT_TRUE(second.append_file(old, offset, body.size()));
  EXPECT_EQ(second.body_size(), body.size());
  ASSERT_TRUE(second.commit());
  Result<EntryHead> back = read_back(path);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(back->field("X-Revalidated"), "yes");
  EXPECT_EQ(back->expires, renewed.expires);
  std::ifstream in(path, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all.substr(back->body_offset), body);
  EXPECT_EQ(files(), std::vector<std::string>{hash.hex()});

  EntryWriter short_copy;
  ASSERT_TRUE(short_copy.open(dir_.string(), hash, renewed));
  EXPECT_FALSE(short_copy.append_file(old, offset, body.size() + 1));  // the old file has no byte more
  EXPECT_FALSE(short_copy.is_open());
  ::close(old);
  EXPECT_EQ(files(), std::vector<std::string>{hash.hex()});  // its temp file went
}

// Until commit() the entry has no name: a reader finds nothing, never half
// a response; a fill dropped on the way leaves no file at all.
TEST_F(EntryFileTest, AnEntryHasItsNameOnlyWhenComplete) {
  const KeyHash hash = KeyHash::of("k");
  const std::string path = entry_path(dir_.string(), hash);
  {
    EntryWriter writer;
    ASSERT_TRUE(writer.open(dir_.string(), hash, head()));
    ASSERT_TRUE(writer.append(std::string(100'000, 'x')));
    EXPECT_FALSE(fs::exists(path));
    ASSERT_EQ(files().size(), 1u);
    EXPECT_TRUE(is_temp_name(files()[0]));
  }
  EXPECT_TRUE(files().empty());
  // A new entry under the same name replaces the old one whole.
  for (const char* body : {"first", "second, longer"}) {
    EntryWriter writer;
    ASSERT_TRUE(writer.open(dir_.string(), hash, head()));
    ASSERT_TRUE(writer.append(body));
    ASSERT_TRUE(writer.commit());
  }
  Result<EntryHead> back = read_back(path);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->body_size, 14u);
  EXPECT_EQ(files().size(), 1u);
}

// A file cut short (a full disk, a crash of the machine) or grown, or not
// an entry at all, is refused rather than served.
TEST_F(EntryFileTest, AFileOfTheWrongSizeOrShapeIsRefused) {
  const KeyHash hash = KeyHash::of("k");
  EntryWriter writer;
  ASSERT_TRUE(writer.open(dir_.string(), hash, head()));
  ASSERT_TRUE(writer.append("0123456789"));
  ASSERT_TRUE(writer.commit());
  const std::string path = entry_path(dir_.string(), hash);
  const uintmax_t size = fs::file_size(path);
  ASSERT_TRUE(read_back(path));
  fs::resize_file(path, size - 1);
  EXPECT_FALSE(read_back(path));
  fs::resize_file(path, size + 1);
  EXPECT_FALSE(read_back(path));
  fs::resize_file(path, 30);
  EXPECT_FALSE(read_back(path));
  std::ofstream(path, std::ios::binary | std::ios::trunc) << std::string(200, 'T');
  EXPECT_FALSE(read_back(path));
  // A head whose counts promise more texts than it holds.
  fs::remove(path);
  {
    EntryWriter again;
    ASSERT_TRUE(again.open(dir_.string(), hash, head()));
    ASSERT_TRUE(again.commit());
  }
  {
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(60);
    f.put('\x7f');  // field count
  }
  Result<EntryHead> lying = read_back(path);
  ASSERT_FALSE(lying);
  EXPECT_NE(lying.error().message().find("bad head"), std::string::npos);
}

TEST_F(EntryFileTest, AHeadTooLargeIsNotWritten) {
  EntryHead big = head();
  big.fields.emplace_back("X-Big", std::string(kMaxHeadSize, 'b'));
  EntryWriter writer;
  EXPECT_FALSE(writer.open(dir_.string(), KeyHash::of("k"), big));
  EXPECT_FALSE(writer.is_open());
  EXPECT_TRUE(files().empty());
}

}  // namespace
}  // namespace tern::cache
