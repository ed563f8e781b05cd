// Poller: the interface an EventLoop uses to wait for I/O readiness.
//
// Two implementations, chosen per loop (IoBackend): poller/epoll_poller.h and
// poller/io_uring_poller.h, which waits with io_uring poll requests,
// submitted in one batch per loop round. Owned by its EventLoop; loop thread
// only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

namespace tern::net {

class Buffer;
class Channel;

// What a poll() found for one channel.
struct ReadyEvent {
  // Besides poll bits, revents may be one of two completions (io_uring):
  // kReceived: bytes the kernel has already read from the socket, `result`
  // of them at `data` (the poller's until the next poll()), 0 for the peer's
  // end of stream, or -errno; kSent: a send (Poller::start_send) ended,
  // `result` bytes sent or -errno.
  static constexpr uint32_t kReceived = 1u << 31;  // EPOLLET's bit, never a poll's result
  static constexpr uint32_t kSent = 1u << 30;      // EPOLLONESHOT's bit, the same
  Channel* channel;            // the channel it is for
  uint32_t revents;            // poll bits, or kReceived or kSent
  int32_t result = 0;          // a completion's result (see above)
  const char* data = nullptr;  // kReceived: where the bytes are
};

// Which kernel interface a loop waits with. kDefault: what
// set_default_io_backend() chose, else the TERN_IO environment variable
// ("epoll" or "io_uring"), else io_uring; where the kernel refuses io_uring,
// epoll (said once: a warning when io_uring was asked for by name).
enum class IoBackend : uint8_t { kDefault, kEpoll, kIoUring };

// "epoll", "io_uring" ("default" for kDefault), and back (nullopt for another name).
std::string_view to_string(IoBackend backend);
std::optional<IoBackend> parse_io_backend(std::string_view name);
// Process-wide choice for loops created with kDefault. Call before loops start.
void set_default_io_backend(IoBackend backend);
// What kDefault stands for now (see IoBackend), before any fallback.
IoBackend default_io_backend();

class Poller {
 public:
  virtual ~Poller() = default;

  // Waits up to timeout_ms (-1: forever) and appends ready channels to *ready.
  // Returns the number appended; 0 on timeout or EINTR.
  virtual int poll(int timeout_ms, std::vector<ReadyEvent>* ready) = 0;

  // Adds or modifies the registration to match channel->poller_events().
  // A channel with no events is detached from the kernel but remembered.
  virtual void update_channel(Channel* channel) = 0;
  // Takes the channel out of the kernel's set and forgets it.
  virtual void remove_channel(Channel* channel) = 0;
  // For an owner about to close the channel's only descriptor. Closing takes
  // an fd out of epoll by itself; an io_uring poll request holds the file
  // open until it is cancelled.
  virtual void forget_channel(Channel* channel);

  // Completion-based output (io_uring), for channels whose owner takes
  // ChannelHandler::sent: whether start_send() works for this channel now
  // (it is registered), and the send itself, of bytes that stay put until
  // the handler's sent() reports the result (one send at a time; `more`:
  // MSG_MORE). An owner that closes with a send in flight abandons it: the
  // poller cancels it and keeps the bytes until the kernel lets go of them.
  virtual bool can_send(const Channel& /*channel*/) const { return false; }
  virtual void start_send(Channel& channel, const char* data, size_t length, bool more);
  virtual void abandon_send(Channel& channel, Buffer&& bytes);

  // Where the poller receives for channels (ChannelHandler::received): a
  // receive of this many bytes or more says that the peer sends in large
  // pieces, which its owner reads better itself (Channel::set_reads_itself).
  virtual size_t large_receive() const { return SIZE_MAX; }

  // The backend in use.
  virtual IoBackend backend() const = 0;
  // Whether poll()'s timeout is precise enough to drive the loop's timers
  // (otherwise the loop arms a timerfd).
  virtual bool drives_timers() const { return false; }

  // The poller for `backend` (kDefault resolved). io_uring that the kernel
  // does not offer, or refuses (kernel.io_uring_disabled), falls back to
  // epoll, logged once per process.
  static std::unique_ptr<Poller> create(IoBackend backend);
};

}  // namespace tern::net
