// driver: the one load generator of the library comparison (README.md). The
// same program, single-threaded on raw non-blocking sockets and epoll, loads
// every echo server, so that the servers differ and nothing else does.
//
//   driver pingpong --port P --conns N --size S --seconds T [--warmup W]
//   driver latency  --port P --conns N --size S --rate R --seconds T [--warmup W]
//   driver connect  --port P --concurrency C --seconds T [--warmup W]
//
// Each mode prints one line of JSON on stdout and exits 0, or names what went
// wrong on stderr and exits 1: a byte echoed wrong, a connection closed or
// reset by the server, a socket error. With --server-pid PID the line also
// holds the server's CPU time over the measured seconds (utime + stime of
// all its threads, from /proc/PID/stat).
//
// Messages are checked byte for byte. Message `seq` of connection `conn` is
// a slice of a fixed pseudo-random pattern, at an offset hashed from both,
// so a server that drops, repeats, reorders or crosses bytes between
// connections fails the check. Slicing a pattern made once keeps the
// driver's own cost per message to a send and a memcmp: generating each
// message afresh would make the driver, not the server, the slower side
// for large messages.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

namespace {

[[noreturn]] __attribute__((format(printf, 1, 2))) void die(const char* format, ...) {
  std::fputs("driver: ", stderr);
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
  std::fputc('\n', stderr);
  std::exit(1);
}

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t seconds_to_ns(double seconds) { return static_cast<uint64_t>(std::llround(seconds * 1e9)); }

struct Options {
  std::string mode;
  int port = 0;
  int conns = 1;
  size_t size = 1024;
  double seconds = 5;
  double warmup = 1;
  double rate = 1000;
  int concurrency = 16;
  int server_pid = 0;
};

int usage() {
  std::fprintf(stderr,
               "usage: driver pingpong --port P --conns N --size S --seconds T [--warmup W]\n"
               "       driver latency  --port P --conns N --size S --rate R --seconds T [--warmup W]\n"
               "       driver connect  --port P --concurrency C --seconds T [--warmup W]\n"
               "  any mode: [--server-pid PID] to report the server's CPU seconds\n");
  return 2;
}

bool parse_options(int argc, char** argv, Options* o) {
  if (argc < 2) return false;
  o->mode = argv[1];
  if (o->mode != "pingpong" && o->mode != "latency" && o->mode != "connect") return false;
  for (int i = 2; i < argc; i += 2) {
    if (i + 1 >= argc) return false;
    const std::string flag = argv[i];
    char* end = nullptr;
    const double value = std::strtod(argv[i + 1], &end);
    if (*end != '\0' || !(value >= 0)) return false;
    if (flag == "--port" && value >= 1 && value <= 65535) {
      o->port = static_cast<int>(value);
    } else if (flag == "--conns" && value >= 1 && value <= 1000000) {
      o->conns = static_cast<int>(value);
    } else if (flag == "--size" && value >= 1 && value <= 64 << 20) {
      o->size = static_cast<size_t>(value);
    } else if (flag == "--seconds" && value > 0) {
      o->seconds = value;
    } else if (flag == "--warmup") {
      o->warmup = value;
    } else if (flag == "--rate" && value > 0) {
      o->rate = value;
    } else if (flag == "--concurrency" && value >= 1 && value <= 1000000) {
      o->concurrency = static_cast<int>(value);
    } else if (flag == "--server-pid" && value >= 1) {
      o->server_pid = static_cast<int>(value);
    } else {
      return false;
    }
  }
  return o->port != 0;
}

// The server's user plus system CPU time so far, in seconds; 0 without a pid.
double server_cpu_seconds(int pid) {
  if (pid == 0) return 0;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* file = std::fopen(path, "r");
  if (file == nullptr) die("%s: %s", path, std::strerror(errno));
  char line[1024];
  const bool read = std::fgets(line, sizeof line, file) != nullptr;
  std::fclose(file);
  // The command name (field 2) may hold spaces and parentheses, so fields
  // are counted from the last ')': field 3 starts two bytes after it, and
  // utime and stime are fields 14 and 15.
  const char* p = read ? std::strrchr(line, ')') : nullptr;
  unsigned long long utime = 0, stime = 0;
  const char* format = "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu";
  if (p == nullptr || std::sscanf(p + 2, format, &utime, &stime) != 2) die("%s: unexpected format", path);
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Ten thousand connections need more descriptors than the usual soft limit.
void raise_descriptor_limit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The bytes every message is cut from (see the file comment).
class Pattern {
 public:
  explicit Pattern(size_t message_size) {
    bytes_.resize(std::max<size_t>(4 << 20, 2 * message_size) + 8);
    uint64_t state = 0x853C49E6748FEA9Bull;
    for (size_t i = 0; i + 8 <= bytes_.size(); i += 8) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      std::memcpy(&bytes_[i], &state, 8);
    }
    slices_ = bytes_.size() - 8 - message_size + 1;
  }

  const char* message(uint64_t conn, uint64_t seq) const {
    return bytes_.data() + splitmix64((conn << 40) ^ seq) % slices_;
  }

 private:
  size_t slices_ = 0;  // offsets a whole message fits behind
  std::vector<char> bytes_;
};

// Exits naming the first byte of `got` that differs from `expected`.
void check_bytes(const char* got, const char* expected, size_t n, uint64_t conn, uint64_t seq, size_t at) {
  if (std::memcmp(got, expected, n) == 0) return;
  size_t i = 0;
  while (got[i] == expected[i]) ++i;
  die("connection %llu, message %llu: byte %zu is 0x%02x, sent 0x%02x", static_cast<unsigned long long>(conn),
      static_cast<unsigned long long>(seq), at + i, static_cast<unsigned char>(got[i]),
      static_cast<unsigned char>(expected[i]));
}

sockaddr_in server_address(int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  return address;
}

// A connection for pingpong and latency: connected (blocking, before the
// clock starts), then non-blocking, without Nagle's delay.
int open_connection(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket: %s", std::strerror(errno));
  const sockaddr_in address = server_address(port);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    die("connect to 127.0.0.1:%d: %s", port, std::strerror(errno));
  }
  int on = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

// Edge-triggered for both directions: a connection is registered once and
// never modified, and a read that returns less than asked means the socket
// is drained (the next arrival is a new edge), so no read is spent on EAGAIN.
void watch(int epoll_fd, int fd, uint32_t token) {
  epoll_event event{};
  event.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  event.data.u32 = token;
  if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &event) != 0) die("epoll_ctl: %s", std::strerror(errno));
}

[[noreturn]] void die_socket_error(int fd, uint64_t conn, const char* what) {
  int err = 0;
  socklen_t length = sizeof err;
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &length);
  die("connection %llu: %s: %s", static_cast<unsigned long long>(conn), what,
      err != 0 ? std::strerror(err) : "closed by the server");
}

// Writes what the socket takes; false on EAGAIN, dies on an error.
bool send_bytes(int fd, const char* data, size_t n, size_t* sent, uint64_t conn) {
  while (*sent < n) {
    ssize_t written = send(fd, data + *sent, n - *sent, MSG_NOSIGNAL);
    if (written > 0) {
      *sent += static_cast<size_t>(written);
    } else if (errno == EAGAIN) {
      return false;
    } else if (errno != EINTR) {
      die("connection %llu: send: %s", static_cast<unsigned long long>(conn), std::strerror(errno));
    }
  }
  return true;
}

// Reads into buf; 0 when the socket has nothing (EAGAIN); dies on the
// server's close or an error.
size_t receive_bytes(int fd, char* buf, size_t capacity, uint64_t conn) {
  for (;;) {
    ssize_t n = recv(fd, buf, capacity, 0);
    if (n > 0) return static_cast<size_t>(n);
    if (n == 0) die("connection %llu: closed by the server", static_cast<unsigned long long>(conn));
    if (errno == EAGAIN) return 0;
    if (errno != EINTR) die("connection %llu: recv: %s", static_cast<unsigned long long>(conn), std::strerror(errno));
  }
}

constexpr size_t kReadSize = 64 * 1024;
constexpr int kMaxEvents = 256;

// Phases of a run: warm-up, then the measured seconds.
struct Window {
  uint64_t start;
  uint64_t measure_from;
  uint64_t end;
  Window(const Options& o, uint64_t now)
      : start(now), measure_from(now + seconds_to_ns(o.warmup)), end(measure_from + seconds_to_ns(o.seconds)) {}
};

// What the measured seconds of a run counted.
struct Measured {
  uint64_t completed = 0;  // messages or connections
  double seconds = 0;
  double server_cpu = 0;   // 0 without --server-pid
};

// Runs the event loop of a closed-loop mode (pingpong, connect) through the
// warm-up and the measured seconds, passing each event to on_event(token,
// events); `completed` is the mode's running count.
template <typename OnEvent>
Measured measure(const Options& o, int epoll_fd, const uint64_t& completed, OnEvent on_event) {
  const Window window(o, now_ns());
  bool measuring = false;
  uint64_t completed_before = 0, measure_start = 0, now = 0;
  double cpu_before = 0;
  epoll_event events[kMaxEvents];
  for (;;) {
    now = now_ns();
    if (!measuring && now >= window.measure_from) {
      measuring = true;
      completed_before = completed;
      measure_start = now;
      cpu_before = server_cpu_seconds(o.server_pid);
    }
    if (now >= window.end) break;
    const uint64_t next = measuring ? window.end : window.measure_from;
    const int timeout_ms = static_cast<int>((next - now + 999999) / 1000000);
    const int n = epoll_wait(epoll_fd, events, kMaxEvents, timeout_ms);
    if (n < 0 && errno != EINTR) die("epoll_wait: %s", std::strerror(errno));
    for (int i = 0; i < n; ++i) on_event(events[i].data.u32, events[i].events);
  }
  return {completed - completed_before, static_cast<double>(now - measure_start) / 1e9,
          server_cpu_seconds(o.server_pid) - cpu_before};
}

// ---- pingpong: one message in flight per connection -----------------------

struct PingConnection {
  int fd = -1;
  uint32_t index = 0;
  uint64_t seq = 0;
  const char* message = nullptr;
  size_t sent = 0;
  size_t received = 0;
};

int run_pingpong(const Options& o) {
  const Pattern pattern(o.size);
  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  std::vector<PingConnection> conns(static_cast<size_t>(o.conns));
  for (uint32_t i = 0; i < conns.size(); ++i) {
    conns[i].fd = open_connection(o.port);
    conns[i].index = i;
    watch(epoll_fd, conns[i].fd, i);
  }
  uint64_t completed = 0;
  auto start_message = [&](PingConnection& c) {
    c.message = pattern.message(c.index, c.seq);
    c.sent = 0;
    c.received = 0;
    send_bytes(c.fd, c.message, o.size, &c.sent, c.index);
  };
  std::vector<char> buf(kReadSize);
  auto receive = [&](PingConnection& c) {
    for (;;) {
      const size_t n = receive_bytes(c.fd, buf.data(), buf.size(), c.index);
      if (n == 0) return;
      if (n > c.sent - c.received) die("connection %u: the server sent bytes that were never sent to it", c.index);
      check_bytes(buf.data(), c.message + c.received, n, c.index, c.seq, c.received);
      c.received += n;
      if (c.received == o.size) {
        ++completed;
        ++c.seq;
        start_message(c);
      }
      if (n < buf.size()) return;
    }
  };

  for (auto& c : conns) start_message(c);
  const Measured m = measure(o, epoll_fd, completed, [&](uint32_t token, uint32_t events) {
    PingConnection& c = conns[token];
    if (events & EPOLLERR) die_socket_error(c.fd, c.index, "socket error");
    if ((events & EPOLLOUT) && c.sent < o.size) send_bytes(c.fd, c.message, o.size, &c.sent, c.index);
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)) receive(c);
  });
  const double cpu = m.server_cpu;
  const uint64_t messages = m.completed;
  std::printf("{\"mode\":\"pingpong\",\"conns\":%d,\"size\":%zu,\"seconds\":%.3f,\"messages\":%llu,\"bytes\":%llu,",
              o.conns, o.size, m.seconds, static_cast<unsigned long long>(messages), static_cast<unsigned long long>(messages * o.size));
  if (o.server_pid != 0) std::printf("\"server_cpu_s\":%.2f,", cpu);
  std::printf("\"verified\":true}\n");
  return 0;
}

// ---- latency: an open-loop schedule of sends -------------------------------

struct InFlight {
  const char* message;
  uint64_t seq;
  uint64_t due;  // when the schedule sends it; its latency counts from here
  size_t sent = 0;
  size_t received = 0;
  bool measured;  // due within the measured seconds
};

struct LatencyConnection {
  int fd = -1;
  uint32_t index = 0;
  uint64_t seq = 0;
  std::deque<InFlight> queue;  // sent, or due and waiting for the socket, in order
  size_t unsent = 0;           // queue[unsent] is the first message not wholly sent
};

int run_latency(const Options& o) {
  const Pattern pattern(o.size);
  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  std::vector<LatencyConnection> conns(static_cast<size_t>(o.conns));
  for (uint32_t i = 0; i < conns.size(); ++i) {
    conns[i].fd = open_connection(o.port);
    conns[i].index = i;
    watch(epoll_fd, conns[i].fd, i);
  }
  const uint32_t timer_token = UINT32_MAX;
  const int timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  epoll_event timer_event{};
  timer_event.events = EPOLLIN;
  timer_event.data.u32 = timer_token;
  epoll_ctl(epoll_fd, EPOLL_CTL_ADD, timer_fd, &timer_event);
  uint64_t timer_at = 0;
  auto arm_timer = [&](uint64_t at) {
    if (at == timer_at) return;
    timer_at = at;
    itimerspec spec{};
    spec.it_value.tv_sec = static_cast<time_t>(at / 1000000000u);
    spec.it_value.tv_nsec = static_cast<long>(at % 1000000000u);
    timerfd_settime(timer_fd, TFD_TIMER_ABSTIME, &spec, nullptr);
  };

  auto send_queued = [&](LatencyConnection& c) {
    while (c.unsent < c.queue.size()) {
      InFlight& m = c.queue[c.unsent];
      if (!send_bytes(c.fd, m.message, o.size, &m.sent, c.index)) return;
      ++c.unsent;
    }
  };
  std::vector<uint64_t> latencies;
  latencies.reserve(static_cast<size_t>(o.rate * o.seconds * 1.1) + 16);
  size_t outstanding = 0;
  std::vector<char> buf(kReadSize);
  auto receive = [&](LatencyConnection& c) {
    for (;;) {
      const size_t n = receive_bytes(c.fd, buf.data(), buf.size(), c.index);
      if (n == 0) return;
      const uint64_t arrived = now_ns();
      for (size_t at = 0; at < n;) {
        if (c.queue.empty()) die("connection %u: the server sent bytes that were never sent to it", c.index);
        InFlight& m = c.queue.front();
        const size_t take = std::min(n - at, o.size - m.received);
        if (m.received + take > m.sent) die("connection %u: the server sent bytes that were never sent to it", c.index);
        check_bytes(buf.data() + at, m.message + m.received, take, c.index, m.seq, m.received);
        m.received += take;
        at += take;
        if (m.received == o.size) {
          if (m.measured) latencies.push_back(arrived - m.due);
          c.queue.pop_front();
          --c.unsent;
          --outstanding;
        }
      }
      if (n < buf.size()) return;
    }
  };

  // Message k is due interval * k after the start, on connection k mod N:
  // the schedule never waits for replies, so a slow reply shows up as the
  // latency of the messages behind it rather than as fewer messages.
  const Window window(o, now_ns());
  const double interval_ns = 1e9 / o.rate;
  auto due = [&](uint64_t k) { return window.start + static_cast<uint64_t>(static_cast<double>(k) * interval_ns); };
  // Echoes still missing this long after the last send mean a server that
  // cannot keep up with the rate (or lost them).
  const uint64_t drain_ns = 10'000'000'000u;
  uint64_t next_k = 0;
  bool scheduling = true;
  double cpu_before = 0;
  bool measuring = false;
  epoll_event events[kMaxEvents];
  for (;;) {
    const uint64_t now = now_ns();
    if (!measuring && now >= window.measure_from) {
      measuring = true;
      cpu_before = server_cpu_seconds(o.server_pid);
    }
    while (scheduling && due(next_k) <= now) {
      LatencyConnection& c = conns[next_k % conns.size()];
      const uint64_t when = due(next_k);
      c.queue.push_back(InFlight{pattern.message(c.index, c.seq), c.seq, when, 0, 0, when >= window.measure_from});
      ++c.seq;
      ++outstanding;
      if (c.unsent == c.queue.size() - 1) send_queued(c);
      scheduling = due(++next_k) < window.end;
    }
    if (!scheduling && outstanding == 0) break;
    if (!scheduling && now >= window.end + drain_ns) {
      die("%zu messages still unanswered %.0f s after the last send", outstanding, static_cast<double>(drain_ns) / 1e9);
    }
    arm_timer(scheduling ? due(next_k) : window.end + drain_ns);
    const int n = epoll_wait(epoll_fd, events, kMaxEvents, -1);
    if (n < 0 && errno != EINTR) die("epoll_wait: %s", std::strerror(errno));
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u32 == timer_token) {
        // Clears the expiry (EAGAIN if a re-arm already did); the next
        // round arms the timer again, whatever it was.
        uint64_t expirations;
        const ssize_t cleared = read(timer_fd, &expirations, sizeof expirations);
        (void)cleared;
        timer_at = 0;
        continue;
      }
      LatencyConnection& c = conns[events[i].data.u32];
      if (events[i].events & EPOLLERR) die_socket_error(c.fd, c.index, "socket error");
      if (events[i].events & EPOLLOUT) send_queued(c);
      if (events[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)) receive(c);
    }
  }
  const double cpu = server_cpu_seconds(o.server_pid) - cpu_before;

  std::sort(latencies.begin(), latencies.end());
  auto percentile_us = [&](double q) {
    if (latencies.empty()) return 0.0;
    size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(latencies.size())));
    rank = std::clamp<size_t>(rank, 1, latencies.size());
    return static_cast<double>(latencies[rank - 1]) / 1e3;
  };
  std::printf(
      "{\"mode\":\"latency\",\"conns\":%d,\"size\":%zu,\"rate\":%.0f,\"seconds\":%.3f,\"messages\":%zu,"
      "\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f,\"p999_us\":%.1f,\"max_us\":%.1f,",
      o.conns, o.size, o.rate, o.seconds, latencies.size(), percentile_us(0.5), percentile_us(0.9),
      percentile_us(0.99), percentile_us(0.999), percentile_us(1.0));
  if (o.server_pid != 0) std::printf("\"server_cpu_s\":%.2f,", cpu);
  std::printf("\"verified\":true}\n");
  return 0;
}

// ---- connect: short connections -------------------------------------------

// Each attempt connects, sends 16 bytes, reads them back and closes. The
// client closes first, so TIME_WAIT would land here, on the client's
// ephemeral ports: at tens of thousands of connections a second the 28k
// ports of the default range run out within a second or two, and
// net.ipv4.tcp_tw_reuse is the machine's setting, not ours to change. So
// the close resets (SO_LINGER with a zero timeout): no TIME_WAIT, and the
// port is free at once. (SO_REUSEADDR would not help: it concerns bind(),
// and these sockets take their port in connect().) The server sees the
// reset as the end of the connection, after it has echoed everything.
constexpr size_t kConnectMessage = 16;

struct Attempt {
  int fd = -1;
  uint64_t id = 0;
  const char* message = nullptr;
  size_t received = 0;
  bool connected = false;
};

int run_connect(const Options& o) {
  const Pattern pattern(kConnectMessage);
  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  const sockaddr_in address = server_address(o.port);
  std::vector<Attempt> slots(static_cast<size_t>(o.concurrency));
  uint64_t next_id = 0;
  uint64_t completed = 0;

  auto send_message = [&](Attempt& a) {
    size_t sent = 0;
    if (!send_bytes(a.fd, a.message, kConnectMessage, &sent, a.id)) {
      die("connection %llu: a new socket did not take %zu bytes", static_cast<unsigned long long>(a.id),
          kConnectMessage);
    }
    a.connected = true;
  };
  auto start_attempt = [&](uint32_t slot) {
    Attempt& a = slots[slot];
    a = Attempt{};
    a.id = next_id++;
    a.message = pattern.message(0, a.id);
    a.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (a.fd < 0) die("socket: %s", std::strerror(errno));
    const linger reset{1, 0};
    setsockopt(a.fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    const int rc = connect(a.fd, reinterpret_cast<const sockaddr*>(&address), sizeof address);
    if (rc != 0 && errno != EINPROGRESS) {
      die("connect to 127.0.0.1:%d: %s%s", o.port, std::strerror(errno),
          errno == EADDRNOTAVAIL ? " (no local port left: run shorter or with fewer connections)" : "");
    }
    watch(epoll_fd, a.fd, slot);
    if (rc == 0) send_message(a);
  };
  char buf[64];
  auto on_event = [&](uint32_t slot, uint32_t events) {
    Attempt& a = slots[slot];
    if (!a.connected) {
      if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
      int err = 0;
      socklen_t length = sizeof err;
      getsockopt(a.fd, SOL_SOCKET, SO_ERROR, &err, &length);
      if (err != 0) die("connect to 127.0.0.1:%d: %s", o.port, std::strerror(err));
      send_message(a);
    }
    if (events & EPOLLERR) die_socket_error(a.fd, a.id, "socket error");
    if (!(events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP))) return;
    for (;;) {
      const size_t n = receive_bytes(a.fd, buf, sizeof buf, a.id);
      if (n == 0) return;
      if (n > kConnectMessage - a.received) die("connection %llu: the server sent bytes that were never sent to it",
                                                 static_cast<unsigned long long>(a.id));
      check_bytes(buf, a.message + a.received, n, a.id, 0, a.received);
      a.received += n;
      if (a.received == kConnectMessage) {
        close(a.fd);  // a reset: see above
        ++completed;
        start_attempt(slot);
        return;
      }
    }
  };

  for (uint32_t i = 0; i < slots.size(); ++i) start_attempt(i);
  const Measured m = measure(o, epoll_fd, completed, on_event);
  const double cpu = m.server_cpu;
  std::printf("{\"mode\":\"connect\",\"concurrency\":%d,\"seconds\":%.3f,\"connections\":%llu,", o.concurrency,
              m.seconds, static_cast<unsigned long long>(m.completed));
  if (o.server_pid != 0) std::printf("\"server_cpu_s\":%.2f,", cpu);
  std::printf("\"verified\":true}\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse_options(argc, argv, &o)) return usage();
  raise_descriptor_limit();
  if (o.mode == "pingpong") return run_pingpong(o);
  if (o.mode == "latency") return run_latency(o);
  return run_connect(o);
}
