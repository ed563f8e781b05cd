#include "files/autoindex.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <vector>

#include "http/uri.h"

namespace tern::files {
namespace {

struct Entry {
  std::string name;
  bool directory = false;
  off_t size = 0;
  time_t mtime = 0;
};

void append_html(std::string_view text, std::string* out) {
  for (char ch : text) {
    switch (ch) {
      case '&': out->append("&amp;"); break;
      case '<': out->append("&lt;"); break;
      case '>': out->append("&gt;"); break;
      case '"': out->append("&quot;"); break;
      case '\'': out->append("&#39;"); break;
      default:
        out->push_back(static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f ? '?' : ch);
    }
  }
}

}  // namespace

Result<std::string> render_autoindex(int dir_fd, std::string_view uri_path, bool hide_dotfiles) {
  // A descriptor of our own: readdir moves its offset.
  const int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Error{errno, "open directory"};
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    const int saved = errno;
    ::close(fd);
    return Error{saved, "fdopendir"};
  }
  std::vector<Entry> entries;
  while (const dirent* d = ::readdir(dir)) {
    std::string_view name = d->d_name;
    if (name == "." || name == ".." || (hide_dotfiles && name.front() == '.')) continue;
    struct stat st {};
    if (::fstatat(fd, d->d_name, &st, 0) != 0) continue;  // gone, or a dangling link
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) continue;
    entries.push_back({std::string(name), S_ISDIR(st.st_mode), st.st_size, st.st_mtime});
  }
  ::closedir(dir);
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.directory != b.directory ? a.directory : a.name < b.name;
  });

  std::string html = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of ";
  append_html(uri_path, &html);
  html += "</title></head>\n<body>\n<h1>Index of ";
  append_html(uri_path, &html);
  html += "</h1><hr><pre><a href=\"../\">../</a>\n";
  for (const Entry& e : entries) {
    std::string href;
    http::append_percent_encoded_path(e.name, &href);
    // A ':' before any '/' would read as a scheme ("javascript:...").
    if (href.find(':') != std::string::npos) href = "./" + href;
    html += "<a href=\"";
    append_html(href, &html);
    if (e.directory) html += '/';
    html += "\">";
    append_html(e.name, &html);
    if (e.directory) html += '/';
    html += "</a> ";
    char date[32];
    struct tm tm {};
    ::gmtime_r(&e.mtime, &tm);
    std::strftime(date, sizeof date, "%d-%b-%Y %H:%M", &tm);
    html += date;
    html += ' ';
    html += e.directory ? std::string("-") : std::to_string(e.size);
    html += '\n';
  }
  html += "</pre><hr></body>\n</html>\n";
  return html;
}

}  // namespace tern::files
