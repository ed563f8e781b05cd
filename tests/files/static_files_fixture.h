// Test support for StaticFiles: a temporary document root with known files
// and a fixture that serves from it.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include "support/temp_dir.h"
#include "support/unprivileged.h"

#include "files/static_files.h"

namespace tern::files::test {

using namespace std::chrono_literals;
using http::Method;
using testing::TempDir;

constexpr time_t kMtime = 1000000000;  // Sun, 09 Sep 2001 01:46:40 GMT
constexpr std::string_view kMtimeText = "Sun, 09 Sep 2001 01:46:40 GMT";

inline std::string body_of(const StaticResult& r) {
  if (!r.file) return {};
  std::string s(r.length, '\0');
  ssize_t n = ::pread(r.file->fd(), s.data(), s.size(), static_cast<off_t>(r.offset));
  s.resize(n < 0 ? 0 : static_cast<size_t>(n));
  return s;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::string thousand_bytes() {
  std::string s;
  for (int i = 0; i < 1000; ++i) s.push_back(static_cast<char>('a' + i % 26));
  return s;
}

inline StaticRequest request_for(Method method, std::string_view path, std::string_view query = {}) {
  StaticRequest request;
  request.method = method;
  request.path = path;
  request.query = query;
  return request;
}

class StaticFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(root_.ok() && outside_.ok());
    ASSERT_TRUE(root_.write("index.html", "root index"));
    ASSERT_TRUE(root_.write("hello.txt", "hello"));
    ASSERT_TRUE(root_.write("big.bin", thousand_bytes()));
    ASSERT_TRUE(root_.write("style.css", "body { color: red }"));
    ASSERT_TRUE(root_.write("style.css.gz", "GZ"));
    ASSERT_TRUE(root_.write("file with space.txt", "spaced"));
    ASSERT_TRUE(root_.mkdir("sub"));
    ASSERT_TRUE(root_.write("sub/index.html", "sub index"));
    ASSERT_TRUE(root_.mkdir("dir with space"));
    ASSERT_TRUE(root_.mkdir("noindex"));
    ASSERT_TRUE(root_.write("noindex/file.txt", "x"));
    ASSERT_TRUE(root_.mkdir("etc"));
    ASSERT_TRUE(root_.write("etc/passwd", "the root's own etc/passwd"));
    ASSERT_TRUE(root_.write("locked.txt", "locked"));
    ASSERT_TRUE(root_.chmod("locked.txt", 0));
    ASSERT_TRUE(root_.mkfifo("pipe"));
    ASSERT_TRUE(root_.symlink("hello.txt", "link.txt"));
    ASSERT_TRUE(outside_.write("secret.txt", "secret"));
    ASSERT_TRUE(root_.symlink(outside_.at("secret.txt"), "out.txt"));
    for (const char* f : {"hello.txt", "big.bin", "style.css", "style.css.gz"}) {
      ASSERT_TRUE(root_.set_mtime(f, kMtime));
    }
  }

  std::unique_ptr<StaticFiles> make(StaticFilesOptions options = {}) {
    options.root = root_.path();
    return std::make_unique<StaticFiles>(options);
  }
  StaticFiles& files() {
    if (!files_) files_ = make();
    return *files_;
  }
  StaticResult get(std::string_view path) { return serve(request_for(Method::kGet, path)); }
  StaticResult serve(const StaticRequest& request) { return files().serve(request, now_); }

  TempDir root_;
  TempDir outside_;
  std::unique_ptr<StaticFiles> files_;
  StaticFiles::Clock::time_point now_ = StaticFiles::Clock::now();
};

inline StaticRequest with_encoding(std::string_view path, std::string_view accept_encoding) {
  StaticRequest request = request_for(Method::kGet, path);
  request.accept_encoding = accept_encoding;
  return request;
}

}  // namespace tern::files::test
