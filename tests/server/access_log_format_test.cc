#include "server/observability/access_log_format.h"

#include <gtest/gtest.h>

#include <string>

namespace tern::server {
namespace {

std::string error_of(std::string_view format) {
  std::string error;
  EXPECT_FALSE(AccessLogFormat::parse(format, &error).has_value()) << format;
  return error;
}

TEST(AccessLogFormat, NamedFormatsAndVariablesParse) {
  std::string error;
  for (std::string_view format : {"combined", "json", "$remote_addr [$time_iso8601] \"$request\" $status",
                                  "${status}ms $request_time $request_id $http_x_forwarded_for $ssl_protocol",
                                  "$remote_addr $realip_remote_addr $proxy_protocol_addr",
                                  "no variables at all", ""}) {
    EXPECT_TRUE(AccessLogFormat::parse(format, &error).has_value()) << format << ": " << error;
  }
}

TEST(AccessLogFormat, UnknownVariableIsNamedWithTheKnownOnes) {
  const std::string error = error_of("$status $upstream_nonsense");
  EXPECT_NE(error.find("unknown variable $upstream_nonsense"), std::string::npos) << error;
  EXPECT_NE(error.find("$request_time"), std::string::npos) << error;
  EXPECT_NE(error.find("$http_NAME"), std::string::npos) << error;
}

TEST(AccessLogFormat, BadDollarsAreRefused) {
  EXPECT_NE(error_of("${status").find("no closing '}'"), std::string::npos);
  EXPECT_NE(error_of("cost: $ 5").find("names no variable"), std::string::npos);
  EXPECT_NE(error_of("$").find("names no variable"), std::string::npos);
  EXPECT_NE(error_of("$http_").find("unknown variable $http_"), std::string::npos);
}

}  // namespace
}  // namespace tern::server
