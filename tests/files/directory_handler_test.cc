// DirectoryHandler on a real HttpServer: the files beneath a prefix, what
// it refuses, and what it leaves to the handlers after it.
#include "files/directory_handler.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>

#include "http/http_server.h"
#include "support/loop_runner.h"
#include "support/raw_socket.h"
#include "support/temp_dir.h"

namespace tern::files {
namespace {

using tern::testing::LoopRunner;
using tern::testing::RawClient;

class DirectoryHandlerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(temp_.mkdir("public") && temp_.mkdir("public/docs") && temp_.mkdir("site"));
    ASSERT_TRUE(temp_.write("public/app.css", "body{}\n"));
    ASSERT_TRUE(temp_.write("public/docs/index.html", "<p>docs</p>\n"));
    ASSERT_TRUE(temp_.write("public/.env", "SECRET=1\n"));
    ASSERT_TRUE(temp_.write("site/about.txt", "about\n"));
    ASSERT_TRUE(temp_.write("outside.txt", "not served\n"));
    server_ = tern::testing::make_on_loop<http::HttpServer>(runner_, runner_.loop(), net::InetAddress(0, true));
    runner_.run([&] {
      server_->get("/assets/routed", [](const http::Request&, http::ResponseWriter& w) {
        w.start(200).body("the router's\n");
      });
      StaticFilesOptions assets;
      assets.root = temp_.at("public");
      server_->add_handler(std::make_unique<DirectoryHandler>("/assets/", assets));
      StaticFilesOptions site;
      site.root = temp_.at("site");
      server_->add_handler(std::make_unique<DirectoryHandler>("/", site));
      ASSERT_TRUE(server_->start().ok());
    });
    port_ = server_->listen_address().port();
  }

  std::string get(const std::string& target, const std::string& method = "GET", const std::string& fields = "") {
    RawClient client(port_);
    EXPECT_TRUE(client.send_all(method + " " + target + " HTTP/1.1\r\nHost: x\r\n" + fields +
                                "Connection: close\r\n\r\n"));
    return client.read_to_eof(nullptr, std::chrono::seconds(5));
  }

  tern::testing::TempDir temp_;
  LoopRunner runner_;
  tern::testing::LoopOwned<http::HttpServer> server_;
  uint16_t port_ = 0;
};

TEST_F(DirectoryHandlerTest, ServesTheFilesBeneathThePrefixFromTheRoot) {
  std::string out = get("/assets/app.css");
  EXPECT_TRUE(out.starts_with("HTTP/1.1 200 OK\r\n")) << out;
  EXPECT_NE(out.find("Content-Type: text/css; charset=utf-8\r\n"), std::string::npos) << out;
  EXPECT_NE(out.find("ETag: "), std::string::npos) << out;
  EXPECT_TRUE(out.ends_with("\r\n\r\nbody{}\n")) << out;
  out = get("/assets/docs/");
  EXPECT_TRUE(out.starts_with("HTTP/1.1 200 OK\r\n")) << out;
  EXPECT_TRUE(out.ends_with("<p>docs</p>\n")) << out;
  out = get("/assets/app.css", "GET", "Range: bytes=0-3\r\n");
  EXPECT_TRUE(out.starts_with("HTTP/1.1 206 Partial Content\r\n")) << out;
  EXPECT_TRUE(out.ends_with("\r\n\r\nbody")) << out;
  out = get("/assets/app.css", "HEAD");
  EXPECT_TRUE(out.starts_with("HTTP/1.1 200 OK\r\n")) << out;
  EXPECT_TRUE(out.ends_with("\r\n\r\n")) << out;
}

TEST_F(DirectoryHandlerTest, ADirectoryWithoutItsSlashIsRedirectedToIt) {
  std::string out = get("/assets/docs?x=1");
  EXPECT_TRUE(out.starts_with("HTTP/1.1 301 Moved Permanently\r\n")) << out;
  EXPECT_NE(out.find("Location: /assets/docs/?x=1\r\n"), std::string::npos) << out;
  out = get("/assets");  // the prefix itself names the root
  EXPECT_TRUE(out.starts_with("HTTP/1.1 301 Moved Permanently\r\n")) << out;
  EXPECT_NE(out.find("Location: /assets/\r\n"), std::string::npos) << out;
}

TEST_F(DirectoryHandlerTest, RefusesWhatItMustNotServe) {
  EXPECT_TRUE(get("/assets/.env").starts_with("HTTP/1.1 403 Forbidden\r\n"));
  EXPECT_TRUE(get("/assets/missing.css").starts_with("HTTP/1.1 404 Not Found\r\n"));
  EXPECT_TRUE(get("/assets/%zz").starts_with("HTTP/1.1 400 Bad Request\r\n"));
  // Above the root of the URL space: 400, not a file beside the root.
  std::string out = get("/assets/%2e%2e/%2e%2e/outside.txt");
  EXPECT_TRUE(out.starts_with("HTTP/1.1 400 Bad Request\r\n")) << out;
  EXPECT_EQ(out.find("not served"), std::string::npos) << out;
  out = get("/assets/app.css", "POST", "Content-Length: 2\r\n\r\nhi");
  EXPECT_TRUE(out.starts_with("HTTP/1.1 405 Method Not Allowed\r\n")) << out;
  EXPECT_NE(out.find("Allow: GET, HEAD\r\n"), std::string::npos) << out;
}

TEST_F(DirectoryHandlerTest, PathsOutsideThePrefixGoToTheHandlersAfterIt) {
  std::string out = get("/about.txt");
  EXPECT_TRUE(out.starts_with("HTTP/1.1 200 OK\r\n")) << out;
  EXPECT_TRUE(out.ends_with("about\n")) << out;
  // "/assets/../about.txt" is "/about.txt": not beneath "/assets/".
  out = get("/assets/../about.txt");
  EXPECT_TRUE(out.ends_with("about\n")) << out;
  // "/assetsx" does not continue "/assets" at a segment.
  EXPECT_TRUE(get("/assetsx/app.css").starts_with("HTTP/1.1 404 Not Found\r\n"));
  // The Router comes first.
  EXPECT_TRUE(get("/assets/routed").ends_with("the router's\n"));
}

TEST(DirectoryHandler, ARootThatCannotBeOpenedOrABadPrefixFailsAtOnce) {
  StaticFilesOptions options;
  options.root = "/nonexistent/tern-directory";
  EXPECT_THROW(DirectoryHandler("/", options), std::system_error);
  tern::testing::TempDir temp;
  options.root = temp.path();
  EXPECT_THROW(DirectoryHandler("assets/", options), std::invalid_argument);
  EXPECT_NO_THROW(DirectoryHandler("/assets", options));
}

}  // namespace
}  // namespace tern::files
