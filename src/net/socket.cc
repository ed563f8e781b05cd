#include "net/socket.h"

#include "net/sockets.h"

namespace tern::net {

void Socket::reset(int fd) {
  if (fd_ >= 0) sockets::close(fd_);
  fd_ = fd;
}

}  // namespace tern::net
