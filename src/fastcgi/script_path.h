// Which script a request's decoded and normalised path names, as nginx's
// usual PHP set-up decides (fastcgi_split_path_info, try_files $uri =404):
// for a path ending in '/', the directory's index script if it exists;
// else the longest part of the path, ending at a segment beyond `floor`
// bytes, that `matches` (a script's kind of name) and that exists
// (`is_script`, which sets the error to answer otherwise); what follows it
// is PATH_INFO. A path that matches whole but names no script is that
// error, so that no other handler sends its source. Shared by the web
// server's FastCGI blocks and ScriptHandler.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tern::fastcgi {

struct ScriptPath {
  int status = -1;  // 0: run `script`; > 0: the error to answer; -1: not a script's path
  std::string_view script;     // its URI path (a view of the path, or of *probe)
  std::string_view path_info;  // what followed it
};

// `matches(name)`: whether a name is of a script's kind; `is_script(name,
// int* error)`: whether it exists as one. *probe holds an index script's
// path.
template <typename Matches, typename IsScript>
ScriptPath find_script_path(std::string_view path, std::string_view index, size_t floor, std::string* probe,
                            Matches matches, IsScript is_script) {
  int error = 404;
  if (path.ends_with('/') && !index.empty()) {
    probe->assign(path).append(index);
    if (matches(*probe) && is_script(std::string_view(*probe), &error)) return {0, *probe, {}};
    error = 404;
  }
  // The longest part that is a script; the whole path first ("/doku.php/"
  // runs /doku.php with PATH_INFO "/").
  const bool whole = matches(path);
  for (size_t end = path.size(); end > floor; end = path.rfind('/', end - 1)) {
    const std::string_view part = path.substr(0, end);
    int part_error = 404;
    if ((end == path.size() ? whole : matches(part)) && is_script(part, &part_error)) {
      return {0, part, path.substr(end)};
    }
    if (end == path.size()) error = part_error;
  }
  return {whole ? error : -1, {}, {}};
}

}  // namespace tern::fastcgi
