// Autoindex: a directory listing no file name can inject markup into.
#include "files/autoindex.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "support/temp_dir.h"

namespace tern::files {
namespace {

std::string list(const testing::TempDir& dir, bool hide_dotfiles = true) {
  const int fd = ::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  Result<std::string> html = render_autoindex(fd, "/files/<x>/", hide_dotfiles);
  ::close(fd);
  return html ? *html : "ERROR";
}

TEST(Autoindex, ListsDirectoriesFirstThenNamesInOrderWithSizes) {
  testing::TempDir dir;
  std::ofstream(dir.at("b.txt")) << "12345";
  std::ofstream(dir.at("a.txt")) << "1";
  ::mkdir(dir.at("zdir").c_str(), 0755);
  const std::string html = list(dir);
  const size_t zdir = html.find(">zdir/</a>"), a = html.find(">a.txt</a>"), b = html.find(">b.txt</a>");
  ASSERT_NE(zdir, std::string::npos) << html;
  ASSERT_NE(a, std::string::npos) << html;
  ASSERT_NE(b, std::string::npos) << html;
  EXPECT_LT(zdir, a);
  EXPECT_LT(a, b);
  EXPECT_NE(html.find(" 5\n", b), std::string::npos);  // b.txt's size
  EXPECT_NE(html.find("<a href=\"../\">../</a>"), std::string::npos);
  EXPECT_NE(html.find("<title>Index of /files/&lt;x&gt;/</title>"), std::string::npos);  // the path escaped
}

TEST(Autoindex, HostileNamesAreEscapedInLinkAndText) {
  testing::TempDir dir;
  for (const char* name : {"<script>alert(1)", "quote\"d'", "100%", "new\nline", "javascript:x"}) {
    std::ofstream(dir.at(name)) << "x";
  }
  const std::string html = list(dir);
  EXPECT_EQ(html.find("<script>"), std::string::npos) << html;
  EXPECT_NE(html.find(">&lt;script&gt;alert(1)</a>"), std::string::npos) << html;
  EXPECT_NE(html.find("href=\"%3Cscript%3Ealert(1)\""), std::string::npos) << html;
  EXPECT_NE(html.find(">quote&quot;d&#39;</a>"), std::string::npos) << html;
  EXPECT_NE(html.find("href=\"100%25\""), std::string::npos) << html;
  EXPECT_NE(html.find("href=\"new%0Aline\""), std::string::npos) << html;
  EXPECT_NE(html.find(">new?line</a>"), std::string::npos) << html;  // no raw newline in a line
  EXPECT_NE(html.find("href=\"./javascript:x\""), std::string::npos) << html;  // not a scheme
}

TEST(Autoindex, DotfilesHiddenWhenTheyWouldBeRefused) {
  testing::TempDir dir;
  std::ofstream(dir.at(".env")) << "SECRET=1";
  std::ofstream(dir.at("visible")) << "x";
  EXPECT_EQ(list(dir).find(".env"), std::string::npos);
  EXPECT_NE(list(dir, /*hide_dotfiles=*/false).find(">.env</a>"), std::string::npos);
}

}  // namespace
}  // namespace tern::files
