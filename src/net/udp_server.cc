#include "net/udp_server.h"

#include <cerrno>
#include <cstring>

#include "base/assert.h"
#include "base/log.h"
#include "net/event_loop.h"

namespace tern::net {

// One contiguous slab of `count` datagram buffers, with the iovecs, addresses
// and headers recvmmsg/sendmmsg need, allocated once.
struct UdpServer::Batch {
  Batch(size_t count, size_t size)
      : data(std::make_unique_for_overwrite<char[]>(count * size)),
        iov(count),
        addrs(count),
        msgs(count),
        slot_size(size) {
    for (size_t i = 0; i < count; ++i) {
      iov[i].iov_base = data.get() + i * size;
      iov[i].iov_len = size;
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
  }
  // Resets header i for receiving (recvmmsg overwrites the lengths).
  void prepare_receive(size_t i) {
    iov[i].iov_len = slot_size;
    msgs[i].msg_hdr.msg_name = &addrs[i];
    msgs[i].msg_hdr.msg_namelen = sizeof addrs[i];
    msgs[i].msg_hdr.msg_flags = 0;
    msgs[i].msg_len = 0;
  }
  char* slot(size_t i) { return data.get() + i * slot_size; }

  std::unique_ptr<char[]> data;
  std::vector<iovec> iov;
  std::vector<sockaddr_storage> addrs;
  std::vector<mmsghdr> msgs;
  size_t slot_size;
};

UdpServer::UdpServer(EventLoop* loop, const InetAddress& address, UdpServerOptions options)
    : loop_(loop), local_address_(address), options_(options) {
  TERN_CHECK(options_.batch > 0 && options_.max_datagram > 0);
}

UdpServer::~UdpServer() {
  if (channel_) channel_->remove();
}

Result<void> UdpServer::start() {
  loop_->assert_in_loop_thread();
  if (socket_) return {};
  auto socket = UdpSocket::bind(local_address_, options_.reuse_port);
  if (!socket) return socket.error();
  socket_ = std::make_unique<UdpSocket>(std::move(*socket));
  local_address_ = socket_->local_address();
  in_ = std::make_unique<Batch>(options_.batch, options_.max_datagram);
  out_ = std::make_unique<Batch>(options_.batch, options_.max_datagram);
  channel_ = std::make_unique<Channel>(loop_, socket_->fd());
  channel_->set_read_callback([this] { handle_read(); });
  channel_->enable_reading();
  return {};
}

void UdpServer::handle_read() {
  for (size_t i = 0; i < options_.batch; ++i) in_->prepare_receive(i);
  int n;
  do {
    n = ::recvmmsg(socket_->fd(), in_->msgs.data(), static_cast<unsigned>(options_.batch),
                   MSG_DONTWAIT, nullptr);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    int err = errno;
    if (err != EAGAIN && err != EWOULDBLOCK) {
      TERN_LOG_EVERY_SECOND(spdlog::level::warn, "recvmmsg: {}", std::strerror(err));
    }
    return;
  }
  in_callback_ = true;
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    const mmsghdr& msg = in_->msgs[i];
    if (msg.msg_hdr.msg_flags & MSG_TRUNC) {
      ++dropped_;
      TERN_LOG_DEBUG("udp: datagram over {} bytes dropped", options_.max_datagram);
      continue;
    }
    ++received_;
    if (callback_) {
      callback_(*this, std::string_view(in_->slot(i), msg.msg_len),
                InetAddress::from_sockaddr(in_->addrs[i]));
    }
  }
  in_callback_ = false;
  flush();
}

void UdpServer::send_to(const InetAddress& peer, std::string_view data) {
  loop_->assert_in_loop_thread();
  TERN_CHECK_MSG(socket_ != nullptr, "UdpServer::send_to before start(): no socket to send from");
  if (data.size() > options_.max_datagram) {
    // Too big for a batch slot: send it on its own.
    flush();
    if (socket_->send_to(data, peer)) {
      ++sent_;
    } else {
      ++dropped_;
    }
    return;
  }
  std::memcpy(out_->slot(out_count_), data.data(), data.size());
  out_->iov[out_count_].iov_len = data.size();
  std::memcpy(&out_->addrs[out_count_], peer.sockaddr_ptr(), peer.socklen());
  mmsghdr& msg = out_->msgs[out_count_];
  msg.msg_hdr.msg_name = &out_->addrs[out_count_];
  msg.msg_hdr.msg_namelen = peer.socklen();
  ++out_count_;
  if (out_count_ == options_.batch || !in_callback_) flush();
}

void UdpServer::flush() {
  loop_->assert_in_loop_thread();
  size_t done = 0;
  while (done < out_count_) {
    int n = ::sendmmsg(socket_->fd(), &out_->msgs[done], static_cast<unsigned>(out_count_ - done),
                       MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      sent_ += static_cast<uint64_t>(n);
      continue;
    }
    int err = errno;
    if (n < 0 && err == EINTR) continue;
    // UDP may drop: a full send buffer (EAGAIN) loses the rest of the batch;
    // an error for one destination loses that datagram only.
    if (n < 0 && (err == EAGAIN || err == EWOULDBLOCK)) {
      dropped_ += out_count_ - done;
      break;
    }
    TERN_LOG_EVERY_SECOND(spdlog::level::warn, "sendmmsg: {}", std::strerror(err));
    ++dropped_;
    ++done;
  }
  out_count_ = 0;
}

}  // namespace tern::net
