// TcpServer: accepts TCP connections and serves them on N I/O loops.
//
// Two ways to spread connections over the loops (TcpServerOptions::accept_mode):
//   kDispatch   one Acceptor on the base loop accepts every connection and
//               hands the socket to an I/O loop through that loop's lock-free
//               queue and an eventfd wake-up, picking the loop round-robin or
//               least-loaded;
//   kReusePort  every I/O loop has its own listening socket on the same port
//               (SO_REUSEPORT) and the kernel spreads connections by hash.
// With io_threads == 0 the base loop does everything.
//
//   EventLoop loop;
//   TcpServerOptions options;
//   options.io_threads = 4;
//   TcpServer server(&loop, InetAddress(7000), options);
//   server.set_message_callback([](TcpConnection& c, Buffer& in) { c.send(in); });
//   if (auto r = server.start(); !r) die(r.error().message());
//   loop.loop();
//
// Ownership: owned by the user, on the base loop's thread. It owns the I/O
// thread pool, the acceptors and the callbacks its connections call; the
// connections themselves live in each loop's ConnectionTable. Destroying the
// server closes its connections (their close callbacks run) and joins the
// I/O threads. Every method is base-loop thread only.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/bounded_queue.h"
#include "base/result.h"
#include "net/callbacks.h"
#include "net/connection_gate.h"
#include "net/inet_address.h"
#include "net/proxy_protocol.h"
#include "net/secure_layer.h"
#include "net/socket.h"
#include "net/timer_wheel.h"

namespace tern::net {

class InheritedSockets;

class Acceptor;
class EventLoop;
class EventLoopThreadPool;

// How connections reach the I/O loops (see above).
enum class AcceptMode : uint8_t { kDispatch, kReusePort };
// Which loop kDispatch hands a connection to: the next in turn, or the one
// with the least connections, requests in flight and recent bytes.
enum class DispatchPolicy : uint8_t { kRoundRobin, kLeastLoaded };

// What a TcpServer is made with.
struct TcpServerOptions {
  std::string name = "tern";                                     // for log lines and thread names
  int io_threads = 0;                                            // I/O loops besides the base loop
  AcceptMode accept_mode = AcceptMode::kDispatch;                // see above
  DispatchPolicy dispatch_policy = DispatchPolicy::kRoundRobin;  // kDispatch's choice of loop
  TriggerMode trigger = TriggerMode::kLevel;                     // epoll's, for the connections
  // CPU for I/O loop i is cpu_affinity[i % size]; empty: no pinning.
  std::vector<int> cpu_affinity;
  int backlog = SOMAXCONN;  // listen()'s
  // Connections a loop will hold; more are closed on accept. 0: no limit.
  size_t max_connections_per_loop = 0;
  // Close connections idle this long (no byte either way). 0: never.
  std::chrono::milliseconds idle_timeout{0};
  bool tcp_nodelay = true;  // TCP_NODELAY, set on the listening sockets (accepted ones inherit it)
  // For protocols where the client speaks first (HTTP): with TCP_DEFER_ACCEPT
  // the kernel hands over a connection only once its first bytes arrived (or
  // after about this long), and the first read happens at once, without a
  // round through epoll. A connection answered and closed in that read never
  // touches epoll at all. 0: off.
  std::chrono::seconds defer_accept{0};
  // TCP_NOTSENT_LOWAT, set on the listening sockets and inherited by every
  // accepted connection: the kernel keeps at most about this many bytes
  // queued but not yet sent, and reports the socket writable (and takes
  // more in a write or sendfile) only below it. Large bodies then leave in
  // steps the peer's window can take at once, so the kernel sends them from
  // the write itself rather than later, when the peer's acknowledgements
  // arrive (on a loopback peer's CPU), and it holds kilobytes rather than
  // megabytes of unsent data per connection. 0: the kernel's default
  // (net.ipv4.tcp_notsent_lowat, unlimited unless set).
  size_t send_lowat = 0;
  // Send file regions of 256 KiB and more to a peer on this host (a loopback
  // address, or the address it connected to) from a read-only mapping of the
  // file, with write(2), instead of with sendfile(2). Over loopback no
  // device reads the pages: sendfile only moves the one copy there is to
  // the reader, which then copies from cold page-cache pages it shares with
  // the sender. Copied by the sender, the bytes reach the reader warm:
  // measured with a 64 MiB file and wrk on the other CPU, about a fifth
  // more bytes per second for the same CPU time of the two processes
  // together (bench/results). Peers elsewhere get sendfile, which copies
  // nothing.
  bool map_files_for_local_peers = false;
  // Bytes queued just before a file region (a response's head, serialised
  // with TcpConnection::output_tail_buffer() and sent with the file) are
  // held back (MSG_MORE) until the file's first bytes join them, so that a head
  // and a small file leave in one packet (nginx's `tcp_nopush on`). false:
  // the head leaves on its own at once and the file follows (nginx's
  // default). A held head spares a packet per response. Sent on its own it
  // wakes the reader sooner: over loopback under BBR, held heads in front of
  // bodies of about 96 to 128 KiB fill the reader's window, and the kernel
  // then paces every later response with a timer (README, the cache rows).
  bool tcp_nopush = true;
  // Listening sockets handed to the process (socket activation, a binary
  // upgrade): an address takes its sockets from here before binding new
  // ones. Not owned; read on the base loop, at start() and on
  // set_listen_addresses().
  InheritedSockets* inherited = nullptr;
};

class TcpServer {
 public:
  using ThreadInitCallback = std::function<void(EventLoop*)>;  // see set_thread_init_callback

  // A server on `listen_address`, whose base loop is `loop`; listens at start().
  TcpServer(EventLoop* loop, const InetAddress& listen_address, TcpServerOptions options = {});
  // Several addresses (IPv4 and IPv6, several ports) served by one set of loops.
  TcpServer(EventLoop* loop, std::vector<InetAddress> listen_addresses,
            TcpServerOptions options = {});
  // Stops accepting, closes every connection of the server (each on its
  // loop's thread) and joins the I/O threads. Base loop thread.
  ~TcpServer();

  TcpServer(const TcpServer&) = delete;
  TcpServer& operator=(const TcpServer&) = delete;

  // The connections' callbacks (callbacks.h). Set before start().
  void set_connection_callback(std::function<void(TcpConnection&)> cb) {
    assert_not_started();
    callbacks_.on_connection = std::move(cb);
  }
  void set_message_callback(std::function<void(TcpConnection&, Buffer&)> cb) {
    assert_not_started();
    callbacks_.on_message = std::move(cb);
  }
  // only_when_asked: once after each TcpConnection::ask_write_complete()
  // instead of after every write that empties the queue.
  void set_write_complete_callback(std::function<void(TcpConnection&)> cb,
                                   bool only_when_asked = false) {
    assert_not_started();
    callbacks_.on_write_complete = std::move(cb);
    callbacks_.write_complete_when_asked = only_when_asked;
  }

  // cb(conn, queued) when a connection's queued output grows past `bytes`:
  // once per crossing, from inside the send() that crossed it.
  void set_high_water_mark_callback(std::function<void(TcpConnection&, size_t)> cb, size_t bytes) {
    assert_not_started();
    callbacks_.on_high_water_mark = std::move(cb);
    callbacks_.high_water_mark = bytes;
  }
  // Decides on the accepting thread whether to keep a new connection (false:
  // it is closed at once). Must be thread-safe when several loops accept.
  void set_accept_filter(std::function<bool(const InetAddress& peer)> filter) {
    assert_not_started();
    accept_filter_ = std::move(filter);
  }
  // When accept() finds the process out of descriptors: called on the
  // accepting loop, it lets go of descriptors the application can spare
  // (caches) and returns how many it closed on that loop (it may ask the
  // other loops to do the same, for later accepts). Must be thread-safe
  // when several loops accept.
  void set_release_callback(std::function<size_t(EventLoop*)> cb) {
    assert_not_started();
    release_ = std::move(cb);
  }
  // Connections accepted on `address` (as given to the constructor or to
  // set_listen_addresses) speak through a layer `context` makes for each
  // (TLS: tls::ServerContext). Set before start(), or before the address is
  // added by set_listen_addresses; the server keeps the context as long as
  // it lives. Without one, an address is plain TCP.
  void set_secure_context(const InetAddress& address, std::shared_ptr<SecureContext> context);
  // Connections accepted on `address` begin with a PROXY protocol header
  // (version 1 or 2, net/proxy_protocol.h) from a load balancer in front:
  // only peers `options.trusted` accepts may connect there (others are
  // closed at accept), and a connection is announced (on_connection) once
  // its header is read, with TcpConnection::client_address() the client
  // the header named. The accept filter judges that client too. A header
  // that is malformed, or not whole within `options.timeout`, closes the
  // connection. With TLS, the header comes before the handshake. Set as
  // set_secure_context is.
  void set_proxy_protocol(const InetAddress& address, ProxyProtocolOptions options);
  // The gate new connections pass once their client is known (see
  // net/connection_gate.h); null: none. Any thread, any time: connections
  // already in keep the gate they entered by.
  void set_gate(std::shared_ptr<ConnectionGate> gate);

  // Runs on each I/O loop's thread before it serves (per-loop state lives
  // there); with io_threads = 0, on the base loop, inside start().
  void set_thread_init_callback(ThreadInitCallback cb) {
    assert_not_started();
    thread_init_ = std::move(cb);
  }

  // Binds, listens and starts the I/O threads. Fails (and can be retried)
  // when the address cannot be bound.
  Result<void> start();

  // Closes the listening sockets; established connections carry on. Used
  // for a graceful stop.
  void stop_accepting();

  // Listens on `addresses` from now on (a reload): addresses not listened
  // on yet are bound first, all or none (an error changes nothing); then
  // those no longer wanted are closed, their established connections
  // carrying on; the others keep their sockets. Base loop thread, after
  // start().
  Result<void> set_listen_addresses(const std::vector<InetAddress>& addresses);

  // Live connections over all loops (approximate while they change). Any thread.
  size_t connection_count() const;
  // What the loops have counted since they started (LoopLoad), summed:
  // connections accepted and shed, bytes on their sockets. Any thread.
  struct Totals {
    uint64_t accepted = 0;        // connections accepted
    uint64_t shed = 0;            // accepted and closed at once: a loop full, out of descriptors, a gate's refusal
    uint64_t bytes_received = 0;  // on the connections' sockets
    uint64_t bytes_sent = 0;      // on the connections' sockets
  };
  Totals totals() const;  // any thread

  // The bound address; with port 0 in the constructor, the port the kernel chose.
  const InetAddress& listen_address() const { return listen_addresses_.front(); }
  // Every address, as bound, in the order given.
  const std::vector<InetAddress>& listen_addresses() const { return listen_addresses_; }
  EventLoop* base_loop() const { return loop_; }  // the loop given to the constructor
  // The loops that serve connections (the base loop alone without I/O
  // threads); empty before start().
  const std::vector<EventLoop*>& io_loops() const;
  const TcpServerOptions& options() const { return options_; }  // as made

 private:
  // How an address's connections begin (kept by the server; never freed
  // while it lives).
  struct Listening {
    SecureContext* secure = nullptr;
    const ProxyProtocolOptions* proxy = nullptr;
  };
  struct Handoff {
    int fd = -1;
    InetAddress peer;
    Listening how;
  };
  struct LoopState;  // per I/O loop: hand-off queue, acceptor, timers

  // Callbacks are read by I/O threads once started: set them before, on the base loop.
  void assert_not_started() const;
  // kDispatch, on the base loop: an admitted socket goes to the loop
  // pick_loop() chooses, opened at once on the base loop, else handed off
  // through that loop's queue.
  void on_accepted(Socket socket, const InetAddress& peer, const Listening& how);
  // The accept filter's and the PROXY protocol's verdict on a new peer.
  bool admit(const InetAddress& peer, const Listening& how) const;
  // On loop `index`'s thread: as it starts, its acceptors (kReusePort), its
  // hand-off hook and its load's decay; as the server goes, the same taken
  // down and the server's connections there closed.
  void setup_loop(size_t index);
  void teardown_loop(size_t index);
  // Opens the connections handed off to loop `index`.
  void drain_handoffs(size_t index);
  // Makes a connection of an accepted socket on `loop`, unless the loop is
  // full, no TLS layer can be made or the gate refuses the client.
  void open_connection(EventLoop* loop, Socket socket, const InetAddress& peer, const Listening& how);
  // How connections accepted on `requested` begin: the context and PROXY
  // protocol options set last for it.
  Listening listening(const InetAddress& requested) const;
  size_t pick_loop();  // the index of the next loop, as dispatch_policy says
  // The sockets for one address (one, or one per loop with reuseport),
  // bound and set up; *address becomes the bound one (a port 0 resolved).
  Result<std::vector<Socket>> bind_address(InetAddress* address) const;
  // Starts accepting on the sockets bind_address() made for `requested`.
  void add_acceptors(const InetAddress& requested, std::vector<Socket> sockets);
  // A listening acceptor on `io`: its connections go to on_accepted() in
  // kDispatch mode, else are opened on `io` itself.
  std::unique_ptr<Acceptor> make_acceptor(EventLoop* io, Socket socket, const InetAddress& requested);

  EventLoop* const loop_;
  std::vector<InetAddress> requested_;  // as given (port 0 stays 0)
  std::vector<InetAddress> listen_addresses_;  // as bound, in the same order
  const TcpServerOptions options_;
  ConnectionCallbacks callbacks_;  // outlives every connection of ours
  ThreadInitCallback thread_init_;
  std::function<bool(const InetAddress&)> accept_filter_;
  std::function<size_t(EventLoop*)> release_;
  mutable std::mutex gate_mu_;
  std::shared_ptr<ConnectionGate> gate_;  // under gate_mu_
  std::atomic<bool> gated_{false};        // gate_ is set: lock to read it
  // By requested address; the last one set for an address is its own.
  // Never shrinks: acceptors and hand-offs hold raw pointers.
  std::vector<std::pair<InetAddress, std::shared_ptr<SecureContext>>> secure_contexts_;
  std::vector<std::pair<InetAddress, std::unique_ptr<ProxyProtocolOptions>>> proxy_protocols_;
  bool started_ = false;  // start() has run
  // Dispatch mode, on the base loop: the requested address and its acceptor.
  std::vector<std::pair<InetAddress, std::unique_ptr<Acceptor>>> acceptors_;
  std::vector<std::unique_ptr<LoopState>> loop_states_;  // one per I/O loop
  std::unique_ptr<EventLoopThreadPool> pool_;  // destroyed first
};

}  // namespace tern::net
