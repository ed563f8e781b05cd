#include "net/tcp_server.h"

#include <algorithm>
#include <latch>
#include <memory>

#include "base/assert.h"
#include "base/log.h"
#include "net/acceptor.h"
#include "net/connection_table.h"
#include "net/event_loop.h"
#include "net/event_loop_thread_pool.h"
#include "net/inherited_sockets.h"
#include "net/sockets.h"
#include "net/tcp_connection.h"

namespace tern::net {
namespace {

constexpr size_t kHandoffQueueSize = 4096;
constexpr EventLoop::Millis kLoadDecayPeriod{1000};

}  // namespace

struct TcpServer::LoopState {
  EventLoop* loop = nullptr;
  BoundedQueue<Handoff> handoffs{kHandoffQueueSize};
  // Reuseport mode: the requested address and this loop's socket for it
  // until setup_loop, then its acceptor.
  std::vector<std::pair<InetAddress, Socket>> listen_sockets;
  std::vector<std::pair<InetAddress, std::unique_ptr<Acceptor>>> acceptors;
  uint64_t wake_hook = 0;
  TimerId decay_timer;
};

TcpServer::TcpServer(EventLoop* loop, const InetAddress& listen_address, TcpServerOptions options)
    : TcpServer(loop, std::vector<InetAddress>{listen_address}, std::move(options)) {}

TcpServer::TcpServer(EventLoop* loop, std::vector<InetAddress> listen_addresses,
                     TcpServerOptions options)
    : loop_(loop),
      requested_(listen_addresses),
      listen_addresses_(std::move(listen_addresses)),
      options_(std::move(options)),
      pool_(std::make_unique<EventLoopThreadPool>(loop, options_.name, options_.io_threads,
                                                  options_.cpu_affinity)) {
  TERN_CHECK(options_.io_threads >= 0);
  TERN_CHECK_MSG(!listen_addresses_.empty(), "TcpServer needs an address to listen on");
  callbacks_.map_files_for_local_peers = options_.map_files_for_local_peers;
  callbacks_.tcp_nopush = options_.tcp_nopush;
}

TcpServer::~TcpServer() {
  loop_->assert_in_loop_thread();
  if (!started_) return;
  acceptors_.clear();  // stop accepting first
  // Each loop drops its acceptor and closes our connections on its own thread.
  std::latch done(static_cast<std::ptrdiff_t>(loop_states_.size()));
  for (size_t i = 0; i < loop_states_.size(); ++i) {
    if (loop_states_[i]->loop == loop_) {
      teardown_loop(i);
      done.count_down();
    } else {
      loop_states_[i]->loop->run_in_loop([this, i, &done] {
        teardown_loop(i);
        done.count_down();
      });
    }
  }
  done.wait();
  pool_.reset();  // joins the I/O threads; their loops are gone after this
}

void TcpServer::assert_not_started() const {
  loop_->assert_in_loop_thread();
  TERN_CHECK_MSG(!started_, "TcpServer callbacks must be set before start()");
}

const std::vector<EventLoop*>& TcpServer::io_loops() const { return pool_->loops(); }

Result<std::vector<Socket>> TcpServer::bind_address(InetAddress* address) const {
  const bool reuse_port = options_.accept_mode == AcceptMode::kReusePort;
  const size_t count = reuse_port ? static_cast<size_t>(std::max(options_.io_threads, 1)) : 1;
  std::vector<Socket> sockets;
  for (size_t i = 0; i < count; ++i) {
    std::optional<Socket> inherited;
    if (options_.inherited != nullptr && address->port() != 0) inherited = options_.inherited->take(*address);
    auto socket = inherited ? Result<Socket>(std::move(*inherited))
                            : Acceptor::bind_listen(*address, reuse_port, options_.backlog);
    if (!socket) return socket.error();
    if (i == 0) *address = sockets::local_address(socket->fd());  // port 0 binds once
    if (options_.tcp_nodelay) (void)sockets::set_tcp_nodelay(socket->fd(), true);  // inherited
    if (options_.send_lowat > 0) {
      if (auto r = sockets::set_notsent_lowat(socket->fd(), options_.send_lowat); !r) return r.error();
    }
    if (options_.defer_accept.count() > 0) {
      if (auto r = sockets::set_defer_accept(socket->fd(), static_cast<int>(options_.defer_accept.count()));
          !r) {
        return r.error();
      }
    }
    sockets.push_back(std::move(*socket));
  }
  return sockets;
}

void TcpServer::set_secure_context(const InetAddress& address, std::shared_ptr<SecureContext> context) {
  loop_->assert_in_loop_thread();
  secure_contexts_.emplace_back(address, std::move(context));
}

void TcpServer::set_proxy_protocol(const InetAddress& address, ProxyProtocolOptions options) {
  loop_->assert_in_loop_thread();
  TERN_CHECK(options.trusted != nullptr);
  proxy_protocols_.emplace_back(address, std::make_unique<ProxyProtocolOptions>(std::move(options)));
}

TcpServer::Listening TcpServer::listening(const InetAddress& requested) const {
  Listening listening;
  for (auto it = secure_contexts_.rbegin(); it != secure_contexts_.rend(); ++it) {
    if (it->first == requested) {
      listening.secure = it->second.get();
      break;
    }
  }
  for (auto it = proxy_protocols_.rbegin(); it != proxy_protocols_.rend(); ++it) {
    if (it->first == requested) {
      listening.proxy = it->second.get();
      break;
    }
  }
  return listening;
}

bool TcpServer::admit(const InetAddress& peer, const Listening& listening) const {
  if (accept_filter_ && !accept_filter_(peer)) return false;
  if (listening.proxy != nullptr && !listening.proxy->trusted(peer)) {
    TERN_LOG_DEBUG("{}: {} may not send a PROXY protocol header; closing its connection", options_.name,
                   peer.to_ip_port());
    return false;
  }
  return true;
}

std::unique_ptr<Acceptor> TcpServer::make_acceptor(EventLoop* io, Socket socket,
                                                   const InetAddress& requested) {
  auto acceptor = std::make_unique<Acceptor>(io, std::move(socket));
  if (release_) acceptor->set_release_callback([this, io] { return release_(io); });
  const Listening how = listening(requested);
  if (io == loop_ && options_.accept_mode != AcceptMode::kReusePort) {
    acceptor->set_new_connection_callback([this, how](Socket conn_socket, const InetAddress& peer) {
      on_accepted(std::move(conn_socket), peer, how);
    });
  } else {
    acceptor->set_new_connection_callback([this, io, how](Socket conn_socket, const InetAddress& peer) {
      if (!admit(peer, how)) return;
      open_connection(io, std::move(conn_socket), peer, how);
    });
  }
  acceptor->listen();
  return acceptor;
}

Result<void> TcpServer::start() {
  loop_->assert_in_loop_thread();
  if (started_) return {};
  const bool reuse_port = options_.accept_mode == AcceptMode::kReusePort;

  // Bind everything before starting threads, so a failure leaves nothing behind
  // and the caller learns the real ports.
  std::vector<std::vector<Socket>> sockets;
  for (InetAddress& address : listen_addresses_) {
    auto bound = bind_address(&address);
    if (!bound) return bound.error();
    sockets.push_back(std::move(*bound));
  }
  started_ = true;

  pool_->start(thread_init_);
  const auto& loops = pool_->loops();
  for (size_t i = 0; i < loops.size(); ++i) {
    auto state = std::make_unique<LoopState>();
    state->loop = loops[i];
    if (reuse_port) {
      for (size_t a = 0; a < sockets.size(); ++a) {
        state->listen_sockets.emplace_back(requested_[a], std::move(sockets[a][i]));
      }
    }
    loop_states_.push_back(std::move(state));
  }

  if (!reuse_port) {
    for (size_t a = 0; a < sockets.size(); ++a) {
      acceptors_.emplace_back(requested_[a],
                              make_acceptor(loop_, std::move(sockets[a][0]), requested_[a]));
    }
  }
  for (size_t i = 0; i < loops.size(); ++i) {
    loops[i]->run_in_loop([this, i] { setup_loop(i); });
  }
  for (const InetAddress& address : listen_addresses_) {
    TERN_LOG_INFO("{}: listening on {} ({} I/O loop{}, {}, {} mode, {}-triggered)", options_.name,
                  address.to_ip_port(), loops.size(), loops.size() == 1 ? "" : "s",
                  to_string(loop_->io_backend()), reuse_port ? "reuseport" : "dispatch",
                  options_.trigger == TriggerMode::kEdge ? "edge" : "level");
  }
  return {};
}

Result<void> TcpServer::set_listen_addresses(const std::vector<InetAddress>& addresses) {
  loop_->assert_in_loop_thread();
  TERN_CHECK_MSG(started_, "set_listen_addresses before start()");
  TERN_CHECK_MSG(!addresses.empty(), "TcpServer needs an address to listen on");
  auto contains = [](const std::vector<InetAddress>& list, const InetAddress& a) {
    return std::find(list.begin(), list.end(), a) != list.end();
  };
  // Bind what is new first: a failure leaves everything as it was.
  std::vector<std::pair<InetAddress, InetAddress>> added;  // requested, bound
  std::vector<std::vector<Socket>> added_sockets;
  for (const InetAddress& wanted : addresses) {
    if (contains(requested_, wanted)) continue;
    InetAddress bound = wanted;
    auto sockets = bind_address(&bound);
    if (!sockets) return sockets.error();
    added.emplace_back(wanted, bound);
    added_sockets.push_back(std::move(*sockets));
  }
  for (size_t a = 0; a < requested_.size();) {
    if (contains(addresses, requested_[a])) {
      ++a;
      continue;
    }
    const InetAddress gone = requested_[a];
    TERN_LOG_INFO("{}: no longer listening on {}", options_.name, listen_addresses_[a].to_ip_port());
    std::erase_if(acceptors_, [&gone](const auto& entry) { return entry.first == gone; });
    for (auto& state : loop_states_) {
      LoopState* raw = state.get();
      raw->loop->run_in_loop([raw, gone] {
        std::erase_if(raw->acceptors, [&gone](const auto& entry) { return entry.first == gone; });
      });
    }
    requested_.erase(requested_.begin() + static_cast<std::ptrdiff_t>(a));
    listen_addresses_.erase(listen_addresses_.begin() + static_cast<std::ptrdiff_t>(a));
  }
  for (size_t i = 0; i < added.size(); ++i) {
    requested_.push_back(added[i].first);
    listen_addresses_.push_back(added[i].second);
    add_acceptors(added[i].first, std::move(added_sockets[i]));
    TERN_LOG_INFO("{}: listening on {}", options_.name, added[i].second.to_ip_port());
  }
  return {};
}

void TcpServer::add_acceptors(const InetAddress& requested, std::vector<Socket> sockets) {
  if (options_.accept_mode != AcceptMode::kReusePort) {
    acceptors_.emplace_back(requested, make_acceptor(loop_, std::move(sockets[0]), requested));
    return;
  }
  for (size_t i = 0; i < loop_states_.size(); ++i) {
    LoopState* raw = loop_states_[i].get();
    // std::function copies its target: the socket travels in a shared_ptr.
    auto socket = std::make_shared<Socket>(std::move(sockets[i]));
    raw->loop->run_in_loop([this, raw, requested, socket] {
      raw->acceptors.emplace_back(requested, make_acceptor(raw->loop, std::move(*socket), requested));
    });
  }
}

void TcpServer::setup_loop(size_t index) {
  LoopState& state = *loop_states_[index];
  EventLoop* io = state.loop;
  io->assert_in_loop_thread();
  if (options_.accept_mode == AcceptMode::kReusePort) {
    for (auto& [requested, socket] : state.listen_sockets) {
      state.acceptors.emplace_back(requested, make_acceptor(io, std::move(socket), requested));
    }
    state.listen_sockets.clear();
  } else if (io != loop_) {
    state.wake_hook = io->add_wake_hook([this, index] { drain_handoffs(index); });
    drain_handoffs(index);  // anything handed over before the hook existed
  }
  if (options_.dispatch_policy == DispatchPolicy::kLeastLoaded) {
    state.decay_timer = io->run_every(kLoadDecayPeriod, [io] {
      LoopLoad& load = io->load();
      uint64_t recent = load.recent_bytes.load(std::memory_order_relaxed);
      load.recent_bytes.store(recent / 2 + load.bytes_this_period, std::memory_order_relaxed);
      load.bytes_this_period = 0;
    });
  }
}

void TcpServer::teardown_loop(size_t index) {
  LoopState& state = *loop_states_[index];
  EventLoop* io = state.loop;
  state.acceptors.clear();
  if (state.wake_hook != 0) io->remove_wake_hook(state.wake_hook);
  if (state.decay_timer.valid()) io->cancel(state.decay_timer);
  Handoff handoff;
  while (state.handoffs.try_pop(handoff)) sockets::close(handoff.fd);
  io->connections().close_all(&callbacks_);
}

void TcpServer::stop_accepting() {
  loop_->assert_in_loop_thread();
  acceptors_.clear();
  for (auto& state : loop_states_) {
    LoopState* raw = state.get();
    raw->loop->run_in_loop([raw] { raw->acceptors.clear(); });
  }
}

size_t TcpServer::connection_count() const {
  size_t total = 0;
  for (const auto& state : loop_states_) {
    const LoopLoad& load = state->loop->load();
    total += load.connections.load(std::memory_order_relaxed) +
             load.in_flight.load(std::memory_order_relaxed);
  }
  return total;
}

TcpServer::Totals TcpServer::totals() const {
  Totals totals;
  bool base_counted = false;
  auto add = [&totals](const LoopLoad& load) {
    totals.accepted += load.accepted.get();
    totals.shed += load.shed.get();
    totals.bytes_received += load.bytes_received.get();
    totals.bytes_sent += load.bytes_sent.get();
  };
  for (const auto& state : loop_states_) {
    add(state->loop->load());
    base_counted = base_counted || state->loop == loop_;
  }
  // The base loop sheds when it accepts for the others.
  if (!base_counted) add(loop_->load());
  return totals;
}

void TcpServer::on_accepted(Socket socket, const InetAddress& peer, const Listening& how) {
  if (!admit(peer, how)) return;  // the Socket closes
  size_t index = pick_loop();
  LoopState& state = *loop_states_[index];
  if (state.loop == loop_) return open_connection(loop_, std::move(socket), peer, how);

  state.loop->load().in_flight.fetch_add(1, std::memory_order_relaxed);
  Handoff handoff{socket.fd(), peer, how};
  if (state.handoffs.try_push(handoff)) {
    socket.release();
    state.loop->wakeup();
    return;
  }
  // The loop is 4096 sockets behind: fall back to the locked path.
  int fd = socket.release();
  state.loop->queue_in_loop([this, index, fd, peer, how] {
    loop_states_[index]->loop->load().in_flight.fetch_sub(1, std::memory_order_relaxed);
    open_connection(loop_states_[index]->loop, Socket(fd), peer, how);
  });
}

void TcpServer::drain_handoffs(size_t index) {
  LoopState& state = *loop_states_[index];
  Handoff handoff;
  while (state.handoffs.try_pop(handoff)) {
    state.loop->load().in_flight.fetch_sub(1, std::memory_order_relaxed);
    open_connection(state.loop, Socket(handoff.fd), handoff.peer, handoff.how);
  }
}

void TcpServer::set_gate(std::shared_ptr<ConnectionGate> gate) {
  std::lock_guard lock(gate_mu_);
  gated_.store(gate != nullptr, std::memory_order_release);
  gate_ = std::move(gate);
}

size_t TcpServer::pick_loop() {
  return options_.dispatch_policy == DispatchPolicy::kLeastLoaded ? pool_->pick_least_loaded()
                                                                   : pool_->pick_round_robin();
}

void TcpServer::open_connection(EventLoop* io, Socket socket, const InetAddress& peer,
                                const Listening& how) {
  SecureContext* const secure = how.secure;
  io->assert_in_loop_thread();
  ConnectionTable& table = io->connections();
  if (options_.max_connections_per_loop != 0 &&
      table.live() >= options_.max_connections_per_loop) {
    TERN_LOG_EVERY_SECOND(spdlog::level::warn,
                          "{}: {} connections on this loop, the configured maximum; closing "
                          "new connection from {}",
                          options_.name, table.live(), peer.to_ip_port());
    io->load().shed.add();
    return;  // the Socket closes
  }
  std::unique_ptr<SecureLayer> layer;
  if (secure != nullptr && !(layer = secure->new_layer())) {
    TERN_LOG_EVERY_SECOND(spdlog::level::err, "{}: no TLS session for a new connection from {}; closing it",
                          options_.name, peer.to_ip_port());
    io->load().shed.add();
    return;  // the Socket closes
  }
  std::shared_ptr<ConnectionGate> gate;
  if (gated_.load(std::memory_order_acquire)) {
    std::lock_guard lock(gate_mu_);
    gate = gate_;
  }
  // The client is the peer unless a PROXY header is to name it.
  if (gate && how.proxy == nullptr && !gate->enter(peer)) {
    io->load().shed.add();
    return;  // the Socket closes
  }
  io->load().accepted.add();
  TcpConnection* conn =
      table.open(std::move(socket), peer, &callbacks_, options_.trigger);
  if (options_.idle_timeout.count() > 0) conn->set_idle_timeout(options_.idle_timeout);
  if (how.proxy != nullptr) {
    conn->expect_proxy_header(how.proxy, accept_filter_ ? &accept_filter_ : nullptr, std::move(gate));
  } else if (gate) {
    conn->entered(std::move(gate));
  }
  if (layer) conn->use_secure_layer(std::move(layer), secure->handshake_timeout());
  table.establish(conn, /*input_waiting=*/options_.defer_accept.count() > 0);
}

}  // namespace tern::net
