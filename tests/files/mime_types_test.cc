#include "files/mime_types.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace tern::files {
namespace {

TEST(MimeTypes, KnowsTheCommonWebTypes) {
  MimeTypes types;
  EXPECT_EQ(types.lookup("/index.html"), "text/html; charset=utf-8");
  EXPECT_EQ(types.lookup("/a/style.css"), "text/css; charset=utf-8");
  EXPECT_EQ(types.lookup("/app.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(types.lookup("/mod.mjs"), "text/javascript; charset=utf-8");
  EXPECT_EQ(types.lookup("/data.json"), "application/json; charset=utf-8");
  EXPECT_EQ(types.lookup("/logo.png"), "image/png");
  EXPECT_EQ(types.lookup("/photo.jpeg"), "image/jpeg");
  EXPECT_EQ(types.lookup("/pic.avif"), "image/avif");
  EXPECT_EQ(types.lookup("/icon.svg"), "image/svg+xml; charset=utf-8");
  EXPECT_EQ(types.lookup("/font.woff2"), "font/woff2");
  EXPECT_EQ(types.lookup("/movie.mp4"), "video/mp4");
  EXPECT_EQ(types.lookup("/song.flac"), "audio/flac");
  EXPECT_EQ(types.lookup("/doc.pdf"), "application/pdf");
  EXPECT_EQ(types.lookup("/module.wasm"), "application/wasm");
  EXPECT_EQ(types.lookup("/archive.tar.gz"), "application/gzip");
}

TEST(MimeTypes, EveryListedExtensionIsKnown) {
  MimeTypes types;
  for (std::string_view ext :
       {"html", "htm", "css", "js", "mjs", "json", "txt", "xml", "svg", "png", "jpg", "jpeg",
        "gif", "webp", "avif", "ico", "bmp", "woff", "woff2", "ttf", "otf", "eot", "mp4", "webm",
        "ogg", "ogv", "mp3", "wav", "flac", "m4a", "pdf", "zip", "gz", "tar", "wasm", "map", "csv",
        "md", "yaml", "toml"}) {
    EXPECT_NE(types.lookup_extension(ext), MimeTypes::kDefaultType) << ext;
  }
}

TEST(MimeTypes, TextTypesDeclareUtf8) {
  MimeTypes types;
  for (std::string_view ext : {"html", "css", "js", "json", "txt", "csv", "md", "xml"}) {
    EXPECT_NE(types.lookup_extension(ext).find("; charset=utf-8"), std::string_view::npos) << ext;
  }
  EXPECT_EQ(types.lookup_extension("png").find("charset"), std::string_view::npos);
}

TEST(MimeTypes, ExtensionsCompareCaseInsensitively) {
  MimeTypes types;
  EXPECT_EQ(types.lookup("/LOGO.PNG"), "image/png");
  EXPECT_EQ(types.lookup("/Index.HtMl"), "text/html; charset=utf-8");
  EXPECT_EQ(types.lookup_extension("JPG"), "image/jpeg");
}

TEST(MimeTypes, UnknownOrMissingExtensionGetsTheDefault) {
  MimeTypes types;
  EXPECT_EQ(types.lookup("/file.unknownext"), "application/octet-stream");
  EXPECT_EQ(types.lookup("/README"), "application/octet-stream");
  EXPECT_EQ(types.lookup("/trailing."), "application/octet-stream");
  EXPECT_EQ(types.lookup(""), "application/octet-stream");
}

TEST(MimeTypes, LeadingDotIsNotAnExtension) {
  MimeTypes types;
  types.set("profile", "text/x-profile");
  EXPECT_EQ(types.lookup("/home/.profile"), "application/octet-stream");
  EXPECT_EQ(types.lookup("/home/x.profile"), "text/x-profile");
}

TEST(MimeTypes, OnlyTheLastSegmentCounts) {
  MimeTypes types;
  EXPECT_EQ(types.lookup("/dir.html/file"), "application/octet-stream");
  EXPECT_EQ(types.lookup("/dir.html/file.css"), "text/css; charset=utf-8");
}

TEST(MimeTypes, OverridesReplaceAndAddMappings) {
  MimeTypes types;
  size_t before = types.size();
  types.set("HTML", "text/html");
  EXPECT_EQ(types.lookup("/a.html"), "text/html");
  EXPECT_EQ(types.size(), before);
  types.set("Custom", "application/x-custom");
  EXPECT_EQ(types.lookup("/a.CUSTOM"), "application/x-custom");
  EXPECT_EQ(types.size(), before + 1);
}

TEST(MimeTypes, DefaultTypeCanBeChanged) {
  MimeTypes types;
  types.set_default("text/plain");
  EXPECT_EQ(types.lookup("/README"), "text/plain");
  EXPECT_EQ(types.lookup("/a.png"), "image/png");
}

TEST(MimeTypes, LookupViewsPointIntoTheTable) {
  // The same storage both times: nothing is built per call.
  MimeTypes types;
  std::string_view a = types.lookup("/a.css");
  std::string_view b = types.lookup("/b.CSS");
  EXPECT_EQ(a.data(), b.data());
}

}  // namespace
}  // namespace tern::files
