// TcpConnection: one established TCP connection, server or client side.
//
// Ownership: owned by its EventLoop's ConnectionTable and recycled there after
// it closes (accept and close do not touch the allocator in steady state).
// Code that must find it later, or from another thread, keeps its
// ConnectionId and looks it up with ConnectionTable::find on the loop thread.
// A reference obtained in a callback is valid until the end of the current
// dispatch round, even if the connection closes meanwhile.
//
// States: kConnected -> (shutdown) kDisconnecting -> kDisconnected, or
// straight to kDisconnected on error, EOF or force_close(). kIdle marks a
// pooled object.
//
// Output: bytes go straight to the socket when nothing is queued; what the
// kernel does not take is queued. File regions queue in order with bytes and
// are sent with sendfile(2), continued on writability. On an io_uring loop
// input arrives as received bytes and queued bytes leave in one send
// request per round, submitted with the loop's batch. (The output side is
// in tcp_connection_output.cc.)
//
// Encrypted: a connection accepted on an address with a SecureContext
// (TcpServer::set_secure_context) has a SecureLayer between its socket and
// these queues (tcp_connection_secure.cc). Received bytes go through the
// layer into input(); queued output, files included, is encrypted in
// steps of at most 64 KiB as the socket takes it, so a slow reader holds
// that much ciphertext and no more. Until the handshake is over output
// waits; a handshake not over in the context's time closes the connection.
// A client's connection (TcpClientOptions::secure) begins the handshake and
// is announced to on_connection once it is over; if it never is, the
// connection closes unannounced and TcpClient reports a failed connect.
//
// Relayed: a connection accepted on an address that expects the PROXY
// protocol (TcpServer::set_proxy_protocol) reads that header first, before
// any TLS, and is announced once it is read (tcp_connection_proxy.cc);
// client_address() is then the client it names.
//
// Loop thread only, every method.
#pragma once

#include <any>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "net/buffer.h"
#include "net/callbacks.h"
#include "net/channel.h"
#include "net/connection_gate.h"
#include "net/inet_address.h"
#include "net/output_stream.h"
#include "net/proxy_protocol.h"
#include "net/secure_layer.h"
#include "net/socket.h"
#include "net/timeout.h"

namespace tern::net {

class ConnectionTable;

class TcpConnection final : public OutputStream {
 public:
  // Where the connection stands (see above).
  enum class State : uint8_t { kIdle, kConnected, kDisconnecting, kDisconnected };

  // Made by the loop's ConnectionTable, for slot `slot`; not by users.
  TcpConnection(EventLoop* loop, uint32_t slot);

  ~TcpConnection();
  TcpConnection(const TcpConnection&) = delete;
  TcpConnection& operator=(const TcpConnection&) = delete;

  ConnectionId id() const { return {loop(), slot_, generation_}; }  // finds it again (ConnectionTable::find)
  EventLoop* loop() const { return channel_.owner_loop(); }         // the loop it lives on
  int fd() const { return socket_.fd(); }                           // its socket
  // The local end; looked up with getsockname() on first use.
  const InetAddress& local_address() const;
  const InetAddress& peer_address() const { return peer_; }  // the other end of the socket
  // The client: the source a PROXY protocol header named, else the peer.
  const InetAddress& client_address() const {
    return client_ != nullptr && client_->relayed && !client_->header.local ? client_->header.source : peer_;
  }
  // The PROXY protocol header the connection began with; null without one.
  const ProxyHeader* proxy_header() const {
    return client_ != nullptr && client_->relayed ? &client_->header : nullptr;
  }
  // Whether the peer is on this host: a loopback address, or the address
  // it connected to.
  bool peer_is_local() const;
  // Whether a SecureLayer (TLS) carries the bytes, and the layer, to ask for
  // its protocol and cipher; null for a plain connection.
  bool secure() const { return secure_ != nullptr; }
  const SecureLayer* secure_layer() const { return secure_ ? secure_->layer.get() : nullptr; }
  State state() const { return state_; }                               // see State
  bool connected() const { return state_ == State::kConnected; }        // state() is kConnected
  bool disconnected() const { return state_ == State::kDisconnected; }  // state() is kDisconnected
  // The error (an errno value) that closed the connection: a failed read
  // or write, a reset by the peer, EPROTO for a TLS session that failed
  // (a bad record, a fatal alert). 0 while it is open, and when it ended
  // cleanly (the peer's end or close_notify, a shutdown, a close of ours),
  // also when a write failed after the peer's end was read. Tells an end of
  // stream from a cut one in the close callback, where a body that ends at
  // the close is whole only if this is 0.
  int close_error() const { return close_error_; }

  // Queue output. Ignored (logged at debug) unless connected.
  void send(std::string_view data);
  void send(Buffer& data);  // takes all readable bytes of `data`
  // A region of 256 KiB or more for a peer on this host is mapped first
  // (ConnectionCallbacks::map_files_for_local_peers).
  void send_file(FileRegion region) override;
  // Output queued and not written yet: bytes, file regions, ciphertext.
  size_t pending_output_bytes() const;

  // Serialising in place: append to output_tail_buffer() (the end of the
  // output queue, after any queued file), then call flush(). Saves a copy
  // for protocol layers that build their messages directly.
  Buffer& output_tail_buffer() override;
  // Writes what is queued, as far as the socket takes it now.
  void flush();

  // Half-close once the queued output is written; reading goes on until the
  // peer closes (or the idle timeout fires).
  void shutdown();
  // Stops all I/O now; the close callbacks run at the end of this round.
  void force_close();
  // Closes as soon as the queued output is written (no half-close, no wait
  // for the peer's FIN). For a last response when nothing more is expected
  // from the peer: unread input would make the kernel send a reset.
  void close_after_write();

  // With ConnectionCallbacks::write_complete_when_asked: call
  // on_write_complete once, when the output queue is next empty (at the end
  // of this round if it is empty now).
  void ask_write_complete();

  // Back-pressure on input: while not reading, the kernel buffers and then
  // the peer's window fills.
  void start_reading();
  void stop_reading();
  bool is_reading() const { return reading_; }

  // Closes the connection after `timeout` without a byte in either direction.
  // Zero disables. Refreshing is O(1) and happens on every read and write.
  void set_idle_timeout(std::chrono::milliseconds timeout);
  // TCP_NODELAY on or off: no Nagle delay for small writes.
  void set_tcp_nodelay(bool on);
  // Queued output above which on_high_water_mark runs, in place of the
  // callbacks' high_water_mark (at most 4 GiB).
  void set_high_water_mark(size_t bytes);

  Buffer& input();  // bytes received and not consumed yet
  // A slot for the protocol layer (parser state, a pointer to a session).
  std::any& context();

  uint64_t bytes_received() const { return bytes_received_; }  // on the socket, since it opened
  uint64_t bytes_sent() const { return bytes_sent_; }          // on the socket, since it opened

 private:
  friend class ConnectionTable;
  friend class TcpClient;
  friend class TcpServer;

  struct PendingFile {
    FileRegion region;
    Buffer after{0};  // bytes queued behind this file
  };
  // The files queued behind output_, in order: usually none, seldom more
  // than one. The vector is made by the first file and kept, with its
  // capacity, for the pooled object's next lives; until then the queue is
  // one pointer (idle connections are mostly this object).
  class FileQueue {
   public:
    bool empty() const { return files_ == nullptr || files_->empty(); }
    size_t size() const { return files_ == nullptr ? 0 : files_->size(); }
    PendingFile& front() { return files_->front(); }
    PendingFile& back() { return files_->back(); }
    void push_back(PendingFile file) {
      if (files_ == nullptr) files_ = std::make_unique<std::vector<PendingFile>>();
      files_->push_back(std::move(file));
    }
    void pop_front() { files_->erase(files_->begin()); }
    void clear() {
      if (files_ != nullptr) files_->clear();
    }
    const PendingFile* begin() const { return files_ == nullptr ? nullptr : files_->data(); }
    const PendingFile* end() const { return files_ == nullptr ? nullptr : files_->data() + files_->size(); }

   private:
    std::unique_ptr<std::vector<PendingFile>> files_;
  };

  // An encrypted connection's side (tcp_connection_secure.cc).
  struct SecureState {
    explicit SecureState(TcpConnection* conn) : timer(&TcpConnection::secure_timer_fired, conn) {}
    std::unique_ptr<SecureLayer> layer;
    Buffer in{0};   // ciphertext received, not through the layer yet
    Buffer out{0};  // ciphertext to send, ahead of output_
    // The handshake's deadline; once established, when a quiet connection
    // gives back its layer's buffers (secure_idle).
    Timeout timer;
    uint64_t idle_since_ms = 0;  // its output drained, after a request; 0: busy
    bool requested = false;   // plaintext has come since the handshake
    bool back_to_back = false;  // its last request came right after a response
    bool close_sent = false;  // the closing alert is queued
    bool client = false;      // we began the handshake
    bool announced = true;    // on_connection has run (a client's waits for the handshake)
    bool timed_out = false;   // the handshake did not end in time
    bool kernel = false;      // the kernel encrypts what we send (layer->kernel_sends())
  };

  // ConnectionTable's side.
  void open(Socket socket, const InetAddress& peer, const ConnectionCallbacks* callbacks,
            TriggerMode trigger);
  // input_waiting: the first bytes are probably there already (deferred
  // accept): read before registering with epoll.
  void establish(bool input_waiting);
  // Closed: empties the object for its slot's next connection, with a new
  // generation.
  void recycle();

  static const ChannelHandler kChannelHandler;  // calls the handle_*() below

  void handle_read();
  void handle_received(const char* data, ssize_t n);
  void handle_sent(ssize_t n);
  bool sends_by_completion() const;
  // Whether plain bytes sent now go by a send request (queued whole, their
  // buffer held to its completion) rather than a write at once.
  bool queues_for_send_request() const;
  // submit_send() at the end of this round, so that the round's bytes leave
  // in one send request.
  void schedule_send();
  // Edge-triggered, a writer whose socket keeps room would write on until
  // its queue is empty; after kWriteTurn bytes it lets the round's other
  // connections have theirs and goes on after the loop's next poll.
  static constexpr size_t kWriteTurn = 512 * 1024;
  void yield_writing();
  // Send requests (io_uring): submit_send() hands the queued bytes to the
  // kernel as sending_; start_send() sends sending_ (again after a partial
  // send); abandon_send() leaves a send in flight to the poller (on close).
  void submit_send();
  void start_send();
  void abandon_send();
  // Hands input_ to on_message (drops it without one);
  // deliver_waiting_input() hands over what came while reading was stopped,
  // then the peer's end that waited behind it.
  void deliver_input();
  void deliver_waiting_input();
  // Watches the socket with the poller, as the trigger mode says.
  void register_channel();
  // The socket is writable, hung up or in error, or the peer ended its side;
  // handle_close() closes now, running the close callbacks.
  void handle_write();
  void handle_close();
  void handle_error();
  void handle_peer_eof();
  // Stops all I/O now and closes at the end of the round (the close
  // callbacks never run inside a send() or a user callback).
  void close_at_round_end();
  // Logs the error `what` met, keeps it for close_error(), and closes.
  void fail(int err, const char* what);
  // Keeps `err` for close_error(), unless a close is already under way
  // (that one keeps its own cause) or the peer's end was read.
  void keep_close_error(int err);

  // Who the client is and what let it in, for a connection relayed by a
  // load balancer (its PROXY header: tcp_connection_proxy.cc) or counted
  // by a gate. Made when first needed and kept for the pooled object's
  // next lives.
  struct ClientState {
    explicit ClientState(TcpConnection* conn) : timer(&TcpConnection::proxy_timer_fired, conn) {}
    bool relayed = false;  // a PROXY header is expected, or was read
    Timeout timer;  // the header's deadline
    ProxyHeader header;
    // TcpServer's accept filter, for the client the header names; may be null.
    const std::function<bool(const InetAddress&)>* admit = nullptr;
    // While the header is awaited, the gate its client is to enter by;
    // then the gate the client entered by (left on close). May be null.
    std::shared_ptr<ConnectionGate> gate;
  };
  ClientState& client_state();

  // TcpServer's side: before establish(), the connection must begin with a
  // PROXY protocol header, within options->timeout; `admit` judges the
  // client it names (both outlive the connection), and that client enters
  // by `gate` (may be null).
  void expect_proxy_header(const ProxyProtocolOptions* options,
                           const std::function<bool(const InetAddress&)>* admit,
                           std::shared_ptr<ConnectionGate> gate);
  // TcpServer's side: the client has entered by `gate`, which it leaves on close.
  void entered(std::shared_ptr<ConnectionGate> gate) { client_state().gate = std::move(gate); }
  // The bytes in input_ so far: the header read (and what came after it
  // handed on), more awaited, or the connection closed.
  void proxy_input();
  // The header is read: the connection is announced, and what came after
  // the header goes on to the TLS layer or to on_message.
  void proxy_header_read();
  static void proxy_timer_fired(void* self);  // no header in time: closes

  // TcpServer's and TcpClient's side: before establish(), the connection
  // speaks through `layer`, which must be established within
  // `handshake_timeout`; a `client` layer speaks first.
  void use_secure_layer(std::unique_ptr<SecureLayer> layer, std::chrono::milliseconds handshake_timeout,
                        bool client = false);
  // Why a client's handshake never ended (TcpClient's report); empty if it did.
  std::string secure_handshake_failure() const;
  // tcp_connection_secure.cc
  void secure_start();
  void secure_read();
  void secure_received(const char* data, size_t n);
  void secure_input();
  void secure_flush();
  bool secure_encrypt_more();
  bool secure_wants_to_close();
  bool send_clear_records(int* err);
  // Sending is ours to encrypt (TLS in OpenSSL, not in the kernel).
  bool encrypts() const { return secure_ && !secure_->kernel; }
  // All is written: the layer's buffers go back, now or once quiet.
  void secure_idle();
  // The handshake did not end in time (closes), or, once established, the
  // connection was quiet long enough (the layer's buffers go back).
  static void secure_timer_fired(void* self);

  // After a read of n bytes of `offered`, edge-triggered: whether the
  // socket is drained (a short read, and no end of stream reported).
  bool drained(size_t n, size_t offered) const;
  // Whether output is queued or in flight.
  bool has_pending_output() const {
    return send_in_flight_ || !output_.empty() || !files_.empty() || (secure_ && !secure_->out.empty());
  }
  // Where bytes queued now go: output_, or behind the last file queued.
  Buffer& output_tail() { return files_.empty() ? output_ : files_.back().after; }
  // Plain bytes queued now wait for more (MSG_MORE): a head before a file,
  // unless the owner wants heads to leave at once, or the last bytes
  // before a close, which the FIN may join.
  bool holds_for_more() const {
    return (!files_.empty() && callbacks_->tcp_nopush) || close_after_write_;
  }
  // Output was queued (`before`: the bytes queued until then): the high
  // water mark is checked, and the bytes are written or wait for the socket.
  void after_queue_grew(size_t before);
  // The front file region is sent: the bytes queued behind it move up.
  void pop_sent_file();
  // Writes the queue in order, until it is empty or the socket is full.
  void flush_output();
  // The queue is empty: write-complete, a close or a half-close that waited
  // for it.
  void output_drained();
  // Bytes moved on the socket: the connection's, the loop's totals (an
  // accepted connection's), the idle timer.
  void count_received(uint64_t bytes);
  void count_sent(uint64_t bytes);
  void note_activity(uint64_t bytes);
  static void idle_timed_out(void* self);  // idle too long: closes
  // What defer_callback() runs at the end of the round (an enum, not a
  // member pointer: with it the closure fits std::function's inline
  // storage, and deferring allocates nothing).
  enum class Deferred : uint8_t { kWriteComplete, kDeliverWaitingInput, kClose };
  void defer_callback(Deferred what);
  bool wants_write_complete() const;
  void call_write_complete();

  // Laid out by use: the first 192 bytes hold all that a keep-alive request
  // touches (state, fd, callbacks, context and output queue; the channel and
  // byte counts; the two buffers), what follows is for setup and rare paths.
  // With thousands of connections every cache line touched per request is a
  // likely miss. (Not alignas(64): aligned allocation costs more idle memory
  // than the line it saves.) Flags are bits and counts 32-bit so that the
  // object takes a 288-byte allocation: idle connections are mostly this.
  State state_ = State::kIdle;
  TriggerMode trigger_ : 1 = TriggerMode::kLevel;
  bool reading_ : 1 = false;
  bool peer_closed_ : 1 = false;
  bool close_after_write_ : 1 = false;
  bool close_scheduled_ : 1 = false;
  bool write_complete_asked_ : 1 = false;
  bool accepted_ : 1 = false;  // counted in the loop's load (ConnectionTable)
  bool received_while_paused_ : 1 = false;  // io_uring received bytes while not reading
  bool eof_waiting_ : 1 = false;  // the peer's end came behind bytes not delivered yet
  bool send_in_flight_ : 1 = false;  // sending_ is the kernel's (io_uring)
  bool send_scheduled_ : 1 = false;  // submit_send() runs at the end of this round
  bool write_yielded_ : 1 = false;  // flush_output() runs again after the next poll
  bool idle_timer_on_ : 1 = false;  // set_idle_timeout() with a positive time
  bool awaiting_proxy_header_ : 1 = false;  // see expect_proxy_header()
  mutable bool local_known_ : 1 = false;
  uint8_t close_error_ = 0;  // see close_error(); Linux's errno values fit
  uint32_t generation_ = 0;
  // set_idle_timeout()'s, in milliseconds (up to 49 days).
  uint32_t idle_timeout_ms_ = 0;
  // Queued output above which on_high_water_mark runs (at most 4 GiB).
  uint32_t high_water_mark_ = 0;
  Socket socket_;        // owned
  const uint32_t slot_;  // in the loop's ConnectionTable
  // Not owned; outlives us. Its owner's (a TcpServer's, a TcpClient's):
  // tells whose connection this is (ConnectionTable::close_all).
  const ConnectionCallbacks* callbacks_ = nullptr;
  std::any context_;  // see context()
  FileQueue files_;   // queued behind output_

  Channel channel_;  // knows the loop (loop())
  uint64_t bytes_received_ = 0;
  uint64_t bytes_sent_ = 0;

  // Allocated on first use: an idle connection holds no buffer memory.
  Buffer input_{0};
  Buffer output_{0};
  Buffer sending_{0};  // with io_uring: bytes of the send in flight, ahead of output_

  // Made by the first set_idle_timeout() and kept for the pooled object's
  // next lives: connections without one (HTTP has its own) do not carry it.
  std::unique_ptr<Timeout> idle_timer_;
  std::unique_ptr<SecureState> secure_;  // null for a plain connection
  std::unique_ptr<ClientState> client_;  // null unless relayed or gated, in this life or a past one
  mutable InetAddress local_;  // see local_address()
  InetAddress peer_;           // see peer_address()
};

}  // namespace tern::net
