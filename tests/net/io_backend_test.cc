// The loop's two I/O backends, epoll and io_uring, held to the same
// behaviour; and io_uring's fallback to epoll where the kernel refuses it.
// (Every other suite runs on both too: ./scripts/test sets TERN_IO.)
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <liburing.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <any>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "net/channel.h"
#include "net/connection_table.h"
#include "net/event_loop.h"
#include "net/event_loop_thread.h"
#include "net/poller.h"
#include "net/poller/io_uring_poller.h"
#include "net/socket.h"
#include "net/tcp_server.h"
#include "net/tcp_connection.h"
#include "support/eventually.h"
#include "support/loop_runner.h"
#include "support/random_bytes.h"
#include "support/raw_socket.h"

namespace tern::net {
namespace {

using namespace std::chrono_literals;
using tern::testing::LoopRunner;
using Clock = std::chrono::steady_clock;

// Whether this kernel gives this process a ring; where it does not (a
// container's seccomp profile, kernel.io_uring_disabled), the io_uring cases
// say so and skip, and the fallback test below still runs.
std::string io_uring_refusal() {
  io_uring ring{};
  int ret = io_uring_queue_init(8, &ring, 0);
  if (ret < 0) return std::strerror(-ret);
  io_uring_queue_exit(&ring);
  return {};
}

using tern::testing::eventually;

TEST(IoBackend, NamesParseBothWays) {
  EXPECT_EQ(parse_io_backend("epoll"), IoBackend::kEpoll);
  EXPECT_EQ(parse_io_backend("io_uring"), IoBackend::kIoUring);
  EXPECT_FALSE(parse_io_backend("uring").has_value());
  EXPECT_FALSE(parse_io_backend("").has_value());
  EXPECT_EQ(to_string(IoBackend::kEpoll), "epoll");
  EXPECT_EQ(to_string(IoBackend::kIoUring), "io_uring");
}

class BothBackends : public ::testing::TestWithParam<IoBackend> {
 protected:
  void SetUp() override {
    if (GetParam() == IoBackend::kIoUring) {
      std::string refusal = io_uring_refusal();
      if (!refusal.empty()) GTEST_SKIP() << "io_uring refused here: " << refusal;
    }
  }
};

INSTANTIATE_TEST_SUITE_P(Io, BothBackends,
                         ::testing::Values(IoBackend::kEpoll, IoBackend::kIoUring),
                         [](const auto& param_info) { return std::string(to_string(param_info.param)); });

TEST_P(BothBackends, TheLoopWaitsWithTheBackendItWasGiven) {
  LoopRunner runner(GetParam());
  EXPECT_EQ(runner.run([&] { return runner.loop()->io_backend(); }), GetParam());
}

TEST_P(BothBackends, APoolsLoopsFollowTheBaseLoop) {
  LoopRunner runner(GetParam());
  TcpServerOptions options;
  options.io_threads = 2;
  std::vector<IoBackend> seen;
  runner.run([&] {
    TcpServer server(runner.loop(), InetAddress(0, true), options);
    ASSERT_TRUE(server.start().ok());
    for (EventLoop* loop : server.io_loops()) seen.push_back(loop->io_backend());
  });
  ASSERT_EQ(seen.size(), 2u);
  for (IoBackend backend : seen) EXPECT_EQ(backend, GetParam());
}

TEST_P(BothBackends, TimersFireInDeadlineOrderAndNotEarly) {
  LoopRunner runner(GetParam());
  std::vector<int> order;
  std::atomic<bool> done{false};
  Clock::time_point start;
  std::atomic<int64_t> last_ms{0};
  runner.run([&] {
    EventLoop* loop = runner.loop();
    start = loop->clock().now();  // deadlines count from the loop's clock
    loop->run_after(60ms, [&] {
      order.push_back(3);
      last_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
      done = true;
    });
    loop->run_after(5ms, [&] { order.push_back(1); });
    loop->run_after(30ms, [&] { order.push_back(2); });
  });
  ASSERT_TRUE(eventually([&] { return done.load(); }));
  runner.run([] {});
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_GE(last_ms.load(), 59);  // whole milliseconds: 60 ms after 59.x
  EXPECT_LT(last_ms.load(), 1000);
}

TEST_P(BothBackends, AnEarlierTimerSetWhileWaitingCutsTheWaitShort) {
  // The loop sleeps towards a timer an hour away; a timer for 20 ms from
  // now, set from another thread, must still fire on time.
  LoopRunner runner(GetParam());
  runner.run([&] { runner.loop()->run_after(std::chrono::hours(1), [] {}); });
  std::this_thread::sleep_for(20ms);  // the loop is asleep now
  std::atomic<bool> fired{false};
  const auto start = Clock::now();
  runner.loop()->queue_in_loop([&] { runner.loop()->run_after(20ms, [&] { fired = true; }); });
  ASSERT_TRUE(eventually([&] { return fired.load(); }, 2s));
  EXPECT_LT(Clock::now() - start, 1s);
}

// A pipe's read end on a channel, counting read callbacks per loop round.
struct PipeProbe {
  explicit PipeProbe(EventLoop* loop) : fds{-1, -1} {
    EXPECT_EQ(::pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
    channel = std::make_unique<Channel>(loop, fds[0]);
  }
  ~PipeProbe() {
    channel->remove();
    ::close(fds[0]);
    ::close(fds[1]);
  }
  void write_byte() { EXPECT_EQ(::write(fds[1], "x", 1), 1); }
  int fds[2];
  std::unique_ptr<Channel> channel;
  std::atomic<int> reads{0};
};

TEST_P(BothBackends, LevelTriggeredReportsUnreadInputAgainEveryRound) {
  LoopRunner runner(GetParam());
  std::unique_ptr<PipeProbe> probe;
  runner.run([&] {
    probe = std::make_unique<PipeProbe>(runner.loop());
    probe->channel->set_read_callback([&] { ++probe->reads; });  // reads nothing
    probe->channel->enable_reading();
  });
  probe->write_byte();
  // Unread, the byte is reported round after round.
  EXPECT_TRUE(eventually([&] { return probe->reads.load() >= 5; }));
  runner.run([&] { probe.reset(); });
}

TEST_P(BothBackends, EdgeTriggeredReportsEachArrivalOnce) {
  LoopRunner runner(GetParam());
  std::unique_ptr<PipeProbe> probe;
  runner.run([&] {
    probe = std::make_unique<PipeProbe>(runner.loop());
    probe->channel->set_read_callback([&] { ++probe->reads; });  // reads nothing
    probe->channel->set_edge_triggered(true);
    probe->channel->enable_reading();
  });
  probe->write_byte();
  ASSERT_TRUE(eventually([&] { return probe->reads.load() >= 1; }));
  std::this_thread::sleep_for(50ms);
  runner.run([] {});
  EXPECT_EQ(probe->reads.load(), 1);
  probe->write_byte();  // a new arrival is a new edge
  EXPECT_TRUE(eventually([&] { return probe->reads.load() == 2; }));
  runner.run([&] { probe.reset(); });
}

TEST_P(BothBackends, InputThatCameWhileNotReadingIsReportedWhenReadingResumes) {
  for (bool edge : {false, true}) {
    LoopRunner runner(GetParam());
    std::unique_ptr<PipeProbe> probe;
    runner.run([&] {
      probe = std::make_unique<PipeProbe>(runner.loop());
      probe->channel->set_read_callback([&] {
        char c;
        if (::read(probe->fds[0], &c, 1) == 1) ++probe->reads;
      });
      probe->channel->set_edge_triggered(edge);
      probe->channel->enable_reading();
      probe->channel->disable_reading();
    });
    probe->write_byte();
    std::this_thread::sleep_for(30ms);
    runner.run([] {});
    EXPECT_EQ(probe->reads.load(), 0) << (edge ? "edge" : "level");
    runner.run([&] { probe->channel->enable_reading(); });
    EXPECT_TRUE(eventually([&] { return probe->reads.load() == 1; })) << (edge ? "edge" : "level");
    runner.run([&] { probe.reset(); });
  }
}

TEST_P(BothBackends, AClosedListenerRefusesTheNextConnectAtOnce) {
  // io_uring's poll request holds the listening socket open until it is
  // cancelled: closing a server must close its port before it returns.
  LoopRunner runner(GetParam());
  uint16_t port = 0;
  runner.run([&] {
    TcpServer server(runner.loop(), InetAddress(0, true));
    ASSERT_TRUE(server.start().ok());
    port = server.listen_address().port();
  });
  ASSERT_NE(port, 0);
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int ret = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  int err = errno;
  ::close(fd);
  EXPECT_EQ(ret, -1);
  EXPECT_EQ(err, ECONNREFUSED);
}

TEST_P(BothBackends, AChannelRemovedAndItsFdReusedInOneRoundGetsOnlyItsOwnEvents) {
  // Close a registered pipe and open another that gets the same descriptor
  // number, in one round: the old registration's events must not reach the
  // new channel, and the new one's must.
  LoopRunner runner(GetParam());
  std::unique_ptr<PipeProbe> first;
  std::unique_ptr<PipeProbe> second;
  std::atomic<int> stray{0};
  runner.run([&] {
    first = std::make_unique<PipeProbe>(runner.loop());
    first->channel->set_read_callback([&] { ++stray; });
    first->channel->enable_reading();
  });
  runner.run([&] {
    first->write_byte();  // ready, but removed before the loop polls again
    const int old_read_fd = first->fds[0];
    first.reset();
    second = std::make_unique<PipeProbe>(runner.loop());
    EXPECT_EQ(second->fds[0], old_read_fd);  // the lowest free number, reused
    second->channel->set_read_callback([&] {
      char c;
      if (::read(second->fds[0], &c, 1) == 1) ++second->reads;
    });
    second->channel->enable_reading();
  });
  std::this_thread::sleep_for(30ms);
  runner.run([] {});
  EXPECT_EQ(stray.load(), 0);
  EXPECT_EQ(second->reads.load(), 0);
  second->write_byte();
  EXPECT_TRUE(eventually([&] { return second->reads.load() == 1; }));
  runner.run([&] { second.reset(); });
}

TEST_P(BothBackends, WorkDeferredBeforeTheLoopRunsRunsBeforeItsFirstWait) {
  // A send queued before loop() (deferred to the end of a round, with
  // io_uring) must not wait for some other event to end the first wait.
  std::atomic<bool> ran{false};
  std::thread([&] {
    EventLoop loop(GetParam());
    loop.defer([&] {
      ran = true;
      loop.quit();
    });
    loop.run_after(std::chrono::seconds(10), [&] { loop.quit(); });
    const auto start = Clock::now();
    loop.loop();
    EXPECT_LT(Clock::now() - start, 5s);
  }).join();
  EXPECT_TRUE(ran.load());
}

// The inode of the socket file of the TCP connection from local_port to
// remote_port on 127.0.0.1, from /proc/net/tcp: 0 once no file holds it (a
// closed socket that still has bytes to send lives on, orphaned); -1 if
// there is no such connection.
long socket_inode(uint16_t local_port, uint16_t remote_port) {
  FILE* f = std::fopen("/proc/net/tcp", "r");
  if (f == nullptr) return -1;
  char line[512];
  long inode = -1;
  char want_local[32];
  char want_remote[32];
  std::snprintf(want_local, sizeof want_local, "0100007F:%04X", local_port);
  std::snprintf(want_remote, sizeof want_remote, "0100007F:%04X", remote_port);
  while (std::fgets(line, sizeof line, f) != nullptr) {
    char local[64], remote[64];
    unsigned long ino = 0;
    // sl local rem st tx:rx tr:when retrnsmt uid timeout inode
    if (std::sscanf(line, " %*s %63s %63s %*s %*s %*s %*s %*s %*s %lu", local, remote, &ino) != 3) {
      continue;
    }
    if (std::strcmp(local, want_local) == 0 && std::strcmp(remote, want_remote) == 0) {
      inode = static_cast<long>(ino);
    }
  }
  std::fclose(f);
  return inode;
}

TEST_P(BothBackends, AConnectionClosedWithOutputStillQueuedClosesItsSocket) {
  // 16 MiB to a client that does not read: the socket fills and the rest
  // waits (with io_uring: a send request in flight, which holds the socket
  // open until it is cancelled). Closing the connection must close the
  // socket: the client sees the end of the stream, not a stall.
  LoopRunner runner(GetParam());
  const std::string payload(16 << 20, 'x');
  std::atomic<bool> closed{false};
  ConnectionId id{};
  std::unique_ptr<TcpServer> server;
  std::promise<void> connected;
  runner.run([&] {
    server = std::make_unique<TcpServer>(runner.loop(), InetAddress(0, true));
    server->set_connection_callback([&](TcpConnection& conn) {
      if (!conn.connected()) {
        if (conn.id() == id) closed = true;
        return;
      }
      if (id.valid()) return;  // the second client: only connects
      id = conn.id();
      conn.send(payload);
      connected.set_value();
    });
    ASSERT_TRUE(server->start().ok());
  });
  tern::testing::RawClient client(server->listen_address().port());
  ASSERT_TRUE(client.ok());
  ASSERT_EQ(connected.get_future().wait_for(5s), std::future_status::ready);
  std::this_thread::sleep_for(100ms);  // the socket is full by now
  const size_t pending = runner.run([&] {
    TcpConnection* conn = runner.loop()->connections().find(id);
    size_t bytes = conn ? conn->pending_output_bytes() : 0;
    if (conn) conn->force_close();
    return bytes;
  });
  EXPECT_GT(pending, 0u) << "the test needs output still queued when it closes";
  // The client has not read: the server's socket cannot finish sending, but
  // its file must be gone (io_uring: the send request cancelled), leaving
  // the kernel an orphaned socket to flush.
  sockaddr_in client_addr{};
  socklen_t len = sizeof client_addr;
  ASSERT_EQ(::getsockname(client.fd(), reinterpret_cast<sockaddr*>(&client_addr), &len), 0);
  const uint16_t server_port = server->listen_address().port();
  EXPECT_TRUE(eventually(
      [&] { return socket_inode(server_port, ntohs(client_addr.sin_port)) == 0; }, 2s))
      << "the server's socket is still open after the close";
  const auto start = Clock::now();
  bool eof = false;
  std::string got = client.read_to_eof(&eof, 5s);
  EXPECT_LT(Clock::now() - start, 4s) << "the socket stayed open after the close";
  EXPECT_LT(got.size(), payload.size());
  EXPECT_TRUE(eventually([&] { return closed.load(); }));
  // The loop goes on serving.
  tern::testing::RawClient second(server->listen_address().port());
  EXPECT_TRUE(second.ok());
  runner.run([&] { server.reset(); });
}

TEST_P(BothBackends, BytesReceivedWhilePausedAreAllDeliveredBeforeThePeersEnd) {
  // A reader that pauses after every delivery and resumes a moment later
  // (a proxy whose client is slower than its upstream), and a peer that
  // sends 5 MiB and closes at once: with io_uring the bytes received while
  // paused and the end of the stream come together, and every byte must be
  // delivered before the close is.
  LoopRunner runner(GetParam());
  const std::string payload = tern::testing::random_bytes(5 << 20, 3);
  std::string received;
  std::atomic<bool> closed{false};
  size_t received_at_close = 0;
  std::unique_ptr<TcpServer> server;
  runner.run([&] {
    server = std::make_unique<TcpServer>(runner.loop(), InetAddress(0, true));
    server->set_connection_callback([&](TcpConnection& conn) {
      if (conn.connected()) return;
      received_at_close = received.size();
      closed = true;
    });
    server->set_message_callback([&](TcpConnection& conn, Buffer& input) {
      received.append(input.peek(), input.readable_bytes());
      input.retrieve_all();
      conn.stop_reading();
      const ConnectionId id = conn.id();
      runner.loop()->run_after(1ms, [id] {
        if (TcpConnection* c = id.loop->connections().find(id)) c->start_reading();
      });
    });
    ASSERT_TRUE(server->start().ok());
  });
  {
    tern::testing::RawClient client(server->listen_address().port());
    ASSERT_TRUE(client.ok());
    ASSERT_TRUE(client.send_all(payload));
  }  // closed: the end follows the last bytes
  ASSERT_TRUE(eventually([&] { return closed.load(); }, 20s));
  runner.run([&] {
    EXPECT_EQ(received_at_close, payload.size());
    EXPECT_TRUE(received == payload) << "the bytes came changed or out of order";
    server.reset();
  });
}

TEST_P(BothBackends, TheCloseCallbackTellsAResetFromAnEnd) {
  // close_error() is what lets a reader of a body that ends at the close
  // (an HTTP/1.0 response) tell a whole body from a cut one.
  LoopRunner runner(GetParam());
  std::atomic<int> received{0};
  std::atomic<int> closed{0};
  std::vector<int> errors;  // close_error() of each
  std::unique_ptr<TcpServer> server;
  runner.run([&] {
    server = std::make_unique<TcpServer>(runner.loop(), InetAddress(0, true));
    server->set_connection_callback([&](TcpConnection& conn) {
      if (conn.connected()) {
        EXPECT_EQ(conn.close_error(), 0);  // none while open
        return;
      }
      errors.push_back(conn.close_error());
      ++closed;
    });
    server->set_message_callback([&](TcpConnection&, Buffer& input) {
      input.retrieve_all();
      ++received;
    });
    ASSERT_TRUE(server->start().ok());
  });
  for (int i = 0; i < 2; ++i) {
    tern::testing::RawClient client(server->listen_address().port());
    ASSERT_TRUE(client.ok());
    ASSERT_TRUE(client.send_all("bytes"));
    ASSERT_TRUE(eventually([&] { return received.load() == i + 1; }, 10s));
    if (i == 1) client.reset();
  }  // the first ends, the second is reset
  ASSERT_TRUE(eventually([&] { return closed.load() == 2; }, 10s));
  runner.run([&] {
    std::sort(errors.begin(), errors.end());
    EXPECT_EQ(errors, (std::vector<int>{0, ECONNRESET}));
    server.reset();
  });
}

TEST_P(BothBackends, AResetWhileReadingIsPausedIsAResetNotAnEnd) {
  // A connection that reads nothing (a proxy holding back its upstream)
  // while its output waits for room polls for output alone: a reset comes
  // as an error and a hang-up without input. The error is the cause, not
  // the hang-up: before, on epoll, the hang-up closed it first as a clean end.
  LoopRunner runner(GetParam());
  std::atomic<int> opened{0};
  std::atomic<int> closed{0};
  int error = -1;  // close_error() when it closed
  std::unique_ptr<TcpServer> server;
  runner.run([&] {
    server = std::make_unique<TcpServer>(runner.loop(), InetAddress(0, true));
    server->set_connection_callback([&](TcpConnection& conn) {
      if (conn.connected()) {
        conn.stop_reading();
        conn.send(std::string(8 << 20, 'x'));  // more than the sockets hold: output waits for room
        ++opened;
        return;
      }
      error = conn.close_error();
      ++closed;
    });
    ASSERT_TRUE(server->start().ok());
  });
  tern::testing::RawClient client(server->listen_address().port());
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(eventually([&] { return opened.load() == 1; }, 10s));
  std::this_thread::sleep_for(100ms);  // the socket's buffers fill
  client.reset();
  ASSERT_TRUE(eventually([&] { return closed.load() == 1; }, 10s));
  runner.run([&] {
    EXPECT_NE(error, 0) << "a reset taken for a clean end";
    server.reset();
  });
}

TEST_P(BothBackends, AHalfClosedConnectionGetsEveryByteOfLargePiecesBeforeThePeersEnd) {
  // The server shuts its side at once; the peer then sends 64 KiB, 100 B
  // to 1 MiB more and its end, which with both sides shut the kernel
  // reports as a hang-up. With io_uring the large pieces make the connection read for
  // itself mid-stream (its receive cancelled, its poll for input armed a
  // round later): the hang-up must not close it before it has read every
  // byte. Both trigger modes (edge-triggered connections poll for output
  // all along), 40 connections each. Edge-triggered, an end that comes
  // with the last bytes must be read after them: no later edge reports it.
  // (Before, on epoll, such a connection stayed open.)
  for (TriggerMode trigger : {TriggerMode::kLevel, TriggerMode::kEdge}) {
    LoopRunner runner(GetParam());
    struct Seen {
      std::string bytes;
      size_t at_close = 0;
      bool closed = false;
    };
    std::vector<Seen> seen(40);
    std::atomic<int> closed{0};
    std::unique_ptr<TcpServer> server;
    runner.run([&] {
      TcpServerOptions options;
      options.trigger = trigger;
      server = std::make_unique<TcpServer>(runner.loop(), InetAddress(0, true), options);
      server->set_connection_callback([&](TcpConnection& conn) {
        if (conn.connected()) {
          conn.shutdown();
          return;
        }
        Seen& s = seen[static_cast<size_t>(std::any_cast<int>(conn.context()))];
        s.at_close = s.bytes.size();
        s.closed = true;
        ++closed;
      });
      server->set_message_callback([&](TcpConnection& conn, Buffer& input) {
        if (!conn.context().has_value()) {
          // The first byte of each peer's bytes says which it is.
          conn.context() = static_cast<int>(static_cast<unsigned char>(*input.peek()));
        }
        seen[static_cast<size_t>(std::any_cast<int>(conn.context()))].bytes.append(input.view());
        input.retrieve_all();
      });
      ASSERT_TRUE(server->start().ok());
    });
    std::vector<std::string> sent(seen.size());
    for (size_t i = 0; i < seen.size(); ++i) {
      const size_t more[] = {100, 16 << 10, 64 << 10, 1 << 20};
      sent[i] = tern::testing::random_bytes((64 << 10) + more[i % 4], static_cast<uint32_t>(i + 1));
      sent[i][0] = static_cast<char>(i);
      tern::testing::RawClient client(server->listen_address().port());
      ASSERT_TRUE(client.ok());
      bool eof = false;
      client.read_to_eof(&eof);
      ASSERT_TRUE(eof) << "the server did not shut its side";
      ASSERT_TRUE(client.send_all(sent[i]));
    }  // each closed as soon as its bytes are sent
    EXPECT_TRUE(eventually([&] { return closed.load() == static_cast<int>(seen.size()); }, 20s));
    runner.run([&] {
      for (size_t i = 0; i < seen.size(); ++i) {
        EXPECT_EQ(seen[i].at_close, sent[i].size()) << "connection " << i << ", trigger " << static_cast<int>(trigger);
        EXPECT_TRUE(seen[i].bytes == sent[i]) << "connection " << i << ": the bytes came changed or out of order";
      }
      server.reset();
    });
  }
}

// io_uring's receive buffers, in both of their ways: large ones the kernel
// consumes in parts (the bytes of several connections in one buffer, one
// after the other) and small ones taken whole (TERN_IO_URING_BUFFERS=whole,
// and kernels before 6.12).
class ReceiveBuffers : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    std::string refusal = io_uring_refusal();
    if (!refusal.empty()) GTEST_SKIP() << "io_uring refused here: " << refusal;
    ::setenv("TERN_IO_URING_BUFFERS", GetParam(), 1);
  }
  void TearDown() override { ::unsetenv("TERN_IO_URING_BUFFERS"); }
};

// An echo server on `runner`'s loop, on a free loopback port; null if it
// could not start.
std::unique_ptr<TcpServer> start_echo_server(LoopRunner& runner) {
  std::unique_ptr<TcpServer> server;
  runner.run([&] {
    server = std::make_unique<TcpServer>(runner.loop(), InetAddress(0, true));
    server->set_message_callback([](TcpConnection& conn, Buffer& input) { conn.send(input); });
    if (!server->start().ok()) server.reset();
  });
  return server;
}

INSTANTIATE_TEST_SUITE_P(Io, ReceiveBuffers, ::testing::Values("incremental", "whole"),
                         [](const auto& param_info) { return std::string(param_info.param); });

TEST_P(ReceiveBuffers, ManyConnectionsEchoEveryByteWhileSomeEndMidway) {
  // 40 connections to an echo server send chunks of 1 byte to 150 KiB in
  // turns, each round's chunks all sent before any echo is read, so that
  // the server's receives of one round share and cross buffers; every
  // fourth connection ends halfway (an end of stream completes a receive
  // with no bytes in the middle of a buffer). Every echo must come back
  // as sent.
  LoopRunner runner(IoBackend::kIoUring);
  const bool in_parts = runner.run([&] {
    return dynamic_cast<IoUringPoller&>(runner.loop()->poller()).consumes_buffers_in_parts();
  });
  if (std::string_view(GetParam()) == "whole") {
    EXPECT_FALSE(in_parts);
  } else if (!in_parts) {
    GTEST_SKIP() << "this kernel consumes provided buffers whole only (before 6.12)";
  }
  std::unique_ptr<TcpServer> server = start_echo_server(runner);
  ASSERT_NE(server, nullptr);
  constexpr int kClients = 40;
  constexpr int kRounds = 12;
  std::vector<std::unique_ptr<tern::testing::RawClient>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<tern::testing::RawClient>(server->listen_address().port()));
    ASSERT_TRUE(clients.back()->ok());
  }
  std::mt19937 random(7);
  size_t echoed = 0;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::string> sent(kClients);
    for (int i = 0; i < kClients; ++i) {
      if (!clients[i]) continue;
      if (i % 4 == 0 && round == kRounds / 2) {
        clients[i].reset();  // the end, between other connections' bytes
        continue;
      }
      const size_t size = random() % 3 == 0 ? 1 + random() % 100 : 1 + random() % (150 * 1024);
      sent[i] = tern::testing::random_bytes(size, static_cast<uint32_t>(round * kClients + i));
      ASSERT_TRUE(clients[i]->send_all(sent[i]));
    }
    for (int i = 0; i < kClients; ++i) {
      if (!clients[i]) continue;
      const std::string back = clients[i]->read_exactly(sent[i].size());
      ASSERT_EQ(back.size(), sent[i].size()) << "connection " << i << ", round " << round;
      ASSERT_TRUE(back == sent[i]) << "connection " << i << ", round " << round
                                   << ": the echo came changed";
      echoed += back.size();
    }
  }
  EXPECT_GT(echoed, size_t{10} << 20);
  clients.clear();
  runner.run([&] { server.reset(); });
}

// Read system calls the calling thread has made (/proc/thread-self/io);
// -1 where the kernel keeps no such count.
long read_calls_of_this_thread() {
  FILE* f = std::fopen("/proc/thread-self/io", "r");
  if (f == nullptr) return -1;
  long calls = -1;
  char line[128];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "syscr: %ld", &calls) == 1) break;
  }
  std::fclose(f);
  return calls;
}

TEST_P(ReceiveBuffers, AConnectionSentLargePiecesReadsThemItselfAndSmallOnesComeByReceivesAgain) {
  // One connection echoes, in turns, 64 KiB messages (which it then reads
  // itself: the loop thread's read calls grow) and 100-byte ones (which
  // the ring receives again: they do not), each turn's messages sent back
  // to back before any echo is read, so that a switch happens with bytes of
  // both kinds in the socket. Every byte comes back in order.
  LoopRunner runner(IoBackend::kIoUring);
  if (runner.run([] { return read_calls_of_this_thread(); }) < 0) {
    GTEST_SKIP() << "no /proc/thread-self/io here";
  }
  std::unique_ptr<TcpServer> server = start_echo_server(runner);
  ASSERT_NE(server, nullptr);
  tern::testing::RawClient client(server->listen_address().port());
  ASSERT_TRUE(client.ok());
  uint32_t seed = 1;
  const auto echo = [&](size_t size, int count) {
    std::string sent;
    for (int i = 0; i < count; ++i) sent += tern::testing::random_bytes(size, seed++);
    if (!client.send_all(sent)) return false;
    const std::string back = client.read_exactly(sent.size());
    return back == sent;
  };
  // Counted on the loop thread; each count costs a wake-up read or two.
  const auto reads = [&] { return runner.run([] { return read_calls_of_this_thread(); }); };
  for (int turn = 0; turn < 3; ++turn) {
    long before = reads();
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(echo(64 * 1024, 4)) << "64 KiB echoes, turn " << turn;
    EXPECT_GE(reads() - before, 8) << "the large pieces did not come by reads, turn " << turn;
    ASSERT_TRUE(echo(100, 1)) << "the first small echo, turn " << turn;  // the read that hands back
    before = reads();
    for (int i = 0; i < 200; ++i) ASSERT_TRUE(echo(100, 1 + i % 3)) << "small echoes, turn " << turn;
    EXPECT_LE(reads() - before, 10) << "the small pieces did not come by receives, turn " << turn;
  }
  runner.run([&] { server.reset(); });
}

// io_uring_setup refused (ENOSYS), as by a seccomp profile or an old kernel.
void refuse_io_uring() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
    std::fprintf(stderr, "seccomp: %s\n", std::strerror(errno));
    std::_Exit(3);
  }
}

TEST(IoBackendDeathTest, WithoutIoUringLoopsFallBackToEpollWithOneWarning) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // In a child: two loops on two threads ask for io_uring and get epoll;
  // the warning is printed once, whatever the number of loops.
  EXPECT_EXIT(
      {
        refuse_io_uring();
        EventLoop loop(IoBackend::kIoUring);
        IoBackend other = IoBackend::kDefault;
        std::thread([&] {
          EventLoop second(IoBackend::kIoUring);
          other = second.io_backend();
        }).join();
        const bool ok = loop.io_backend() == IoBackend::kEpoll && other == IoBackend::kEpoll;
        std::fprintf(stderr, "end of child\n");
        std::fflush(stderr);
        std::_Exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      "io_uring unavailable \\(Function not implemented\\); using epoll\nend of child");
}

TEST(IoBackendDeathTest, TheDefaultIsIoUringAndWithoutItEpollSaidAsInformation) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ::unsetenv("TERN_IO");
        const bool io_uring_first = default_io_backend() == IoBackend::kIoUring;
        refuse_io_uring();
        EventLoop loop;
        std::fprintf(stderr, "end of child\n");
        std::fflush(stderr);
        std::_Exit(io_uring_first && loop.io_backend() == IoBackend::kEpoll ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      "info \\[[0-9]+\\] io_uring unavailable \\(Function not implemented\\); using epoll\nend of child");
}

}  // namespace
}  // namespace tern::net
