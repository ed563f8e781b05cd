// The config's files: include (globs relative to the including file,
// sorted, nested, blocks merged, every mistake naming its own file) and
// ${NAME} / ${NAME:-default} from the environment.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "server/config/config.h"
#include "support/temp_dir.h"

namespace tern::server {
namespace {

class ConfigFilesTest : public ::testing::Test {
 protected:
  void write(const std::string& path, const std::string& text) {
    const size_t slash = path.rfind('/');
    if (slash != std::string::npos) ::mkdir(dir_.at(path.substr(0, slash)).c_str(), 0755);
    std::ofstream(dir_.at(path)) << text;
  }
  Config load(const std::string& main) {
    write("tern.toml", main + "\n[static]\nroot = \"" + dir_.path() + "\"\n");
    return load_config(dir_.at("tern.toml"));
  }
  // The error loading `main` gives, from the first path of the directory on.
  std::string error_of(const std::string& main) {
    try {
      load(main);
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      const size_t at = what.find(dir_.path());
      return at == std::string::npos ? what : what.substr(at + dir_.path().size() + 1);
    }
    return "loaded";
  }
  static std::vector<std::string> first_names(const Config& config) {
    std::vector<std::string> names;
    for (const SiteConfig& site : config.sites) names.push_back(site.names.empty() ? "-" : site.names.front());
    return names;
  }

  tern::testing::TempDir dir_;
};

TEST_F(ConfigFilesTest, IncludedSitesAndGroupsFollowTheMainFilesInSortedOrder) {
  write("conf.d/b.toml", "[[server]]\nnames = [\"b.test\"]\n[[server.location]]\nprefix = \"/\"\n"
                         "proxy = { pass = \"http://app\" }\n");
  write("conf.d/a.toml", "[[upstream]]\nname = \"app\"\nservers = [{ address = \"127.0.0.1:3000\" }]\n"
                         "[[server]]\nnames = [\"a.test\"]\n");
  write("conf.d/notes.txt", "not toml at all [");
  write("conf.d/skip.toml.d/x.toml", "[[server]]\nnames = [\"never\"]\n");
  const Config config = load("include = [\"conf.d/*.toml\"]\n[[server]]\nnames = [\"main.test\"]\n");
  EXPECT_EQ(first_names(config), (std::vector<std::string>{"main.test", "a.test", "b.test"}));
  ASSERT_EQ(config.upstreams.size(), 1u);
  EXPECT_EQ(config.upstreams[0].file, dir_.at("conf.d/a.toml"));
  EXPECT_EQ(config.sites[2].file, dir_.at("conf.d/b.toml"));
}

TEST_F(ConfigFilesTest, IncludesNestRelativeToTheFileThatNamesThem) {
  write("sites/one.toml", "include = \"more/two.toml\"\n[[server]]\nnames = [\"one.test\"]\n");
  write("sites/more/two.toml", "[[server]]\nnames = [\"two.test\"]\n");
  const Config config = load("include = \"sites/one.toml\"\n");
  EXPECT_EQ(first_names(config), (std::vector<std::string>{"one.test", "two.test"}));
  // A wildcard that matches nothing is fine; a file that is not there is not.
  EXPECT_EQ(first_names(load("include = [\"empty.d/*.toml\"]\n")), std::vector<std::string>{"-"});
  EXPECT_EQ(error_of("include = [\"missing.toml\"]\n"), "tern.toml:1: include: " + dir_.at("missing.toml") +
                                                            ": no such file");
}

TEST_F(ConfigFilesTest, AMistakeInAnIncludedFileNamesThatFileItsLineAndKey) {
  write("conf.d/a.toml", "[[server]]\nnames = [\"a.test\"]\nlisten = [\"nowhere\"]\n");
  EXPECT_EQ(error_of("include = [\"conf.d/*.toml\"]\n").find("conf.d/a.toml:3: server[0].listen: "), 0u);
  write("conf.d/a.toml", "workers = 4\n");
  EXPECT_NE(error_of("include = [\"conf.d/*.toml\"]\n").find("conf.d/a.toml:1: workers: an included file holds"),
            std::string::npos);
  write("conf.d/a.toml", "[[server]\n");
  EXPECT_EQ(error_of("include = [\"conf.d/*.toml\"]\n").substr(0, 27), "conf.d/a.toml:1: (syntax): ");
  write("conf.d/a.toml", "[[server]]\n[[server.location]]\nprefix = \"/\"\nproxy = { pass = \"http://nope\" }\n");
  EXPECT_EQ(error_of("include = [\"conf.d/*.toml\"]\n").substr(0, 52),
            "conf.d/a.toml:4: server[0].location[0].proxy.pass: \"");
}

TEST_F(ConfigFilesTest, AGroupNameUsedTwiceNamesBothPlaces) {
  write("conf.d/a.toml", "\n[[upstream]]\nname = \"app\"\nservers = [{ address = \"127.0.0.1:3001\" }]\n");
  const std::string error = error_of("include = [\"conf.d/*.toml\"]\n[[upstream]]\nname = \"app\"\n"
                                     "servers = [{ address = \"127.0.0.1:3000\" }]\n");
  EXPECT_EQ(error.substr(0, 35), "conf.d/a.toml:3: upstream[0].name: ") << error;
  EXPECT_NE(error.find("already the name of the group at " + dir_.at("tern.toml") + ":2"), std::string::npos)
      << error;
}

TEST_F(ConfigFilesTest, AFileThatIncludesItselfIsRefused) {
  write("conf.d/a.toml", "include = \"../conf.d/*.toml\"\n");
  EXPECT_NE(error_of("include = [\"conf.d/a.toml\"]\n").find("conf.d/a.toml:1: include: "), std::string::npos);
  EXPECT_NE(error_of("include = [\"conf.d/a.toml\"]\n").find("includes itself"), std::string::npos);
  EXPECT_NE(error_of("include = [\"tern.toml\"]\n").find("includes itself"), std::string::npos);
}

TEST_F(ConfigFilesTest, StringsTakeCapitalisedVariablesFromTheEnvironment) {
  ::setenv("TERN_TEST_NAME", "env.test", 1);
  ::setenv("TERN_TEST_EMPTY", "", 1);
  ::unsetenv("TERN_TEST_UNSET");
  const Config config = load(
      "access_log_format = '${status} ${TERN_TEST_UNSET:-}x'\n"
      "server_name = \"$${TERN_TEST_NAME}\"\n"
      "[[server]]\nnames = [\"${TERN_TEST_NAME}\", \"${TERN_TEST_UNSET:-fallback.test}\", "
      "\"${TERN_TEST_EMPTY:-empty.test}\", \"a${TERN_TEST_EMPTY}b\"]\n");
  EXPECT_EQ(config.sites.at(0).names, (std::vector<std::string>{"env.test", "fallback.test", "empty.test", "ab"}));
  EXPECT_EQ(config.access_log_format, "${status} x");
  EXPECT_EQ(config.server_name, "${TERN_TEST_NAME}");
  EXPECT_EQ(error_of("[[server]]\nnames = [\"a\", \"${TERN_TEST_UNSET}\"]\n"),
            "tern.toml:2: server[0].names[1]: ${TERN_TEST_UNSET} is not set in the environment "
            "(${TERN_TEST_UNSET:-default} gives a default)");
  write("conf.d/a.toml", "[[server]]\n\nroot = \"${TERN_TEST_UNSET}\"\n");
  EXPECT_EQ(error_of("include = [\"conf.d/a.toml\"]\n").substr(0, 33), "conf.d/a.toml:3: server[0].root: ");
}

}  // namespace
}  // namespace tern::server
