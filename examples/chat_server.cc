// chat_server: every line a client sends goes to every client connected,
// on however many loops the server runs.
//
//   chat_server --port 7002 --threads 2 [--io epoll|io_uring]
//   nc 127.0.0.1 7002          # in two terminals; "/nick ada" renames you
//
// Each loop keeps the members it serves (LoopLocal<Room>), so sending to a
// member never crosses threads: a line is formatted once, into a shared
// string, and posted to every loop, which sends it to its own members. A
// member that stops reading is dropped once its unsent output passes
// kMaxBacklog, so one slow client costs a bounded amount of memory and
// never holds the others up. A line longer than kMaxLine closes its
// sender's connection.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "net/buffer.h"
#include "net/connection_table.h"
#include "net/event_loop.h"
#include "net/loop_local.h"
#include "net/signal_set.h"
#include "net/tcp_connection.h"
#include "net/tcp_server.h"

using namespace tern::net;

namespace {

constexpr size_t kMaxLine = 4096;
constexpr size_t kMaxBacklog = 1 << 20;

// The members one loop serves, by their slot in the loop's connection table.
struct Room {
  std::unordered_map<uint32_t, ConnectionId> members;
};

class ChatServer {
 public:
  ChatServer(EventLoop* loop, const InetAddress& address, TcpServerOptions options)
      : server_(loop, address, std::move(options)) {
    server_.set_thread_init_callback([this](EventLoop* io_loop) { rooms_.emplace(io_loop); });
    server_.set_connection_callback([this](TcpConnection& conn) { on_connection(conn); });
    server_.set_message_callback([this](TcpConnection& conn, Buffer& input) { on_message(conn, input); });
  }

  tern::Result<void> start() { return server_.start(); }
  const InetAddress& listen_address() const { return server_.listen_address(); }

 private:
  void on_connection(TcpConnection& conn) {
    Room& room = *rooms_.get(conn.loop());
    if (conn.connected()) {
      std::string name = "user" + std::to_string(next_id_.fetch_add(1) + 1);
      conn.context() = name;
      room.members[conn.id().slot] = conn.id();
      conn.send("* you are " + name + "\n");
      broadcast("* " + name + " joined\n");
    } else {
      room.members.erase(conn.id().slot);
      broadcast("* " + std::any_cast<std::string&>(conn.context()) + " left\n");
    }
  }

  void on_message(TcpConnection& conn, Buffer& input) {
    auto& name = std::any_cast<std::string&>(conn.context());
    while (const char* eol = input.find_eol()) {
      std::string_view line(input.peek(), static_cast<size_t>(eol - input.peek()));
      if (line.size() > kMaxLine) break;  // refused below, like a line still coming
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.starts_with("/nick ") && line.size() > 6) {
        std::string old = std::exchange(name, std::string(line.substr(6)));
        broadcast("* " + old + " is now " + name + "\n");
      } else if (!line.empty()) {
        broadcast(name + ": " + std::string(line) + "\n");
      }
      input.retrieve_until(eol + 1);
    }
    if (input.readable_bytes() > kMaxLine) {  // a line past the limit, ended or not
      conn.send("* line too long\n");
      conn.close_after_write();
      input.retrieve_all();
    }
  }

  // Any loop thread: each loop sends `text` to its own members. The loops
  // are listed under LoopLocal's lock and posted to after it, so that this
  // loop's own sends (run_in_loop runs them now) hold no lock.
  void broadcast(std::string text) {
    auto shared = std::make_shared<const std::string>(std::move(text));
    std::vector<EventLoop*> loops;
    rooms_.for_each([&loops](EventLoop* loop, Room&) { loops.push_back(loop); });
    for (EventLoop* loop : loops) loop->run_in_loop([this, loop, shared] { deliver(loop, *shared); });
  }

  void deliver(EventLoop* loop, const std::string& text) {
    ConnectionTable& table = loop->connections();
    for (const auto& [slot, id] : rooms_.get(loop)->members) {
      TcpConnection* member = table.find(id);
      if (member == nullptr || !member->connected()) continue;
      if (member->pending_output_bytes() > kMaxBacklog) {
        member->force_close();  // too far behind: drop it rather than buffer more
        continue;
      }
      member->send(text);
    }
  }

  LoopLocal<Room> rooms_;  // outlives the server, whose close callbacks use it
  TcpServer server_;
  std::atomic<unsigned> next_id_{0};
};

int usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--port N] [--threads N] [--io epoll|io_uring]\n", argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int port = 7002;
  TcpServerOptions options;
  options.name = "chat";
  IoBackend io = IoBackend::kDefault;
  for (int i = 1; i < argc; i += 2) {
    std::string flag = argv[i];
    if (i + 1 >= argc) return usage(argv[0]);
    std::string value = argv[i + 1];
    if (flag == "--port") {
      port = std::atoi(value.c_str());
    } else if (flag == "--threads") {
      options.io_threads = std::atoi(value.c_str());
    } else if (flag == "--io" && parse_io_backend(value)) {
      io = *parse_io_backend(value);
    } else {
      return usage(argv[0]);
    }
  }

  EventLoop loop(io);
  // SIGINT or SIGTERM ends the loop; what main made then closes, in order.
  SignalSet stop(&loop, {SIGINT, SIGTERM}, [&loop](int) { loop.quit(); });
  ChatServer chat(&loop, InetAddress(static_cast<uint16_t>(port)), options);
  if (auto started = chat.start(); !started) {
    std::fprintf(stderr, "chat_server: %s\n", started.error().message().c_str());
    return 1;
  }
  std::printf("chat_server listening on %s\n", chat.listen_address().to_ip_port().c_str());
  std::fflush(stdout);
  loop.loop();
}
