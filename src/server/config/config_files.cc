// The config's files: each parsed, its strings' ${NAME} filled in from the
// environment, and the files `include` names read into the same Config.
//
//   include = ["conf.d/*.toml", "/etc/tern/upstreams.toml"]
//   secret = "${TERN_SECRET}"             # from the environment, or an error
//   root = "${SITE_ROOT:-/srv/www}"      # or the default when unset or empty
//
// An include is a glob relative to the file that names it; its matches are
// read in sorted order, their [[server]] and [[upstream]] blocks appended
// to the ones before (a group's name used twice is an error naming both
// places), and may include others in turn. A pattern without a wildcard
// must match; a file that includes itself, through any chain, is an error.
// Only capitals, digits and '_' name an environment variable, so that
// nginx-style variables in the same strings (the access log's ${status},
// a return's $host) are left as they are; "$${" writes "${".
#include <glob.h>
#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "server/config/config.h"
#include "server/config/config_section.h"

namespace tern::server::config_detail {
namespace {

bool is_variable_name(std::string_view name) {
  if (name.empty() || (name.front() >= '0' && name.front() <= '9')) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; });
}

// `text` with its ${NAME} and ${NAME:-default} filled in; false, with
// *error set, for a variable that is unset and has no default.
bool expand(std::string_view text, std::string* out, std::string* error) {
  out->clear();
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 3, "$${") == 0) {
      out->append("${");
      i += 3;
      continue;
    }
    const size_t close = text.compare(i, 2, "${") == 0 ? text.find('}', i + 2) : std::string_view::npos;
    if (close == std::string_view::npos) {
      out->push_back(text[i++]);
      continue;
    }
    const std::string_view inside = text.substr(i + 2, close - i - 2);
    const size_t dash = inside.find(":-");
    const std::string_view name = inside.substr(0, dash);
    if (!is_variable_name(name)) {  // not ours: ${status}
      out->push_back(text[i++]);
      continue;
    }
    const char* value = std::getenv(std::string(name).c_str());
    if (dash != std::string_view::npos && (value == nullptr || value[0] == '\0')) {
      out->append(inside.substr(dash + 2));
    } else if (value != nullptr) {
      out->append(value);
    } else {
      *error = "${" + std::string(name) + "} is not set in the environment (${" + std::string(name) +
               ":-default} gives a default)";
      return false;
    }
    i = close + 1;
  }
  return true;
}

void expand_node(const std::string& file, toml::node& node, const std::string& key) {
  if (toml::table* table = node.as_table()) {
    for (auto&& [name, value] : *table) {
      expand_node(file, value, key.empty() ? std::string(name.str()) : key + "." + std::string(name.str()));
    }
  } else if (toml::array* array = node.as_array()) {
    for (size_t i = 0; i < array->size(); ++i) expand_node(file, *array->get(i), key + "[" + std::to_string(i) + "]");
  } else if (toml::value<std::string>* text = node.as_string()) {
    if (text->get().find("${") == std::string::npos) return;
    std::string out;
    std::string error;
    if (!expand(text->get(), &out, &error)) {
      throw ConfigError(file, static_cast<int>(node.source().begin.line), key, error);
    }
    text->get() = std::move(out);
  }
}

std::string directory_of(const std::string& file) {
  const size_t slash = file.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : file.substr(0, slash);
}

std::string real_path(const std::string& file) {
  char resolved[PATH_MAX];
  return ::realpath(file.c_str(), resolved) != nullptr ? std::string(resolved) : file;
}

// An included file: its blocks into `c`, then its own includes.
void read_included(const std::string& file, Config& c, std::vector<std::string>& chain) {
  toml::table root = parse_config_file(file);
  Section s(file, root, "");
  for (auto&& [key, node] : root) {
    if (key != "server" && key != "upstream" && key != "include") {
      s.fail(node, std::string(key.str()),
             "an included file holds [[server]] and [[upstream]] blocks and include; "
             "settings of the whole server stay in the main file");
    }
  }
  if (const toml::node* node = s.node("upstream")) read_upstreams(s, *node, c);
  if (const toml::node* node = s.node("server")) read_sites(s, *node, c);
  read_includes(s, c, chain);
  s.finish();
}

}  // namespace

toml::table parse_config_file(const std::string& path) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw ConfigError(path, static_cast<int>(e.source().begin.line), "(syntax)", std::string(e.description()));
  }
  expand_node(path, root, "");
  return root;
}

void read_includes(Section& s, Config& c, std::vector<std::string>& chain) {
  auto patterns = s.get_strings("include");
  if (!patterns) return;
  for (const auto& [pattern, node] : *patterns) {
    if (pattern.empty()) s.fail(*node, "include", "expected a file or a glob (\"conf.d/*.toml\")");
    const std::string full = pattern.front() == '/' ? pattern : directory_of(s.file()) + "/" + pattern;
    glob_t found{};
    const int status = ::glob(full.c_str(), GLOB_MARK, nullptr, &found);
    std::vector<std::string> files;
    for (size_t i = 0; status == 0 && i < found.gl_pathc; ++i) {
      std::string path = found.gl_pathv[i];
      if (!path.ends_with('/')) files.push_back(std::move(path));  // directories are marked
    }
    ::globfree(&found);
    const bool wildcard = pattern.find_first_of("*?[") != std::string::npos;
    if (status == GLOB_NOMATCH && !wildcard) s.fail(*node, "include", full + ": no such file");
    if (status != 0 && status != GLOB_NOMATCH) s.fail(*node, "include", full + ": cannot be read");
    std::sort(files.begin(), files.end());
    for (const std::string& file : files) {
      const std::string real = real_path(file);
      if (std::find(chain.begin(), chain.end(), real) != chain.end()) {
        s.fail(*node, "include", file + " includes itself (through " + chain.back() + ")");
      }
      chain.push_back(real);
      read_included(file, c, chain);
      chain.pop_back();
    }
  }
}

}  // namespace tern::server::config_detail
