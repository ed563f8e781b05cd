/* bench/upgrade_echo_server.c: the upstream of bench/compare's websocket
 * row, doing the least a WebSocket echo server can.
 *
 *   upgrade_echo_server PORT
 *
 * One thread, one epoll set, level-triggered, on 127.0.0.1:PORT. On each
 * connection the first request head (anything up to an empty line) is
 * answered with the same prebuilt 101 Switching Protocols; from then on
 * every byte that arrives goes back as it came (a client's masked frames
 * come back masked: the load generator only counts them). No parsing, no
 * frames, no timers: what a proxy does between the two is what it costs. */
#define _GNU_SOURCE /* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

enum { kMaxEvents = 256, kReadBytes = 64 * 1024 };

static const char kSwitch[] =
    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";

static int write_all(int fd, const char *data, size_t n) {
  size_t sent = 0;
  while (sent < n) { /* small messages: the socket takes them */
    ssize_t w = write(fd, data + sent, n - sent);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    sent += (size_t)w;
  }
  return 0;
}

/* state: 0..3 bytes of an empty line matched in the head, 4 once echoing. */
static int serve(int fd, int *state) {
  static char in[kReadBytes];
  ssize_t n = read(fd, in, sizeof in);
  if (n <= 0) return n == 0 || (errno != EAGAIN && errno != EINTR) ? -1 : 0;
  if (*state == 4) return write_all(fd, in, (size_t)n);
  static const char kEnd[] = "\r\n\r\n";
  for (ssize_t i = 0; i < n; ++i) {
    *state = in[i] == kEnd[*state] ? *state + 1 : (in[i] == '\r' ? 1 : 0);
    if (*state == 4) {
      if (write_all(fd, kSwitch, sizeof kSwitch - 1) < 0) return -1;
      return i + 1 < n ? write_all(fd, in + i + 1, (size_t)(n - i - 1)) : 0;
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s PORT\n", argv[0]);
    return 2;
  }
  const int port = atoi(argv[1]);
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int on = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listener, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(listener, 4096) != 0) {
    perror("upgrade_echo_server: bind/listen");
    return 1;
  }
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)listener << 32};
  epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev);
  struct epoll_event events[kMaxEvents];
  for (;;) {
    int ready = epoll_wait(ep, events, kMaxEvents, -1);
    for (int i = 0; i < ready; ++i) {
      int fd = (int)(events[i].data.u64 >> 32);
      if (fd == listener) {
        int conn;
        while ((conn = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
          setsockopt(conn, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
          struct epoll_event cev = {.events = EPOLLIN, .data.u64 = (uint64_t)conn << 32};
          epoll_ctl(ep, EPOLL_CTL_ADD, conn, &cev);
        }
        continue;
      }
      int state = (int)(events[i].data.u64 & 0xffffffff);
      const int before = state;
      if (serve(fd, &state) < 0) {
        close(fd);
        continue;
      }
      if (state != before) {
        struct epoll_event cev = {.events = EPOLLIN, .data.u64 = ((uint64_t)fd << 32) | (uint32_t)state};
        epoll_ctl(ep, EPOLL_CTL_MOD, fd, &cev);
      }
    }
  }
}
