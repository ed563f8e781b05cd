#include "net/dns_resolver.h"

#include <ares.h>
#include <arpa/inet.h>
#include <netdb.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <unordered_map>

#include "base/log.h"
#include "net/channel.h"
#include "net/event_loop.h"

namespace tern::net {
namespace {

// c-ares wants ares_library_init once per process before any channel.
bool library_ready() {
  static const int status = ares_library_init(ARES_LIB_INIT_ALL);
  return status == ARES_SUCCESS;
}

// "127.0.0.1:5353" and "[::1]:53" as c-ares' csv takes them; a bare
// address gets port 53.
std::optional<std::string> server_entry(const std::string& text) {
  if (auto address = InetAddress::parse(text)) return address->to_ip_port();
  if (auto address = InetAddress::from_ip_port(text, 53)) return address->to_ip_port();
  return std::nullopt;
}

}  // namespace

struct DnsResolver::State {
  EventLoop* loop = nullptr;
  ares_channel channel = nullptr;
  // The sockets c-ares has open, each watched by a channel of the loop.
  std::unordered_map<int, std::unique_ptr<Channel>> sockets;
  TimerId timer;
  // Lookups in flight: c-ares calls back with their id, which is dropped
  // when the resolver goes (the callback then finds nothing to call).
  struct Lookup {
    State* state;
    uint64_t id;
    uint16_t port;
  };
  std::unordered_map<uint64_t, Callback> pending;
  uint64_t next_id = 1;
  bool destroying = false;
  // Answers go out after the round; one whose resolver went meanwhile is
  // dropped.
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);

  ~State() {
    destroying = true;
    alive.reset();
    if (timer.valid()) loop->cancel(timer);
    // Fails what is pending (callbacks that find `destroying` and do nothing).
    if (channel != nullptr) ares_destroy(channel);
    for (auto& [fd, watched] : sockets) watched->remove();
  }

  void process(int readable_fd, int writable_fd) {
    ares_process_fd(channel, readable_fd, writable_fd);
    arm_timer();
  }

  // c-ares keeps its own deadlines; it is asked when the next one is.
  void arm_timer() {
    if (timer.valid()) loop->cancel(timer);
    timer = TimerId{};
    if (pending.empty()) return;
    timeval most{1, 0};
    timeval next{};
    timeval* wait = ares_timeout(channel, &most, &next);
    const auto ms = std::chrono::milliseconds(wait->tv_sec * 1000 + wait->tv_usec / 1000 + 1);
    timer = loop->run_after(ms, [this] {
      timer = TimerId{};
      process(ARES_SOCKET_BAD, ARES_SOCKET_BAD);
    });
  }

  static void socket_state(void* data, ares_socket_t fd, int readable, int writable) {
    auto* self = static_cast<State*>(data);
    if (self->destroying) return;
    auto it = self->sockets.find(fd);
    if (!readable && !writable) {
      if (it != self->sockets.end()) {
        // We may be inside this channel's own callback: it goes after the
        // round.
        it->second->remove();
        std::shared_ptr<Channel> gone(std::move(it->second));
        self->sockets.erase(it);
        self->loop->queue_in_loop([gone] {});
      }
      return;
    }
    if (it == self->sockets.end()) {
      auto watched = std::make_unique<Channel>(self->loop, fd);
      watched->set_read_callback([self, fd] { self->process(fd, ARES_SOCKET_BAD); });
      watched->set_write_callback([self, fd] { self->process(ARES_SOCKET_BAD, fd); });
      watched->set_error_callback([self, fd] { self->process(fd, fd); });
      watched->set_close_callback([self, fd] { self->process(fd, fd); });
      it = self->sockets.emplace(fd, std::move(watched)).first;
    }
    Channel& watched = *it->second;
    if (readable) {
      watched.enable_reading();
    } else {
      watched.disable_reading();
    }
    if (writable) {
      watched.enable_writing();
    } else {
      watched.disable_writing();
    }
  }

  static void answered(void* arg, int status, int /*timeouts*/, ares_addrinfo* result) {
    std::unique_ptr<Lookup> lookup(static_cast<Lookup*>(arg));
    State* self = lookup->state;
    Answer answer;
    if (status != ARES_SUCCESS || result == nullptr) {
      answer.error = ares_strerror(status);
    } else {
      int ttl = INT32_MAX;
      for (ares_addrinfo_node* node = result->nodes; node != nullptr; node = node->ai_next) {
        sockaddr_storage storage{};
        if (node->ai_addrlen > sizeof storage) continue;
        std::memcpy(&storage, node->ai_addr, node->ai_addrlen);
        if (storage.ss_family != AF_INET && storage.ss_family != AF_INET6) continue;
        InetAddress address = InetAddress::from_sockaddr(storage);
        address.set_port(lookup->port);
        answer.addresses.push_back(address);
        ttl = std::min(ttl, std::max(node->ai_ttl, 0));
      }
      std::sort(answer.addresses.begin(), answer.addresses.end(), [](const InetAddress& a, const InetAddress& b) {
        return a.to_ip_port() < b.to_ip_port();
      });
      answer.addresses.erase(std::unique(answer.addresses.begin(), answer.addresses.end()), answer.addresses.end());
      answer.ttl = std::chrono::seconds(answer.addresses.empty() ? 0 : ttl);
      if (answer.addresses.empty()) answer.error = "no address";
    }
    if (result != nullptr) ares_freeaddrinfo(result);
    if (self->destroying) return;
    auto it = self->pending.find(lookup->id);
    if (it == self->pending.end()) return;
    Callback done = std::move(it->second);
    self->pending.erase(it);
    // After the caller's round, never inside resolve().
    self->loop->queue_in_loop([alive = std::weak_ptr<bool>(self->alive), done = std::move(done),
                               answer = std::move(answer)]() mutable {
      if (alive.lock()) done(std::move(answer));
    });
  }
};

Result<std::unique_ptr<DnsResolver>> DnsResolver::make(EventLoop* loop, DnsResolverOptions options) {
  if (!library_ready()) return Error{EIO, "ares_library_init"};
  auto state = std::make_unique<State>();
  state->loop = loop;
  ares_options ao{};
  ao.sock_state_cb = &State::socket_state;
  ao.sock_state_cb_data = state.get();
  ao.timeout = static_cast<int>(options.timeout.count());
  ao.tries = options.tries;
  const int mask = ARES_OPT_SOCK_STATE_CB | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES;
  if (ares_init_options(&state->channel, &ao, mask) != ARES_SUCCESS) return Error{EIO, "ares_init_options"};
  if (!options.servers.empty()) {
    std::string csv;
    for (const std::string& server : options.servers) {
      const std::optional<std::string> entry = server_entry(server);
      if (!entry) return Error{EINVAL, "DNS server address"};
      csv += (csv.empty() ? "" : ",") + *entry;
    }
    if (ares_set_servers_ports_csv(state->channel, csv.c_str()) != ARES_SUCCESS) {
      return Error{EINVAL, "DNS server address"};
    }
  }
  return std::unique_ptr<DnsResolver>(new DnsResolver(std::move(state)));
}

DnsResolver::DnsResolver(std::unique_ptr<State> state) : state_(std::move(state)) {}

DnsResolver::~DnsResolver() = default;

void DnsResolver::resolve(const std::string& name, uint16_t port, Callback done) {
  state_->loop->assert_in_loop_thread();
  const uint64_t id = state_->next_id++;
  state_->pending.emplace(id, std::move(done));
  ares_addrinfo_hints hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = ARES_AI_NOSORT;
  ares_getaddrinfo(state_->channel, name.c_str(), nullptr, &hints, &State::answered,
                   new State::Lookup{state_.get(), id, port});
  state_->arm_timer();
}

}  // namespace tern::net
