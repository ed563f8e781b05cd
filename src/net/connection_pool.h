// ConnectionPool: a bounded set of persistent connections from one loop to
// one upstream server (TCP or a Unix-domain socket), lent to one user at a
// time.
//
//   ConnectionPool pool(&loop, {.address = *SocketAddress::parse("unix:/run/php.sock")});
//   pool.acquire(&job);        // later: job.on_lease(conn) or job.on_lease_failed(...)
//   ...                        // the job owns conn's callbacks while it holds it
//   pool.release(&job, /*reusable=*/true);
//
// Connections open on demand with TcpClient (non-blocking connect with a
// timeout), up to max_connections (no bound by default); a connection given
// back stays open for the next user while fewer than max_idle are idle, and
// closes otherwise (nginx's upstream keepalive). When max_connections are
// busy a user waits in a bounded FIFO queue, for at most queue_timeout; a
// full queue or a timeout is reported as kOverloaded. A connect that fails is reported to the user it
// was opened for (kConnectFailed); the next waiter gets a fresh attempt, so
// requests fail fast while the upstream is down and succeed again as soon as
// it is back, without any restart. A connection the upstream closes while
// idle just leaves the pool.
//
// on_lease() may run inside acquire() (an idle connection was at hand);
// on_lease_failed() never does, except while the pool is being closed or
// destroyed, which fails every user still waiting or holding a connection.
// A closed pool fails every later acquire() (after the round), so users may
// go on calling it until it is destroyed. One pool per loop per upstream,
// closed on that loop's thread (the destructor closes it if nobody did),
// never from inside one of its users' callbacks; loop thread only.
//
// With proxy_protocol, each connection begins with a PROXY protocol header
// naming the client (and the address it came to) of the user it is first
// lent to, and is lent again only to users for that same client: the
// upstream (a server behind HAProxy's accept-proxy, a tern listening with
// proxy_protocol) believes one client per connection. Idle connections of
// other clients give way (the oldest closes) when max_connections are open.
// Over TLS the header comes before the handshake, so a connection is named
// when it is opened, for the first user waiting without one on its way.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "net/proxy_protocol.h"
#include "net/socket_address.h"
#include "net/timer_wheel.h"

namespace tern::net {

class Buffer;
class EventLoop;
class SecureContext;
class TcpClient;
class TcpConnection;

// What a ConnectionPool connects to, and its bounds.
struct ConnectionPoolOptions {
  SocketAddress address = InetAddress();  // the server (TCP or a Unix socket)
  std::string name = "upstream";  // for log lines
  static constexpr size_t kNoLimit = SIZE_MAX;  // max_connections without a bound
  size_t max_connections = kNoLimit;            // open at once, busy or idle
  size_t max_idle = 8;       // connections kept open while nobody uses them
  size_t max_waiting = 256;  // users waiting while max_connections are busy
  std::chrono::milliseconds connect_timeout{2000};  // a connect not done by then fails
  std::chrono::milliseconds queue_timeout{10000};   // a user waiting longer fails
  // TLS to the server (a tls::ClientContext): a connection is lent once its
  // handshake is over; one that fails counts as a failed connect.
  std::shared_ptr<SecureContext> secure{};
  // 1 or 2: connections begin with a PROXY protocol header of that version
  // (see above); 0: none.
  int proxy_protocol = 0;
};

class ConnectionPool {
  struct Slot;

 public:
  // kConnectTimedOut: the connect (or the TLS handshake) took longer than
  // connect_timeout; kConnectFailed: it failed otherwise (refused, no
  // route, a handshake refused) or the pool is closed.
  enum class Failure { kConnectFailed, kConnectTimedOut, kOverloaded };

  // The borrower of a connection.
  class User {
   public:
    virtual ~User() = default;
    // A connected connection, lent until release(). Its input is empty.
    virtual void on_lease(TcpConnection& conn) = 0;
    // No connection for this acquire(): why, with a line for the log (see
    // above for when it runs).
    virtual void on_lease_failed(Failure failure, std::string_view why) = 0;
    // While leased: bytes arrived, the output queue drained (after
    // TcpConnection::ask_write_complete()), the connection closed (the
    // lease ends with it; no release() needed).
    virtual void on_upstream_message(TcpConnection& conn, Buffer& input) = 0;
    virtual void on_upstream_drained(TcpConnection& conn) = 0;
    virtual void on_upstream_closed(TcpConnection& conn) = 0;

   private:
    friend class ConnectionPool;
    Slot* slot_ = nullptr;  // the connection it holds, if any (the pool's)
  };

  // A pool on `loop` (connecting only when asked).
  ConnectionPool(EventLoop* loop, ConnectionPoolOptions options);
  // close(), if nobody called it.
  ~ConnectionPool();

  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  // `client`: the client a proxy_protocol pool's connection is for (copied);
  // null: the pool's own (a LOCAL header: a health check). Ignored without
  // proxy_protocol.
  void acquire(User* user, const ProxyHeader* client = nullptr);
  // Closes every connection and fails every user (see above).
  void close();
  // Winds the pool down without failing anyone (a reload replaced it):
  // idle connections close now, a connection given back closes unless a
  // user waits for it. Users may still acquire.
  void retire();
  bool closed() const { return destroying_; }  // close() has run
  // Takes a user out of the queue, or takes back its connection (closing
  // it: what was in flight on it is unknown).
  void cancel(User* user);
  // Gives the connection back: kept for the next user if `reusable` (the
  // exchange on it ended cleanly), else closed.
  void release(User* user, bool reusable);

  const ConnectionPoolOptions& options() const { return options_; }  // as made
  size_t connections() const { return slots_.size(); }  // open or opening
  size_t idle() const { return idle_.size(); }          // open and not lent
  size_t waiting() const { return waiting_.size(); }    // users waiting for one

 private:
  struct Waiter {
    User* user;
    TimerId timer;  // queue timeout
    ProxyHeader client;  // with proxy_protocol: whose connection it needs
  };
  struct Failing {  // a failure to report after this round
    User* user;
    Failure failure;
    std::string why;
  };

  // A new connection; with proxy_protocol over TLS, named for `named_for`.
  void open_slot(const ProxyHeader& named_for);
  // The slot's client connected, failed to, or its connection closed.
  void on_connected(Slot* slot, TcpConnection& conn);
  void on_connect_failed(Slot* slot, bool timed_out, std::string_view why);
  void on_closed(Slot* slot, TcpConnection& conn);
  // Lends the slot's connection to `user`; with proxy_protocol, one not
  // named yet is named for `client` first.
  void lend(Slot* slot, User* user, const ProxyHeader& client);
  // An idle connection `client` may have (the last given back first), out
  // of idle_; null if none.
  Slot* take_idle(const ProxyHeader& client);
  // Lends idle connections to the users waiting, the longest waiting
  // first, then opens connections for those left, as many as allowed.
  void serve_waiters();
  // Takes the slot out of the pool and closes its connection (the slot is
  // destroyed after the round).
  void drop_slot(Slot* slot);
  // Reports `failure` to `user` after this round, never inside acquire().
  void fail_later(User* user, Failure failure, std::string why);
  size_t connecting() const { return connecting_; }  // connections being opened

  EventLoop* const loop_;
  const ConnectionPoolOptions options_;
  // Every slot, each knowing its index here; the idle ones also in idle_
  // (the last given back on top), and how many are connecting: each
  // step of a request is O(1) whatever the number of connections.
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<Slot*> idle_;
  size_t connecting_ = 0;
  std::deque<Waiter> waiting_;    // users waiting for a connection, in order
  std::deque<Failing> failing_;   // what fail_later() is to report
  bool destroying_ = false;       // close() has run
  TimerId fail_timer_;            // reports failing_ after the round; cancelled by close()
  bool retired_ = false;  // retire() has run: a connection given back is kept only for a waiter
};

}  // namespace tern::net
