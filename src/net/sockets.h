// Thin wrappers over the socket system calls.
//
// This is the one place that reads errno: each function reads it once, right
// after the call, retries on EINTR where that is safe, and hands the value back
// (as a Result, or through an out parameter on paths hot enough to matter).
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>

#include "base/result.h"
#include "net/inet_address.h"
#include "net/socket_address.h"

namespace tern::net::sockets {

// A non-blocking, close-on-exec TCP or UDP socket of the given family.
Result<int> create_tcp(sa_family_t family);
Result<int> create_udp(sa_family_t family);

// bind(2) and listen(2).
Result<void> bind(int fd, const InetAddress& addr);
Result<void> listen(int fd, int backlog);

// Accepts one connection as non-blocking and close-on-exec. Returns the fd, or
// -1 with *saved_errno set (EAGAIN when the queue is empty).
int accept(int listen_fd, InetAddress* peer, int* saved_errno);

// Starts a non-blocking connect. Returns 0, or the errno (EINPROGRESS is normal).
int connect(int fd, const SocketAddress& addr);

// read/readv/write/writev retrying on EINTR. Return -1 with *saved_errno set.
ssize_t read(int fd, void* buf, size_t len, int* saved_errno);
ssize_t readv(int fd, const iovec* iov, int iovcnt, int* saved_errno);
// Use send() and sendmsg() with MSG_NOSIGNAL, so a closed peer gives EPIPE,
// not SIGPIPE. With `more`, MSG_MORE: the kernel holds a short last segment
// for what follows (the next send, or the FIN of a close), so both leave in
// one packet.
ssize_t write(int fd, const void* buf, size_t len, int* saved_errno, bool more = false);
ssize_t writev(int fd, const iovec* iov, int iovcnt, int* saved_errno);
// sendfile(2) from a file at *offset (advanced) to a socket.
ssize_t sendfile(int out_fd, int in_fd, off_t* offset, size_t len, int* saved_errno);
// Kernel TLS: `len` bytes as (the start of) one record of `type` (a
// handshake message, an alert), which the kernel encrypts.
ssize_t send_record(int fd, uint8_t type, const void* buf, size_t len, int* saved_errno);

void close(int fd);                  // close(2); an error is logged
Result<void> shutdown_write(int fd);  // shutdown(SHUT_WR): a FIN after what is queued
// Sends what TCP holds back for more (after a write with MSG_MORE).
void push_pending(int fd);

// The pending error of a socket (SO_ERROR), 0 if none.
int socket_error(int fd);

// getsockname(2) and getpeername(2).
InetAddress local_address(int fd);
InetAddress peer_address(int fd);
// A TCP connect to a local port can connect a socket to itself.
bool is_self_connect(int fd);

Result<void> set_tcp_nodelay(int fd, bool on);  // TCP_NODELAY: no Nagle delay
// TCP_NOTSENT_LOWAT (see TcpServerOptions::send_lowat).
Result<void> set_notsent_lowat(int fd, size_t bytes);
// TCP_DEFER_ACCEPT on a listening socket: accept() sees a connection once its
// first bytes arrived, or after about `seconds` (0 turns it off).
Result<void> set_defer_accept(int fd, int seconds);
Result<void> set_keepalive(int fd, bool on);    // SO_KEEPALIVE
Result<void> set_reuse_addr(int fd, bool on);   // SO_REUSEADDR
Result<void> set_reuse_port(int fd, bool on);   // SO_REUSEPORT
Result<void> set_ipv6_only(int fd, bool on);    // IPV6_V6ONLY

}  // namespace tern::net::sockets
