// json_api: an HTTP API that answers in JSON, with a job a timer drives.
//
//   json_api --port 8082 [--threads 2] [--tick-ms 200] [--io epoll|io_uring]
//   curl -d 'water the plants' http://127.0.0.1:8082/api/tasks   # 201 {"id":1,...}
//   curl http://127.0.0.1:8082/api/tasks/1                        # "queued", then "done"
//   curl http://127.0.0.1:8082/api/tasks
//   curl -X DELETE http://127.0.0.1:8082/api/tasks/1
//   curl http://127.0.0.1:8082/api/stats
//
// A task is queued by a POST (its title is the body) and done by the
// worker, a timer on the base loop that takes the oldest queued task at
// each tick. Handlers run on the I/O loops (--threads of them, or the base
// loop when 0) and the worker on the base loop, so the task list is behind
// a mutex, held while the list is read or changed and never across I/O.
// The list is bounded: a POST into a full list is answered 503.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "http/http_server.h"
#include "http/router.h"
#include "net/event_loop.h"
#include "net/signal_set.h"

using namespace tern;

namespace {

constexpr size_t kMaxTasks = 10'000;
constexpr size_t kMaxTitle = 1024;

// `text` as a JSON string, quotes included (RFC 8259 section 7). Bytes of
// 0x80 and above pass through: the title is taken to be UTF-8.
std::string json_string(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + '"';
}

class Tasks {
 public:
  struct Task {
    std::string title;
    bool done = false;
  };

  // The new task's id, or 0 when the list is full.
  uint64_t add(std::string title) {
    std::lock_guard lock(mu_);
    if (tasks_.size() >= kMaxTasks) return 0;
    uint64_t id = ++last_id_;
    tasks_.emplace(id, Task{std::move(title)});
    queue_.push_back(id);
    ++queued_;
    return id;
  }
  bool remove(uint64_t id) {
    std::lock_guard lock(mu_);
    auto found = tasks_.find(id);
    if (found == tasks_.end()) return false;
    if (!found->second.done) {
      --queued_;
      // Its id stays in queue_ (work() skips it); ids left so are swept out
      // before they outnumber the tasks, so the queue stays bounded too.
      if (queue_.size() > 2 * kMaxTasks) std::erase_if(queue_, [this](uint64_t q) { return !tasks_.contains(q); });
    }
    tasks_.erase(found);
    return true;
  }
  // The worker's tick: marks the oldest queued task done.
  void work() {
    std::lock_guard lock(mu_);
    while (!queue_.empty()) {
      auto found = tasks_.find(queue_.front());
      queue_.pop_front();
      if (found != tasks_.end()) {
        found->second.done = true;
        --queued_;
        ++done_;
        return;
      }
    }
  }

  std::string json(uint64_t id) const {
    std::lock_guard lock(mu_);
    auto found = tasks_.find(id);
    return found == tasks_.end() ? std::string() : json_of(id, found->second);
  }
  std::string json_list() const {
    std::lock_guard lock(mu_);
    std::string out = "{\"tasks\":[";
    for (const auto& [id, task] : tasks_) {
      if (out.back() != '[') out += ',';
      out += json_of(id, task);
    }
    return out + "]}";
  }
  std::string json_stats() const {
    std::lock_guard lock(mu_);
    return "{\"tasks\":" + std::to_string(tasks_.size()) + ",\"queued\":" + std::to_string(queued_) +
           ",\"done\":" + std::to_string(done_) + "}";
  }

 private:
  static std::string json_of(uint64_t id, const Task& task) {
    return "{\"id\":" + std::to_string(id) + ",\"title\":" + json_string(task.title) + ",\"status\":\"" +
           (task.done ? "done" : "queued") + "\"}";
  }

  mutable std::mutex mu_;
  std::map<uint64_t, Task> tasks_;
  std::deque<uint64_t> queue_;  // ids waiting for the worker, oldest first
  uint64_t queued_ = 0;         // tasks not done yet
  uint64_t last_id_ = 0;
  uint64_t done_ = 0;
};

void reply(http::ResponseWriter& w, int status, std::string_view json) {
  w.start(status).header("Content-Type", "application/json").body(std::string(json) + "\n");
}

// The id in "/api/tasks/<id>", or 0.
uint64_t task_id(std::string_view path) {
  std::string_view digits = path.substr(std::string_view("/api/tasks/").size());
  uint64_t id = 0;
  for (char c : digits) {
    if (c < '0' || c > '9' || id > UINT64_MAX / 10 - 1) return 0;
    id = id * 10 + static_cast<uint64_t>(c - '0');
  }
  return id;
}

}  // namespace

int main(int argc, char** argv) {
  int port = 8082;
  int tick_ms = 200;
  http::HttpServerOptions options;
  net::IoBackend io = net::IoBackend::kDefault;
  for (int i = 1; i < argc; i += 2) {
    std::string flag = argv[i];
    if (i + 1 >= argc) flag = "";
    if (flag == "--port") {
      port = std::atoi(argv[i + 1]);
    } else if (flag == "--threads") {
      options.tcp.io_threads = std::atoi(argv[i + 1]);
    } else if (flag == "--tick-ms" && std::atoi(argv[i + 1]) > 0) {
      tick_ms = std::atoi(argv[i + 1]);
    } else if (flag == "--io" && net::parse_io_backend(argv[i + 1])) {
      io = *net::parse_io_backend(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: %s [--port N] [--threads N] [--tick-ms N] [--io epoll|io_uring]\n", argv[0]);
      return 2;
    }
  }

  net::EventLoop loop(io);
  // SIGINT or SIGTERM ends the loop; what main made then closes, in order.
  net::SignalSet stop(&loop, {SIGINT, SIGTERM}, [&loop](int) { loop.quit(); });
  Tasks tasks;  // before the server: its handlers use it until the server is gone
  http::HttpServer server(&loop, net::InetAddress(static_cast<uint16_t>(port), true), options);

  server.get("/api/tasks", [&](const http::Request&, http::ResponseWriter& w) { reply(w, 200, tasks.json_list()); });
  server.post("/api/tasks", [&](const http::Request& request, http::ResponseWriter& w) {
    if (request.body().empty() || request.body().size() > kMaxTitle) {
      return reply(w, 400, "{\"error\":\"the body is the title: 1 to 1024 bytes\"}");
    }
    uint64_t id = tasks.add(std::string(request.body()));
    if (id == 0) return reply(w, 503, "{\"error\":\"the list is full\"}");
    w.start(201)
        .header("Content-Type", "application/json")
        .header("Location", "/api/tasks/" + std::to_string(id))
        .body(tasks.json(id) + "\n");
  });
  http::Handler one = [&](const http::Request& request, http::ResponseWriter& w) {
    uint64_t id = task_id(request.path());
    if (request.method() == http::Method::kDelete) {
      if (id != 0 && tasks.remove(id)) return w.start(204).end();
    } else if (std::string json = id != 0 ? tasks.json(id) : ""; !json.empty()) {
      return reply(w, 200, json);
    }
    reply(w, 404, "{\"error\":\"no such task\"}");
  };
  server.router().prefix(http::Method::kGet, "/api/tasks/", one);
  server.router().prefix(http::Method::kDelete, "/api/tasks/", one);
  server.get("/api/stats", [&](const http::Request&, http::ResponseWriter& w) { reply(w, 200, tasks.json_stats()); });

  loop.run_every(std::chrono::milliseconds(tick_ms), [&] { tasks.work(); });
  if (auto started = server.start(); !started) {
    std::fprintf(stderr, "json_api: %s\n", started.error().message().c_str());
    return 1;
  }
  std::printf("json_api listening on %s\n", server.listen_address().to_ip_port().c_str());
  std::fflush(stdout);
  loop.loop();
}
