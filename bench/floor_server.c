/* bench/floor_server.c: the least work an HTTP/1.1 server can do, as the
 * floor that bench/compare measures tern and its peers against.
 *
 *   floor_server PORT BODY_BYTES
 *   floor_server PORT --file PATH
 *
 * One thread, one epoll set, level-triggered, on 127.0.0.1:PORT. Every
 * request head (anything up to an empty line; bodies are not supported) is
 * answered with the same prebuilt 200 of BODY_BYTES bytes ('a'), keep-alive,
 * pipelined requests answered in one write. No parsing, no files, no
 * timers: what a real server does beyond this is what it costs.
 *
 * With --file, the 200's body is the file at PATH instead, sent as a server
 * sends a file it did not read: the head by a write of its own, then the
 * body by sendfile(2) from the open file (the floor of serving a file or a
 * cached entry on disk). A response the socket cannot take whole waits for
 * EPOLLOUT; requests behind it are answered after it. */
#define _GNU_SOURCE  /* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

enum { kMaxEvents = 256, kReadBytes = 64 * 1024 };

static char *response;
static size_t response_size;

/* --file: the head alone in `response`, the body from `body_fd`. */
static int body_fd = -1;
static off_t body_size;

/* --file: a connection's answers not yet sent whole, and how far the first
 * has gone (its head's bytes, then its body's), by descriptor. */
struct owed {
  unsigned answers;
  size_t head_sent;
  off_t body_sent;
};
static struct owed *owed;
static int owed_size;

/* The complete heads that end in `in`, with `*tail` bytes of an empty line
 * matched at the end of the previous read (updated for the next). */
static size_t count_heads(const char *in, size_t n, int *tail) {
  static const char kEnd[] = "\r\n\r\n";
  size_t heads = 0;
  for (size_t i = 0; i < n; ++i) {
    *tail = in[i] == kEnd[*tail] ? *tail + 1 : (in[i] == '\r' ? 1 : 0);
    if (*tail == 4) {
      ++heads;
      *tail = 0;
    }
  }
  return heads;
}

static int serve(int fd, int *tail) {
  static char in[kReadBytes];
  ssize_t n = read(fd, in, sizeof in);
  if (n <= 0) return n == 0 || (errno != EAGAIN && errno != EINTR) ? -1 : 0;
  size_t heads = count_heads(in, (size_t)n, tail);
  if (body_fd >= 0) {
    owed[fd].answers += (unsigned)heads;
    return 0;
  }
  while (heads-- > 0) {
    size_t sent = 0;
    while (sent < response_size) {  /* small responses: the socket takes them */
      ssize_t w = write(fd, response + sent, response_size - sent);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return -1;
      sent += (size_t)w;
    }
  }
  return 0;
}

/* --file: sends what `fd` is owed. Returns -1 on an error, 1 when the
 * socket is full (the rest waits for EPOLLOUT), 0 when all is sent. */
static int send_owed(int fd) {
  struct owed *o = &owed[fd];
  while (o->answers > 0) {
    while (o->head_sent < response_size) {
      ssize_t w = write(fd, response + o->head_sent, response_size - o->head_sent);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && errno == EAGAIN) return 1;
      if (w <= 0) return -1;
      o->head_sent += (size_t)w;
    }
    while (o->body_sent < body_size) {
      ssize_t w = sendfile(fd, body_fd, &o->body_sent, (size_t)(body_size - o->body_sent));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && errno == EAGAIN) return 1;
      if (w <= 0) return -1;
    }
    o->answers--;
    o->head_sent = 0;
    o->body_sent = 0;
  }
  return 0;
}

static int usage(const char *name) {
  fprintf(stderr, "usage: %s PORT BODY_BYTES\n       %s PORT --file PATH\n", name, name);
  return 2;
}

int main(int argc, char **argv) {
  if (argc != 3 && !(argc == 4 && strcmp(argv[2], "--file") == 0)) return usage(argv[0]);
  const int port = atoi(argv[1]);
  size_t body = 0;
  if (argc == 4) {
    struct stat st;
    body_fd = open(argv[3], O_RDONLY | O_CLOEXEC);
    if (body_fd < 0 || fstat(body_fd, &st) != 0) {
      perror(argv[3]);
      return 1;
    }
    body_size = st.st_size;
    body = (size_t)st.st_size;
    owed_size = 1 << 16;
    owed = calloc((size_t)owed_size, sizeof *owed);
  } else {
    body = (size_t)strtoul(argv[2], NULL, 10);
  }
  char head[128];
  const int head_size = snprintf(head, sizeof head,
                                 "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n\r\n", body);
  response_size = (size_t)head_size + (body_fd >= 0 ? 0 : body);
  response = malloc(response_size);
  memcpy(response, head, (size_t)head_size);
  if (body_fd < 0) memset(response + head_size, 'a', body);

  int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int on = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listener, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(listener, 4096) != 0) {
    perror("floor_server: bind/listen");
    return 1;
  }
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)listener << 32};
  epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev);
  /* Each connection's carried-over match length lives in the event's data. */
  struct epoll_event events[kMaxEvents];
  for (;;) {
    int ready = epoll_wait(ep, events, kMaxEvents, -1);
    for (int i = 0; i < ready; ++i) {
      int fd = (int)(events[i].data.u64 >> 32);
      if (fd == listener) {
        int conn;
        while ((conn = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
          if (body_fd >= 0 && conn >= owed_size) {
            close(conn);
            continue;
          }
          setsockopt(conn, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
          struct epoll_event cev = {.events = EPOLLIN, .data.u64 = (uint64_t)conn << 32};
          epoll_ctl(ep, EPOLL_CTL_ADD, conn, &cev);
        }
        continue;
      }
      int tail = (int)(events[i].data.u64 & 0xffffffff);
      const int was_full = body_fd >= 0 && owed[fd].answers > 0;
      int full = 0;
      if (((events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) && serve(fd, &tail) < 0) ||
          (body_fd >= 0 && (full = send_owed(fd)) < 0)) {
        if (body_fd >= 0) memset(&owed[fd], 0, sizeof owed[fd]);
        close(fd);
        continue;
      }
      if (tail != (int)(events[i].data.u64 & 0xffffffff) || full != was_full) {
        struct epoll_event cev = {.events = full ? EPOLLIN | EPOLLOUT : EPOLLIN,
                                  .data.u64 = ((uint64_t)fd << 32) | (uint32_t)tail};
        epoll_ctl(ep, EPOLL_CTL_MOD, fd, &cev);
      }
    }
  }
}
