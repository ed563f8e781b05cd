// udp_kv: a key-value store spoken over UDP, one datagram per request and
// one per answer. The client puts a tag of its own choosing first; the
// answer carries it back, so a client with several requests in flight
// knows which answer is which (and resends a request whose answer a lost
// datagram took).
//
//   udp_kv --port 7003 [--any] [--io epoll|io_uring]
//   echo '1 SET colour blue'  | nc -u -w1 127.0.0.1 7003    ->  1 OK
//   echo '2 GET colour'       | nc -u -w1 127.0.0.1 7003    ->  2 VALUE blue
//   echo '3 SETEX tmp 5 soon' | nc -u -w1 127.0.0.1 7003    ->  3 OK   (gone in 5 s)
//   echo '4 DEL colour'       | nc -u -w1 127.0.0.1 7003    ->  4 DELETED
//   echo '5 COUNT'            | nc -u -w1 127.0.0.1 7003    ->  5 COUNT 1
//
// The store is bounded: at most kMaxKeys keys of kMaxKey bytes, values
// that fit one answer. A SET of a new key into a full store is refused
// (FULL) rather than let a sender grow the process without end.
//
// It listens on 127.0.0.1 unless told --any: over UDP a sender may forge
// its address, and a short GET that brings back a long value would let
// anyone point this store's answers at a third party.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>

#include "net/event_loop.h"
#include "net/signal_set.h"
#include "net/udp_server.h"

using namespace tern::net;

namespace {

constexpr size_t kMaxKeys = 100'000;
constexpr size_t kMaxKey = 250;
constexpr size_t kMaxValue = 60'000;
constexpr size_t kMaxTag = 64;  // so that a tag and a value fit one datagram

// Splits off the next space-separated word of `rest`.
std::string_view next_word(std::string_view& rest) {
  size_t start = rest.find_first_not_of(' ');
  if (start == std::string_view::npos) return rest = {};
  rest.remove_prefix(start);
  size_t end = std::min(rest.find(' '), rest.size());
  std::string_view word = rest.substr(0, end);
  rest.remove_prefix(end);
  return word;
}

class Store {
 public:
  explicit Store(EventLoop* loop) : loop_(loop) {}

  // Answers one request (without its tag).
  std::string handle(std::string_view request) {
    std::string_view verb = next_word(request);
    std::string_view key = next_word(request);
    if (verb == "COUNT") return "COUNT " + std::to_string(entries_.size());
    if (key.empty() || key.size() > kMaxKey) return "ERROR bad key";
    if (verb == "GET") {
      auto found = entries_.find(std::string(key));
      return found == entries_.end() ? "NOT_FOUND" : "VALUE " + found->second.value;
    }
    if (verb == "DEL") return erase(std::string(key)) ? "DELETED" : "NOT_FOUND";
    if (verb == "SET" || verb == "SETEX") {
      int seconds = 0;
      if (verb == "SETEX") {
        std::string_view ttl = next_word(request);
        auto [end, ec] = std::from_chars(ttl.data(), ttl.data() + ttl.size(), seconds);
        if (ec != std::errc() || end != ttl.data() + ttl.size() || seconds <= 0) return "ERROR bad ttl";
      }
      if (!request.empty() && request.front() == ' ') request.remove_prefix(1);
      if (request.size() > kMaxValue) return "ERROR value too large";
      return set(std::string(key), std::string(request), seconds);
    }
    return "ERROR unknown command";
  }

 private:
  struct Entry {
    std::string value;
    TimerId expiry{};  // valid for a SETEX
  };

  std::string set(std::string key, std::string value, int seconds) {
    auto found = entries_.find(key);
    if (found == entries_.end()) {
      if (entries_.size() >= kMaxKeys) return "FULL";
      found = entries_.emplace(key, Entry{}).first;
    }
    Entry& entry = found->second;
    entry.value = std::move(value);
    if (entry.expiry.valid()) loop_->cancel(entry.expiry);
    entry.expiry = {};
    if (seconds > 0) {
      // Cancelled if the key is set again or deleted first.
      entry.expiry = loop_->run_after(std::chrono::seconds(seconds), [this, key] { entries_.erase(key); });
    }
    return "OK";
  }

  bool erase(const std::string& key) {
    auto found = entries_.find(key);
    if (found == entries_.end()) return false;
    if (found->second.expiry.valid()) loop_->cancel(found->second.expiry);
    entries_.erase(found);
    return true;
  }

  EventLoop* const loop_;
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace

int main(int argc, char** argv) {
  int port = 7003;
  bool any = false;
  IoBackend io = IoBackend::kDefault;
  for (int i = 1; i < argc; i += 2) {
    if (std::strcmp(argv[i], "--any") == 0) {
      any = true;
      --i;  // a flag without a value
    } else if (i + 1 < argc && std::strcmp(argv[i], "--port") == 0) {
      port = std::atoi(argv[i + 1]);
    } else if (i + 1 < argc && std::strcmp(argv[i], "--io") == 0 && parse_io_backend(argv[i + 1])) {
      io = *parse_io_backend(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: %s [--port N] [--any] [--io epoll|io_uring]\n", argv[0]);
      return 2;
    }
  }

  EventLoop loop(io);
  // SIGINT or SIGTERM ends the loop; what main made then closes, in order.
  SignalSet stop(&loop, {SIGINT, SIGTERM}, [&loop](int) { loop.quit(); });
  Store store(&loop);
  UdpServer server(&loop, InetAddress(static_cast<uint16_t>(port), /*loopback_only=*/!any));
  server.set_datagram_callback([&store](UdpServer& self, std::string_view data, const InetAddress& peer) {
    while (!data.empty() && (data.back() == '\n' || data.back() == '\r')) data.remove_suffix(1);
    std::string_view rest = data;
    std::string_view tag = next_word(rest);
    if (tag.empty() || tag.size() > kMaxTag) return;  // nothing to answer to
    self.send_to(peer, std::string(tag) + " " + store.handle(rest) + "\n");
  });
  if (auto started = server.start(); !started) {
    std::fprintf(stderr, "udp_kv: %s\n", started.error().message().c_str());
    return 1;
  }
  std::printf("udp_kv listening on %s\n", server.local_address().to_ip_port().c_str());
  std::fflush(stdout);
  loop.loop();
}
