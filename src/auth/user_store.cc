#include "auth/user_store.h"

#include <cerrno>

#include "auth/mysql_user_store.h"
#include "auth/sqlite_user_store.h"

namespace tern::auth {

Result<std::unique_ptr<UserStore>> open_user_store(std::string_view url, size_t pool_size) {
  if (url.starts_with("sqlite:")) {
    auto store = SqliteUserStore::open(url.substr(7));
    if (!store) return store.error();
    return std::unique_ptr<UserStore>(std::move(store).value());
  }
  if (url.starts_with("mysql://") || url.starts_with("mariadb://")) {
    Result<MysqlUrl> parsed = parse_mysql_url(url);
    if (!parsed) return parsed.error();
    MysqlUserStore::Options options;
    options.pool_size = pool_size;
    return std::unique_ptr<UserStore>(
        std::make_unique<MysqlUserStore>(std::move(parsed).value(), options));
  }
  return Error{EINVAL, "user store URL must start with sqlite:, mysql:// or mariadb://"};
}

}  // namespace tern::auth
