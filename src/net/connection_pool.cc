#include "net/connection_pool.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/assert.h"
#include "base/log.h"
#include "net/event_loop.h"
#include "net/tcp_client.h"
#include "net/tcp_connection.h"

namespace tern::net {

struct ConnectionPool::Slot {
  enum class State : uint8_t { kConnecting, kIdle, kBusy };
  std::unique_ptr<TcpClient> client;
  State state = State::kConnecting;
  User* user = nullptr;   // while kBusy
  size_t index = 0;       // in slots_
  bool dropped = false;   // out of the pool; its callbacks do nothing
  bool named = false;     // with proxy_protocol: its header is sent, for named_for
  ProxyHeader named_for;
};

namespace {

bool same_client(const ProxyHeader& a, const ProxyHeader& b) {
  if (a.local || b.local) return a.local == b.local;
  return a.source == b.source && a.destination == b.destination;
}

}  // namespace

ConnectionPool::ConnectionPool(EventLoop* loop, ConnectionPoolOptions options)
    : loop_(loop), options_(std::move(options)) {
  TERN_CHECK(options_.proxy_protocol >= 0 && options_.proxy_protocol <= 2);
}

ConnectionPool::~ConnectionPool() { close(); }

void ConnectionPool::close() {
  // Everyone still waiting or holding a connection hears about it, once
  // the pool is empty (so whatever they call back finds nothing).
  if (destroying_) return;
  loop_->assert_in_loop_thread();
  destroying_ = true;
  std::vector<User*> users;
  for (Waiter& w : waiting_) {
    loop_->cancel(w.timer);
    users.push_back(w.user);
  }
  for (Failing& f : failing_) users.push_back(f.user);
  for (auto& slot : slots_) {
    slot->dropped = true;
    if (slot->state == Slot::State::kBusy) {
      slot->user->slot_ = nullptr;
      users.push_back(slot->user);
    }
  }
  idle_.clear();
  connecting_ = 0;
  waiting_.clear();
  failing_.clear();
  if (fail_timer_.valid()) loop_->cancel(fail_timer_);
  fail_timer_ = TimerId{};
  slots_.clear();  // closes the connections
  for (User* user : users) user->on_lease_failed(Failure::kConnectFailed, "connection pool closed");
}

void ConnectionPool::retire() {
  loop_->assert_in_loop_thread();
  retired_ = true;
  const std::vector<Slot*> idle = idle_;
  for (Slot* slot : idle) drop_slot(slot);
}

void ConnectionPool::acquire(User* user, const ProxyHeader* client) {
  loop_->assert_in_loop_thread();
  if (destroying_) return fail_later(user, Failure::kConnectFailed, "connection pool closed");
  const ProxyHeader want = client != nullptr && options_.proxy_protocol != 0 ? *client : ProxyHeader{};
  if (waiting_.empty() && !idle_.empty()) {
    // The common case: a connection at hand, nobody ahead.
    if (Slot* slot = take_idle(want)) return lend(slot, user, want);
  }
  // The queue holds the users no connection is on its way to: those beside
  // an idle connection, or one that is being or can be opened, are served.
  const size_t queued = waiting_.size() > connecting() ? waiting_.size() - connecting() : 0;
  if (queued >= options_.max_waiting && slots_.size() >= options_.max_connections && idle() == 0) {
    return fail_later(user, Failure::kOverloaded, "too many requests waiting for a connection");
  }
  Waiter waiter{user, {}, want};
  waiter.timer = loop_->run_after(options_.queue_timeout, [this, user] {
    auto it = std::find_if(waiting_.begin(), waiting_.end(),
                           [user](const Waiter& w) { return w.user == user; });
    if (it == waiting_.end()) return;
    waiting_.erase(it);
    user->on_lease_failed(Failure::kOverloaded, "no free connection within the queue timeout");
  });
  waiting_.push_back(waiter);
  serve_waiters();
}

void ConnectionPool::serve_waiters() {
  if (destroying_) return;
  // Idle connections first, to the longest-waiting users (each lent one
  // may change the queue: the search begins again).
  for (bool lent = true; lent && !waiting_.empty() && !idle_.empty();) {
    lent = false;
    for (size_t i = 0; i < waiting_.size(); ++i) {
      Slot* slot = take_idle(waiting_[i].client);
      if (slot == nullptr) continue;
      Waiter waiter = waiting_[i];
      waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
      loop_->cancel(waiter.timer);
      lend(slot, waiter.user, waiter.client);
      lent = true;
      break;
    }
  }
  if (waiting_.empty()) return;
  // Then open connections for those still waiting, as many as allowed (an
  // idle connection of another client gives way). A connect can fail at
  // once, which removes a waiter and calls back here.
  while (waiting_.size() > connecting()) {
    if (slots_.size() >= options_.max_connections) {
      if (options_.proxy_protocol == 0 || idle_.empty()) break;
      drop_slot(idle_.front());
    }
    open_slot(waiting_[connecting()].client);
  }
}

ConnectionPool::Slot* ConnectionPool::take_idle(const ProxyHeader& client) {
  for (size_t i = idle_.size(); i-- > 0;) {
    Slot* slot = idle_[i];
    if (options_.proxy_protocol != 0 && slot->named && !same_client(slot->named_for, client)) continue;
    idle_.erase(idle_.begin() + static_cast<std::ptrdiff_t>(i));
    return slot;
  }
  return nullptr;
}

void ConnectionPool::open_slot(const ProxyHeader& named_for) {
  TcpClientOptions client_options;
  client_options.name = options_.name;
  client_options.connector.connect_timeout = options_.connect_timeout;
  client_options.connector.retry = false;
  client_options.reconnect = false;
  client_options.secure = options_.secure;
  slots_.push_back(std::make_unique<Slot>());
  Slot* slot = slots_.back().get();
  slot->index = slots_.size() - 1;
  if (options_.proxy_protocol != 0 && options_.secure) {
    // Ahead of the handshake: the connection is this client's from the start.
    client_options.preamble = proxy_header(options_.proxy_protocol, named_for);
    slot->named = true;
    slot->named_for = named_for;
  }
  ++connecting_;
  slot->client = std::make_unique<TcpClient>(loop_, options_.address, client_options);
  TcpClient& client = *slot->client;
  client.set_connection_callback([this, slot](TcpConnection& conn) {
    if (slot->dropped) return;
    if (conn.connected()) return on_connected(slot, conn);
    on_closed(slot, conn);
  });
  client.set_message_callback([slot](TcpConnection& conn, Buffer& input) {
    if (slot->dropped) return input.retrieve_all();
    if (slot->user != nullptr) return slot->user->on_upstream_message(conn, input);
    // Nothing is expected on an idle connection: the stream is out of step.
    input.retrieve_all();
    conn.force_close();
  });
  client.set_write_complete_callback(
      [slot](TcpConnection& conn) {
        if (!slot->dropped && slot->user != nullptr) slot->user->on_upstream_drained(conn);
      },
      /*only_when_asked=*/true);
  client.set_connect_failed_callback([this, slot](const Error& error, bool) {
    if (slot->dropped) return;
    const bool handshake = std::strcmp(error.what, "TLS handshake") == 0;
    on_connect_failed(slot, error.code == ETIMEDOUT, handshake ? slot->client->handshake_failure() : error.message());
  });
  client.connect();
}

void ConnectionPool::on_connected(Slot* slot, TcpConnection& /*conn*/) {
  --connecting_;
  slot->state = Slot::State::kIdle;
  idle_.push_back(slot);
  serve_waiters();
}

void ConnectionPool::on_connect_failed(Slot* slot, bool timed_out, std::string_view why) {
  drop_slot(slot);
  // The attempt was made for the longest-waiting user: it gets the error.
  if (!waiting_.empty()) {
    Waiter waiter = waiting_.front();
    waiting_.pop_front();
    loop_->cancel(waiter.timer);
    fail_later(waiter.user, timed_out ? Failure::kConnectTimedOut : Failure::kConnectFailed, std::string(why));
  }
  serve_waiters();
}

void ConnectionPool::on_closed(Slot* slot, TcpConnection& conn) {
  User* user = slot->state == Slot::State::kBusy ? slot->user : nullptr;
  drop_slot(slot);
  if (user != nullptr) user->on_upstream_closed(conn);
  serve_waiters();
}

void ConnectionPool::lend(Slot* slot, User* user, const ProxyHeader& client) {
  slot->state = Slot::State::kBusy;
  slot->user = user;
  user->slot_ = slot;
  TcpConnection& conn = *slot->client->connection();
  if (options_.proxy_protocol != 0 && !slot->named) {
    // Its first bytes, ahead of the user's.
    slot->named = true;
    slot->named_for = client;
    conn.send(proxy_header(options_.proxy_protocol, client));
  }
  user->on_lease(conn);
}

void ConnectionPool::release(User* user, bool reusable) {
  loop_->assert_in_loop_thread();
  Slot* slot = user->slot_;
  if (slot == nullptr || slot->user != user || slot->state != Slot::State::kBusy) return;
  user->slot_ = nullptr;
  slot->user = nullptr;
  TcpConnection* conn = slot->client->connection();
  // Kept for the next user: one who waits, or while few enough are idle.
  const bool wanted = !waiting_.empty() || (!retired_ && idle_.size() < options_.max_idle);
  if (reusable && conn != nullptr && conn->connected() && conn->input().empty() && wanted) {
    slot->state = Slot::State::kIdle;
    idle_.push_back(slot);
  } else {
    drop_slot(slot);
  }
  serve_waiters();
}

void ConnectionPool::cancel(User* user) {
  loop_->assert_in_loop_thread();
  auto it = std::find_if(waiting_.begin(), waiting_.end(),
                         [user](const Waiter& w) { return w.user == user; });
  if (it != waiting_.end()) {
    loop_->cancel(it->timer);
    waiting_.erase(it);
    return;
  }
  auto failing = std::find_if(failing_.begin(), failing_.end(),
                              [user](const Failing& f) { return f.user == user; });
  if (failing != failing_.end()) {
    failing_.erase(failing);
    return;
  }
  release(user, false);
}

void ConnectionPool::drop_slot(Slot* slot) {
  if (slot->dropped || slot->index >= slots_.size() || slots_[slot->index].get() != slot) return;
  switch (slot->state) {
    case Slot::State::kConnecting:
      --connecting_;
      break;
    case Slot::State::kIdle:
      idle_.erase(std::find(idle_.begin(), idle_.end(), slot));
      break;
    case Slot::State::kBusy:
      if (slot->user != nullptr && slot->user->slot_ == slot) slot->user->slot_ = nullptr;
      break;
  }
  slot->dropped = true;
  slot->user = nullptr;
  if (TcpConnection* conn = slot->client->connection()) conn->force_close();
  // Out of slots_ by moving the last one into its place; we may be inside
  // this client's callback: destroy it after the round.
  Slot* raw = slots_[slot->index].release();
  if (slot->index + 1 != slots_.size()) {
    slots_[slot->index] = std::move(slots_.back());
    slots_[slot->index]->index = slot->index;
  }
  slots_.pop_back();
  loop_->defer([raw] { delete raw; });
}

void ConnectionPool::fail_later(User* user, Failure failure, std::string why) {
  // Never inside acquire(); cancel() can still take the user back meanwhile.
  // A timer rather than a deferred call: close() cancels it, so nothing runs
  // on a pool that is gone.
  failing_.push_back(Failing{user, failure, std::move(why)});
  if (fail_timer_.valid()) return;
  fail_timer_ = loop_->run_after(std::chrono::milliseconds(0), [this] {
    fail_timer_ = TimerId{};
    // One at a time: a callback may cancel() a user still queued here.
    while (!failing_.empty()) {
      Failing f = std::move(failing_.front());
      failing_.pop_front();
      f.user->on_lease_failed(f.failure, f.why);
    }
  });
}

}  // namespace tern::net
