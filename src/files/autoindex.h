// Autoindex: the HTML listing of a directory that has no index file, for
// locations with `autoindex = true` (nginx's autoindex module).
//
// Entries are sorted with directories first, then by name (byte order);
// names starting with '.' are left out when `hide_dotfiles` (they would be
// 403 anyway). Every name is percent-encoded in its link and HTML-escaped
// in its text, and control characters (a newline in a file name) are shown
// as '?', so no file name can inject markup or break the listing. Sizes are
// in bytes ("-" for a directory), dates in UTC.
//
// Reads the directory with blocking calls, as nginx does: listings are for
// small directories, not for hot paths. Any thread.
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"

namespace tern::files {

// The listing of the directory open as `dir_fd` (not consumed), whose
// decoded URI path is `uri_path` (ending in '/').
Result<std::string> render_autoindex(int dir_fd, std::string_view uri_path, bool hide_dotfiles);

}  // namespace tern::files
