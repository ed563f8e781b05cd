// ConnectionPool against a real upstream: a TcpServer echo server on
// loopback, on its own loop, counting the connections it accepts and sees
// closed. The pool runs on a second loop; everything the users record is
// touched only there and read by the test through LoopRunner::run.
#include "net/connection_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "net/buffer.h"
#include "net/connection_table.h"
#include "net/event_loop.h"
#include "net/tcp_connection.h"
#include "net/tcp_server.h"
#include "support/loop_runner.h"
#include "support/raw_socket.h"
#include "support/temp_dir.h"

namespace tern::net {
namespace {

using namespace std::chrono_literals;
using tern::testing::LoopRunner;
using Clock = std::chrono::steady_clock;
using Failure = ConnectionPool::Failure;

// An echo server that closes a connection when it receives "bye".
class Upstream {
 public:
  Upstream(LoopRunner& runner, uint16_t port) : runner_(runner) {
    runner_.run([&] {
      server_ = std::make_unique<TcpServer>(runner_.loop(), InetAddress(port, true));
      server_->set_connection_callback([this](TcpConnection& conn) {
        if (conn.connected()) {
          ++accepts;
          live_.push_back(conn.id());
        } else {
          ++closes;
          std::erase(live_, conn.id());
        }
      });
      server_->set_message_callback([](TcpConnection& conn, Buffer& input) {
        std::string data = input.retrieve_all_as_string();
        if (data == "bye") return conn.force_close();
        conn.send(data);
      });
      auto started = server_->start();
      ok_ = started.ok();
      EXPECT_TRUE(ok_) << started.error().message();
    });
  }
  ~Upstream() {
    runner_.run([&] { server_.reset(); });
  }
  Upstream(const Upstream&) = delete;
  Upstream& operator=(const Upstream&) = delete;

  bool ok() const { return ok_; }
  uint16_t port() const { return server_->listen_address().port(); }
  // Closes every connection from the server's side.
  void close_all() {
    runner_.run([&] {
      for (ConnectionId id : std::vector<ConnectionId>(live_)) {
        if (TcpConnection* conn = runner_.loop()->connections().find(id)) conn->force_close();
      }
    });
  }

  std::atomic<int> accepts{0};
  std::atomic<int> closes{0};

 private:
  LoopRunner& runner_;
  std::unique_ptr<TcpServer> server_;
  std::vector<ConnectionId> live_;  // server loop only
  bool ok_ = false;
};

// Records what the pool tells it, on the pool's loop.
class TestUser final : public ConnectionPool::User {
 public:
  TestUser(std::string name, std::vector<std::string>* log, const bool* in_acquire)
      : name_(std::move(name)), log_(log), in_acquire_(in_acquire) {}

  void on_lease(TcpConnection& conn) override {
    log_->push_back(name_ + " lease");
    ++leases;
    conn_id = conn.id();
    input_empty_at_lease = conn.input().empty();
    lease_inside_acquire = *in_acquire_;
  }
  void on_lease_failed(Failure f, std::string_view why) override {
    log_->push_back(name_ + (f == Failure::kOverloaded ? " overloaded" : " connect-failed"));
    ++failures;
    failure = f;
    failure_why = std::string(why);
    failed_inside_acquire = *in_acquire_;
  }
  void on_upstream_message(TcpConnection&, Buffer& input) override {
    if (keep_input) return;
    received += input.retrieve_all_as_string();
  }
  void on_upstream_drained(TcpConnection&) override { ++drained; }
  void on_upstream_closed(TcpConnection&) override {
    log_->push_back(name_ + " closed");
    ++closed;
  }

  int leases = 0;
  int failures = 0;
  int drained = 0;
  int closed = 0;
  Failure failure = Failure::kConnectFailed;
  std::string failure_why;
  bool lease_inside_acquire = false;
  bool failed_inside_acquire = false;
  bool input_empty_at_lease = false;
  bool keep_input = false;  // leave received bytes in the connection's input
  ConnectionId conn_id;
  std::string received;

 private:
  const std::string name_;
  std::vector<std::string>* const log_;
  const bool* const in_acquire_;
};

class ConnectionPoolTest : public ::testing::Test {
 protected:
  void TearDown() override {
    // The pool calls back its users as it goes: destroy it first.
    destroy_pool();
    upstream_.reset();
  }

  void start_upstream(uint16_t port = 0) {
    upstream_ = std::make_unique<Upstream>(upstream_runner_, port);
    ASSERT_TRUE(upstream_->ok());
  }
  ConnectionPoolOptions options_for(uint16_t port) {
    ConnectionPoolOptions options;
    options.address = InetAddress(port, true);
    options.connect_timeout = 1000ms;
    options.queue_timeout = 2000ms;
    return options;
  }
  void make_pool(const ConnectionPoolOptions& options) {
    pool_runner_.run([&] { pool_ = std::make_unique<ConnectionPool>(pool_runner_.loop(), options); });
  }
  void destroy_pool() {
    pool_runner_.run([&] { pool_.reset(); });
  }
  TestUser& user(const std::string& name) {
    users_.push_back(std::make_unique<TestUser>(name, &log_, &in_acquire_));
    return *users_.back();
  }

  // On the pool's loop, marking the call so that users can tell whether
  // they were called back from inside it.
  void acquire(TestUser& u) {
    pool_runner_.run([&] {
      in_acquire_ = true;
      pool_->acquire(&u);
      in_acquire_ = false;
    });
  }
  void release(TestUser& u, bool reusable) {
    pool_runner_.run([&] { pool_->release(&u, reusable); });
  }
  template <typename F>
  auto on_pool(F f) {
    return pool_runner_.run(f);
  }
  // Polls `ready` on the pool's loop for up to 5 s.
  template <typename F>
  bool eventually(F ready) {
    auto deadline = Clock::now() + 5s;
    while (Clock::now() < deadline) {
      if (pool_runner_.run(ready)) return true;
      std::this_thread::sleep_for(2ms);
    }
    return pool_runner_.run(ready);
  }
  // Polls a counter of the upstream's (its accept callback runs on its own
  // loop, after the client side has seen the connect complete).
  bool upstream_reaches(const std::atomic<int>& counter, int value) {
    auto deadline = Clock::now() + 5s;
    while (counter.load() != value && Clock::now() < deadline) std::this_thread::sleep_for(2ms);
    return counter.load() == value;
  }
  // Sends on the connection a user holds; false if it has none.
  bool send(TestUser& u, const std::string& data) {
    return pool_runner_.run([&] {
      TcpConnection* conn = pool_runner_.loop()->connections().find(u.conn_id);
      if (conn == nullptr || !conn->connected()) return false;
      conn->send(data);
      return true;
    });
  }
  std::vector<std::string> log() {
    return pool_runner_.run([&] { return log_; });
  }
  // A loopback port nothing listens on.
  uint16_t closed_port() {
    Upstream gone(upstream_runner_, 0);
    return gone.port();
  }

  LoopRunner upstream_runner_;
  LoopRunner pool_runner_;
  std::unique_ptr<Upstream> upstream_;
  std::unique_ptr<ConnectionPool> pool_;  // pool loop only
  std::vector<std::string> log_;          // pool loop only
  bool in_acquire_ = false;               // pool loop only
  std::deque<std::unique_ptr<TestUser>> users_;  // outlive the pool
};

TEST_F(ConnectionPoolTest, IdleConnectionIsLentAgainWithoutANewConnect) {
  start_upstream();
  make_pool(options_for(upstream_->port()));
  TestUser& a = user("a");
  acquire(a);
  ASSERT_TRUE(eventually([&] { return a.leases == 1; }));
  EXPECT_FALSE(on_pool([&] { return a.lease_inside_acquire; })) << "a connect cannot finish inside acquire()";
  EXPECT_TRUE(on_pool([&] { return a.input_empty_at_lease; }));
  ASSERT_TRUE(send(a, "ping"));
  ASSERT_TRUE(eventually([&] { return a.received == "ping"; }));
  release(a, true);
  EXPECT_EQ(on_pool([&] { return pool_->idle(); }), 1u);
  EXPECT_EQ(on_pool([&] { return pool_->connections(); }), 1u);

  TestUser& b = user("b");
  acquire(b);
  // Lent at once, inside acquire(), on the same connection.
  EXPECT_EQ(on_pool([&] { return b.leases; }), 1);
  EXPECT_TRUE(on_pool([&] { return b.lease_inside_acquire; }));
  EXPECT_TRUE(on_pool([&] { return b.conn_id == a.conn_id; }));
  EXPECT_EQ(on_pool([&] { return pool_->idle(); }), 0u);
  ASSERT_TRUE(send(b, "pong"));
  ASSERT_TRUE(eventually([&] { return b.received == "pong"; }));
  EXPECT_EQ(on_pool([&] { return a.received; }), "ping") << "a released user still got bytes";
  EXPECT_EQ(upstream_->accepts.load(), 1);
  EXPECT_EQ(upstream_->closes.load(), 0);
  EXPECT_EQ(on_pool([&] { return pool_->connections(); }), 1u);
}

TEST_F(ConnectionPoolTest, OpensAtMostMaxConnectionsAndServesWaitersInOrder) {
  start_upstream();
  auto options = options_for(upstream_->port());
  options.max_connections = 2;
  make_pool(options);
  TestUser& a = user("a");
  TestUser& b = user("b");
  TestUser& c = user("c");
  TestUser& d = user("d");
  on_pool([&] {
    for (TestUser* u : {&a, &b, &c, &d}) pool_->acquire(u);
    EXPECT_EQ(pool_->connections(), 2u);
    EXPECT_EQ(pool_->waiting(), 4u);
  });
  ASSERT_TRUE(eventually([&] { return a.leases == 1 && b.leases == 1; }));
  ASSERT_TRUE(upstream_reaches(upstream_->accepts, 2));
  std::this_thread::sleep_for(30ms);  // room for a third connect, were one made
  EXPECT_EQ(upstream_->accepts.load(), 2);
  EXPECT_EQ(on_pool([&] { return pool_->connections(); }), 2u);
  EXPECT_EQ(on_pool([&] { return pool_->waiting(); }), 2u);
  EXPECT_EQ(on_pool([&] { return c.leases + d.leases + c.failures + d.failures; }), 0);

  release(b, true);  // the longest waiter gets it
  EXPECT_EQ(on_pool([&] { return c.leases; }), 1);
  EXPECT_TRUE(on_pool([&] { return c.conn_id == b.conn_id; }));
  EXPECT_EQ(on_pool([&] { return d.leases; }), 0);
  release(a, true);
  EXPECT_EQ(on_pool([&] { return d.leases; }), 1);
  EXPECT_TRUE(on_pool([&] { return d.conn_id == a.conn_id; }));
  EXPECT_EQ(log(), (std::vector<std::string>{"a lease", "b lease", "c lease", "d lease"}));
  EXPECT_EQ(upstream_->accepts.load(), 2);
  EXPECT_EQ(on_pool([&] { return pool_->waiting(); }), 0u);
}

TEST_F(ConnectionPoolTest, WithoutACapEveryUserGetsAConnectionAndMaxIdleAreKept) {
  // nginx's upstream keepalive: a cache of idle connections, not a cap.
  start_upstream();
  auto options = options_for(upstream_->port());
  options.max_idle = 1;
  make_pool(options);
  TestUser& a = user("a");
  TestUser& b = user("b");
  TestUser& c = user("c");
  on_pool([&] {
    for (TestUser* u : {&a, &b, &c}) pool_->acquire(u);
  });
  ASSERT_TRUE(eventually([&] { return on_pool([&] { return a.leases + b.leases + c.leases; }) == 3; }));
  EXPECT_EQ(on_pool([&] { return pool_->connections(); }), 3u);
  EXPECT_EQ(on_pool([&] { return a.failures + b.failures + c.failures; }), 0);
  release(a, true);
  release(b, true);  // one idle already: this one closes
  release(c, true);
  ASSERT_TRUE(upstream_reaches(upstream_->closes, 2));
  EXPECT_EQ(on_pool([&] { return pool_->idle(); }), 1u);
  EXPECT_EQ(on_pool([&] { return pool_->connections(); }), 1u);
  // The kept one serves the next user.
  TestUser& d = user("d");
  acquire(d);
  ASSERT_TRUE(eventually([&] { return on_pool([&] { return d.leases; }) == 1; }));
  EXPECT_TRUE(on_pool([&] { return d.conn_id == a.conn_id; }));
  EXPECT_EQ(upstream_->accepts.load(), 3);
}

TEST_F(ConnectionPoolTest, ARetiredPoolFailsNobodyAndKeepsNoIdleConnection) {
  start_upstream();
  auto options = options_for(upstream_->port());
  options.max_connections = 2;
  make_pool(options);
  TestUser& a = user("a");
  TestUser& b = user("b");
  TestUser& c = user("c");
  acquire(a);
  acquire(b);
  ASSERT_TRUE(eventually([&] { return a.leases == 1 && b.leases == 1; }));
  release(b, true);
  ASSERT_EQ(on_pool([&] { return pool_->idle(); }), 1u);
  on_pool([&] { pool_->retire(); });
  ASSERT_TRUE(upstream_reaches(upstream_->closes, 1));  // the idle one goes at once
  EXPECT_EQ(on_pool([&] { return pool_->connections(); }), 1u);
  // The user holding a connection goes on, and users may still acquire.
  ASSERT_TRUE(send(a, "still"));
  ASSERT_TRUE(eventually([&] { return a.received == "still"; }));
  acquire(c);
  ASSERT_TRUE(eventually([&] { return c.leases == 1; }));
  // Given back with nobody waiting: closed, not kept.
  release(a, true);
  ASSERT_TRUE(upstream_reaches(upstream_->closes, 2));
  release(c, true);
  ASSERT_TRUE(upstream_reaches(upstream_->closes, 3));
  EXPECT_EQ(on_pool([&] { return pool_->idle(); }), 0u);
  EXPECT_EQ(on_pool([&] { return pool_->connections(); }), 0u);
  EXPECT_EQ(on_pool([&] { return a.failures + b.failures + c.failures; }), 0);
}

TEST_F(ConnectionPoolTest, ReleaseThatIsNotReusableLetsAWaiterOpenAFreshConnection) {
  start_upstream();
  auto options = options_for(upstream_->port());
  options.max_connections = 1;
  make_pool(options);
  TestUser& a = user("a");
  TestUser& b = user("b");
  acquire(a);
  ASSERT_TRUE(eventually([&] { return a.leases == 1; }));
  acquire(b);
  release(a, false);
  ASSERT_TRUE(eventually([&] { return b.leases == 1; }));
  EXPECT_FALSE(on_pool([&] { return b.conn_id == a.conn_id; }));
  EXPECT_TRUE(upstream_reaches(upstream_->accepts, 2));
  ASSERT_TRUE(upstream_reaches(upstream_->closes, 1));
  EXPECT_EQ(on_pool([&] { return pool_->connections(); }), 1u);
}

TEST_F(ConnectionPoolTest, FullQueueIsOverloadedAfterAcquireReturns) {
  start_upstream();
  auto options = options_for(upstream_->port());
  options.max_connections = 1;
  options.max_waiting = 1;
  make_pool(options);
  TestUser& a = user("a");
  TestUser& b = user("b");
  TestUser& c = user("c");
  acquire(a);
  ASSERT_TRUE(eventually([&] { return a.leases == 1; }));
  acquire(b);
  EXPECT_EQ(on_pool([&] { return pool_->waiting(); }), 1u);
  int failures_when_acquire_returned = on_pool([&] {
    in_acquire_ = true;
    pool_->acquire(&c);
    in_acquire_ = false;
    return c.failures;
  });
  EXPECT_EQ(failures_when_acquire_returned, 0) << "failed inside acquire()";
  ASSERT_TRUE(eventually([&] { return c.failures == 1; }));
  EXPECT_EQ(on_pool([&] { return c.failure; }), Failure::kOverloaded);
  EXPECT_FALSE(on_pool([&] { return c.failed_inside_acquire; }));
  EXPECT_EQ(on_pool([&] { return c.leases; }), 0);
  // The queue is as it was: b still waits and gets the next connection.
  EXPECT_EQ(on_pool([&] { return pool_->waiting(); }), 1u);
  release(a, true);
  EXPECT_EQ(on_pool([&] { return b.leases; }), 1);
  EXPECT_EQ(log(), (std::vector<std::string>{"a lease", "c overloaded", "b lease"}));
}

// A user a connection is being opened for is not queued: with no queue at
// all, the first request still gets its connection and only the one that
// finds every connection busy is refused.
TEST_F(ConnectionPoolTest, WithoutAQueueOnlyAUserFindingEveryConnectionBusyIsOverloaded) {
  start_upstream();
  auto options = options_for(upstream_->port());
  options.max_connections = 1;
  options.max_waiting = 0;
  make_pool(options);
  TestUser& a = user("a");
  TestUser& b = user("b");
  acquire(a);
  ASSERT_TRUE(eventually([&] { return a.leases == 1; }));
  acquire(b);
  ASSERT_TRUE(eventually([&] { return b.failures == 1; }));
  EXPECT_EQ(on_pool([&] { return b.failure; }), Failure::kOverloaded);
  release(a, true);
  acquire(b);
  ASSERT_TRUE(eventually([&] { return b.leases == 1; }));
  EXPECT_EQ(log(), (std::vector<std::string>{"a lease", "b overloaded", "b lease"}));
}

TEST_F(ConnectionPoolTest, WaitingPastTheQueueTimeoutIsOverloaded) {
  start_upstream();
  auto options = options_for(upstream_->port());
  options.max_connections = 1;
  options.queue_timeout = 60ms;
  make_pool(options);
  TestUser& a = user("a");
  TestUser& b = user("b");
  acquire(a);
  ASSERT_TRUE(eventually([&] { return a.leases == 1; }));
  auto start = Clock::now();
  acquire(b);
  ASSERT_TRUE(eventually([&] { return b.failures == 1; }));
  auto waited = Clock::now() - start;
  EXPECT_GE(waited, 50ms);
  EXPECT_LT(waited, 2s);
  EXPECT_EQ(on_pool([&] { return b.failure; }), Failure::kOverloaded);
  EXPECT_EQ(on_pool([&] { return pool_->waiting(); }), 0u);
  // The connection freed later goes idle; b hears nothing more.
  release(a, true);
  EXPECT_EQ(on_pool([&] { return pool_->idle(); }), 1u);
  EXPECT_EQ(on_pool([&] { return b.leases + b.failures; }), 1);
}

TEST_F(ConnectionPoolTest, RefusedConnectFailsEachWaiterAndThePoolRecovers) {
  const uint16_t port = closed_port();
  auto options = options_for(port);
  options.max_connections = 2;
  make_pool(options);
  TestUser& a = user("a");
  TestUser& b = user("b");
  TestUser& c = user("c");
  on_pool([&] {
    in_acquire_ = true;
    for (TestUser* u : {&a, &b, &c}) pool_->acquire(u);
    in_acquire_ = false;
  });
  ASSERT_TRUE(eventually([&] { return a.failures + b.failures + c.failures == 3; }));
  on_pool([&] {
    for (TestUser* u : {&a, &b, &c}) {
      EXPECT_EQ(u->failures, 1);
      EXPECT_EQ(u->failure, Failure::kConnectFailed);
      EXPECT_FALSE(u->failed_inside_acquire);
      EXPECT_EQ(u->leases, 0);
    }
    EXPECT_EQ(pool_->connections(), 0u);
    EXPECT_EQ(pool_->waiting(), 0u);
  });
  EXPECT_EQ(log(), (std::vector<std::string>{"a connect-failed", "b connect-failed", "c connect-failed"}));

  // The upstream comes back on the same port: the next user gets through.
  start_upstream(port);
  TestUser& d = user("d");
  acquire(d);
  ASSERT_TRUE(eventually([&] { return d.leases == 1; }));
  EXPECT_EQ(on_pool([&] { return d.failures; }), 0);
  ASSERT_TRUE(send(d, "back"));
  ASSERT_TRUE(eventually([&] { return d.received == "back"; }));
  EXPECT_TRUE(upstream_reaches(upstream_->accepts, 1));
}

// A listener whose accept queue is full answers no SYN: the connect times
// out, and the user is told so (the proxy answers 504 for it, as nginx).
TEST_F(ConnectionPoolTest, AConnectThatTimesOutFailsAsATimeout) {
  tern::testing::RawListener stuck(/*backlog=*/0);
  ASSERT_GE(stuck.fd(), 0);
  // One connection fills its queue: later connects are not answered.
  tern::testing::RawClient queued(stuck.port());
  ASSERT_GE(queued.fd(), 0);
  auto options = options_for(stuck.port());
  options.connect_timeout = 200ms;
  make_pool(options);
  TestUser& a = user("a");
  acquire(a);
  EXPECT_TRUE(eventually([&] { return a.failures == 1; }));
  EXPECT_EQ(on_pool([&] { return a.failure; }), Failure::kConnectTimedOut);
  destroy_pool();
}

TEST_F(ConnectionPoolTest, ReleaseNotReusableClosesTheConnection) {
  start_upstream();
  make_pool(options_for(upstream_->port()));
  TestUser& a = user("a");
  acquire(a);
  ASSERT_TRUE(eventually([&] { return a.leases == 1; }));
  release(a, false);
  EXPECT_EQ(on_pool([&] { return pool_->connections(); }), 0u);
  ASSERT_TRUE(upstream_reaches(upstream_->closes, 1)) << "the server saw no EOF";
  EXPECT_EQ(on_pool([&] { return a.closed; }), 0) << "a released user is not told of the close";

  TestUser& b = user("b");
  acquire(b);
  ASSERT_TRUE(eventually([&] { return b.leases == 1; }));
  EXPECT_FALSE(on_pool([&] { return b.lease_inside_acquire; }));
  EXPECT_TRUE(upstream_reaches(upstream_->accepts, 2));
}

TEST_F(ConnectionPoolTest, ReusableReleaseWithUnreadInputClosesTheConnection) {
  start_upstream();
  make_pool(options_for(upstream_->port()));
  TestUser& a = user("a");
  a.keep_input = true;
  acquire(a);
  ASSERT_TRUE(eventually([&] { return a.leases == 1; }));
  ASSERT_TRUE(send(a, "left over"));
  ASSERT_TRUE(eventually([&] {
    TcpConnection* conn = pool_runner_.loop()->connections().find(a.conn_id);
    return conn != nullptr && conn->input().readable_bytes() == 9;
  }));
  // What is unread would reach the next user as an answer it never asked for.
  release(a, true);
  EXPECT_EQ(on_pool([&] { return pool_->connections(); }), 0u);
  ASSERT_TRUE(upstream_reaches(upstream_->closes, 1));
}

TEST_F(ConnectionPoolTest, CancelledUsersAreNeverCalledBack) {
  start_upstream();
  auto options = options_for(upstream_->port());
  options.max_connections = 1;
  options.max_waiting = 1;
  options.queue_timeout = 50ms;
  make_pool(options);
  TestUser& a = user("a");
  TestUser& waiting = user("waiting");
  TestUser& rejected = user("rejected");
  TestUser& c = user("c");
  acquire(a);
  ASSERT_TRUE(eventually([&] { return a.leases == 1; }));
  on_pool([&] {
    pool_->acquire(&waiting);
    pool_->cancel(&waiting);  // out of the queue
    EXPECT_EQ(pool_->waiting(), 0u);
    pool_->acquire(&c);
    pool_->acquire(&rejected);  // the queue is full: its failure is pending
    pool_->cancel(&rejected);
  });
  release(a, true);
  EXPECT_EQ(on_pool([&] { return c.leases; }), 1);
  std::this_thread::sleep_for(100ms);  // past the queue timeout
  on_pool([&] {
    EXPECT_EQ(waiting.leases + waiting.failures, 0);
    EXPECT_EQ(rejected.leases + rejected.failures, 0);
  });
  EXPECT_EQ(log(), (std::vector<std::string>{"a lease", "c lease"}));
}

TEST_F(ConnectionPoolTest, CancelWhileConnectingLeavesTheConnectionIdle) {
  start_upstream();
  make_pool(options_for(upstream_->port()));
  TestUser& a = user("a");
  on_pool([&] {
    pool_->acquire(&a);
    pool_->cancel(&a);
  });
  ASSERT_TRUE(eventually([&] { return pool_->idle() == 1; }));
  EXPECT_EQ(on_pool([&] { return a.leases + a.failures + a.closed; }), 0);
  EXPECT_TRUE(upstream_reaches(upstream_->accepts, 1));
}

TEST_F(ConnectionPoolTest, CancelOfALeaseClosesTheConnection) {
  start_upstream();
  make_pool(options_for(upstream_->port()));
  TestUser& a = user("a");
  acquire(a);
  ASSERT_TRUE(eventually([&] { return a.leases == 1; }));
  on_pool([&] { pool_->cancel(&a); });
  EXPECT_EQ(on_pool([&] { return pool_->connections(); }), 0u);
  ASSERT_TRUE(upstream_reaches(upstream_->closes, 1));
  EXPECT_EQ(on_pool([&] { return a.closed + a.failures; }), 0);
}

TEST_F(ConnectionPoolTest, UpstreamClosingABusyConnectionTellsItsUser) {
  start_upstream();
  make_pool(options_for(upstream_->port()));
  TestUser& a = user("a");
  acquire(a);
  ASSERT_TRUE(eventually([&] { return a.leases == 1; }));
  ASSERT_TRUE(send(a, "bye"));
  ASSERT_TRUE(eventually([&] { return a.closed == 1; }));
  EXPECT_EQ(on_pool([&] { return pool_->connections(); }), 0u);
  release(a, true);  // the lease ended with the connection: nothing to give back
  EXPECT_EQ(on_pool([&] { return pool_->connections(); }), 0u);
  EXPECT_EQ(on_pool([&] { return pool_->idle(); }), 0u);

  TestUser& b = user("b");
  acquire(b);
  ASSERT_TRUE(eventually([&] { return b.leases == 1; }));
  EXPECT_FALSE(on_pool([&] { return b.lease_inside_acquire; }));
  EXPECT_TRUE(upstream_reaches(upstream_->accepts, 2));
  EXPECT_EQ(on_pool([&] { return a.closed; }), 1);
  EXPECT_EQ(log(), (std::vector<std::string>{"a lease", "a closed", "b lease"}));
}

TEST_F(ConnectionPoolTest, UpstreamClosingAnIdleConnectionTakesItOutOfThePool) {
  start_upstream();
  make_pool(options_for(upstream_->port()));
  TestUser& a = user("a");
  acquire(a);
  ASSERT_TRUE(eventually([&] { return a.leases == 1; }));
  release(a, true);
  ASSERT_EQ(on_pool([&] { return pool_->idle(); }), 1u);
  upstream_->close_all();
  ASSERT_TRUE(eventually([&] { return pool_->connections() == 0; }));
  EXPECT_EQ(on_pool([&] { return pool_->idle(); }), 0u);
  EXPECT_EQ(on_pool([&] { return a.closed; }), 0) << "its lease had ended";

  TestUser& b = user("b");
  acquire(b);
  ASSERT_TRUE(eventually([&] { return b.leases == 1; }));
  EXPECT_FALSE(on_pool([&] { return b.lease_inside_acquire; })) << "lent a dead connection";
  EXPECT_TRUE(upstream_reaches(upstream_->accepts, 2));
  ASSERT_TRUE(send(b, "alive"));
  ASSERT_TRUE(eventually([&] { return b.received == "alive"; }));
}

TEST_F(ConnectionPoolTest, DrainedIsReportedOnceWhenAsked) {
  start_upstream();
  make_pool(options_for(upstream_->port()));
  TestUser& a = user("a");
  acquire(a);
  ASSERT_TRUE(eventually([&] { return a.leases == 1; }));
  ASSERT_TRUE(send(a, "x"));
  ASSERT_TRUE(eventually([&] { return a.received == "x"; }));
  EXPECT_EQ(on_pool([&] { return a.drained; }), 0) << "drained without being asked";
  on_pool([&] {
    TcpConnection* conn = pool_runner_.loop()->connections().find(a.conn_id);
    ASSERT_NE(conn, nullptr);
    conn->send(std::string(4 << 20, 'z'));
    conn->ask_write_complete();
  });
  ASSERT_TRUE(eventually([&] { return a.drained == 1; }));
  ASSERT_TRUE(eventually([&] { return a.received.size() == 1 + (4u << 20); }));
  ASSERT_TRUE(send(a, "y"));
  ASSERT_TRUE(eventually([&] { return a.received.ends_with("y"); }));
  EXPECT_EQ(on_pool([&] { return a.drained; }), 1);
}

TEST_F(ConnectionPoolTest, DestroyingThePoolFailsWaitingAndHoldingUsers) {
  start_upstream();
  auto options = options_for(upstream_->port());
  options.max_connections = 1;
  options.queue_timeout = 50ms;
  make_pool(options);
  TestUser& a = user("a");
  TestUser& b = user("b");
  acquire(a);
  ASSERT_TRUE(eventually([&] { return a.leases == 1; }));
  acquire(b);
  destroy_pool();
  on_pool([&] {
    EXPECT_EQ(a.failures, 1);
    EXPECT_EQ(a.failure, Failure::kConnectFailed);
    EXPECT_EQ(b.failures, 1);
    EXPECT_EQ(b.failure, Failure::kConnectFailed);
    EXPECT_EQ(b.leases, 0);
  });
  ASSERT_TRUE(upstream_reaches(upstream_->closes, 1));
  std::this_thread::sleep_for(100ms);  // past b's queue timeout
  EXPECT_EQ(on_pool([&] { return a.failures + b.failures; }), 2);
  EXPECT_EQ(on_pool([&] { return a.closed; }), 0);
}

// connect() to a missing unix socket fails at once, inside acquire()'s own
// call chain; the failure must still come after acquire() returns.
TEST_F(ConnectionPoolTest, MissingUnixSocketFailsEachWaiterAfterAcquireReturns) {
  tern::testing::TempDir dir;
  ASSERT_TRUE(dir.ok());
  auto address = SocketAddress::unix_path(dir.at("php-fpm.sock"));
  ASSERT_TRUE(address.ok());
  ConnectionPoolOptions options;
  options.address = *address;
  options.max_connections = 1;
  make_pool(options);
  TestUser& a = user("a");
  TestUser& b = user("b");
  int failures_when_acquire_returned = on_pool([&] {
    in_acquire_ = true;
    pool_->acquire(&a);
    pool_->acquire(&b);
    in_acquire_ = false;
    return a.failures + b.failures;
  });
  EXPECT_EQ(failures_when_acquire_returned, 0);
  ASSERT_TRUE(eventually([&] { return a.failures + b.failures == 2; }));
  on_pool([&] {
    EXPECT_EQ(a.failure, Failure::kConnectFailed);
    EXPECT_EQ(b.failure, Failure::kConnectFailed);
    EXPECT_FALSE(a.failed_inside_acquire || b.failed_inside_acquire);
    EXPECT_EQ(pool_->connections(), 0u);
    EXPECT_EQ(pool_->waiting(), 0u);
  });
  EXPECT_EQ(log(), (std::vector<std::string>{"a connect-failed", "b connect-failed"}));
}

// A pool destroyed in the same loop round as a failure it put off (a full
// queue) must not run that failure afterwards on the freed pool.
// Regression (use-after-free under ASan): fail_later()'s deferred lambda
// read failing_ after the pool was freed.
TEST_F(ConnectionPoolTest, DestroyingThePoolWithAFailureStillPendingIsSafe) {
  start_upstream();
  auto options = options_for(upstream_->port());
  options.max_connections = 1;
  options.max_waiting = 1;
  make_pool(options);
  TestUser& a = user("a");
  TestUser& b = user("b");
  TestUser& c = user("c");
  TestUser& d = user("d");
  acquire(a);
  ASSERT_TRUE(eventually([&] { return a.leases == 1; }));
  acquire(b);
  on_pool([&] {
    pool_->acquire(&c);  // overloaded, reported after this round
    pool_->acquire(&d);  // likewise, then taken back
    pool_->cancel(&d);
    pool_.reset();
  });
  on_pool([&] {
    EXPECT_EQ(c.failures, 1);
    EXPECT_EQ(d.failures, 0);
    EXPECT_EQ(a.failures + b.failures, 2);
  });
}

// Toward an upstream that reads the PROXY protocol (a TcpServer expecting
// it from loopback): each connection names the client it was first lent
// for, and is lent again for that client only. The upstream answers each
// message with the client its connection named.
class ProxiedPoolTest : public ConnectionPoolTest {
 protected:
  void SetUp() override {
    upstream_runner_.run([&] {
      const InetAddress address(0, true);
      server_ = std::make_unique<TcpServer>(upstream_runner_.loop(), address);
      server_->set_proxy_protocol(address, {.trusted = [](const InetAddress& peer) { return peer.is_loopback(); }});
      server_->set_connection_callback([this](TcpConnection& conn) {
        if (conn.connected()) ++accepts_;
      });
      server_->set_message_callback([](TcpConnection& conn, Buffer& input) {
        const ProxyHeader* header = conn.proxy_header();
        const std::string named = header == nullptr ? "none" : header->local ? "local" : conn.client_address().to_ip_port();
        conn.send(named + " " + input.retrieve_all_as_string());
      });
      ASSERT_TRUE(server_->start().ok());
    });
  }
  void TearDown() override {
    destroy_pool();
    upstream_runner_.run([&] { server_.reset(); });
  }
  void make_proxied_pool(int version, size_t max_connections = ConnectionPoolOptions::kNoLimit) {
    auto options = options_for(server_->listen_address().port());
    options.proxy_protocol = version;
    options.max_connections = max_connections;
    make_pool(options);
  }
  void acquire_for(TestUser& u, const char* client) {
    pool_runner_.run([&] {
      ProxyHeader header;
      if (client != nullptr) {
        header.local = false;
        header.source = *InetAddress::parse(client);
        header.destination = *InetAddress::parse(header.source.is_ipv6() ? "[2001:db8::1]:443" : "10.0.0.2:443");
      }
      pool_->acquire(&u, client != nullptr ? &header : nullptr);
    });
  }
  // What the upstream says back to `message` on u's connection.
  std::string round_trip(TestUser& u, const std::string& message) {
    on_pool([&] { u.received.clear(); });
    if (!send(u, message)) return "(no connection)";
    eventually([&] { return u.received.ends_with(message); });
    return on_pool([&] { return u.received; });
  }

  std::unique_ptr<TcpServer> server_;  // upstream loop only
  std::atomic<int> accepts_{0};
};

TEST_F(ProxiedPoolTest, AConnectionIsLentAgainOnlyForTheClientItsHeaderNamed) {
  make_proxied_pool(2);
  TestUser& a = user("a");
  acquire_for(a, "203.0.113.7:5000");
  ASSERT_TRUE(eventually([&] { return a.leases == 1; }));
  EXPECT_EQ(round_trip(a, "one"), "203.0.113.7:5000 one");
  release(a, true);
  TestUser& b = user("b");
  acquire_for(b, "203.0.113.7:5000");
  ASSERT_TRUE(eventually([&] { return b.leases == 1; }));
  EXPECT_TRUE(on_pool([&] { return b.conn_id == a.conn_id; }));
  EXPECT_EQ(round_trip(b, "two"), "203.0.113.7:5000 two");
  release(b, true);
  TestUser& c = user("c");
  acquire_for(c, "198.51.100.9:6000");
  ASSERT_TRUE(eventually([&] { return c.leases == 1; }));
  EXPECT_FALSE(on_pool([&] { return c.conn_id == a.conn_id; }));
  EXPECT_EQ(round_trip(c, "three"), "198.51.100.9:6000 three");
  EXPECT_EQ(accepts_.load(), 2);
  EXPECT_EQ(on_pool([&] { return pool_->idle(); }), 1u);  // a's, kept for its client
}

TEST_F(ProxiedPoolTest, AtMaxConnectionsAnotherClientsIdleConnectionGivesWay) {
  make_proxied_pool(1, /*max_connections=*/1);
  TestUser& a = user("a");
  acquire_for(a, "203.0.113.7:5000");
  ASSERT_TRUE(eventually([&] { return a.leases == 1; }));
  EXPECT_EQ(round_trip(a, "one"), "203.0.113.7:5000 one");
  release(a, true);
  TestUser& b = user("b");
  acquire_for(b, "[2001:db8::7]:7000");
  ASSERT_TRUE(eventually([&] { return b.leases == 1; }));
  EXPECT_EQ(round_trip(b, "two"), "[2001:db8::7]:7000 two");
  EXPECT_EQ(on_pool([&] { return pool_->connections(); }), 1u);
  EXPECT_EQ(accepts_.load(), 2);
}

TEST_F(ProxiedPoolTest, ThePoolsOwnConnectionsSayLocal) {
  for (int version : {1, 2}) {
    make_proxied_pool(version);
    TestUser& probe = user("probe");
    acquire_for(probe, nullptr);
    ASSERT_TRUE(eventually([&] { return probe.leases == 1; }));
    EXPECT_EQ(round_trip(probe, "health"), "local health") << version;
    destroy_pool();
  }
}

}  // namespace
}  // namespace tern::net
