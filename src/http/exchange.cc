// Exchange: the handler's side, carried out by its ExchangeTransport; and
// the per-loop table that ExchangeIds name.
#include "http/exchange.h"

#include <vector>

#include "base/assert.h"
#include "net/event_loop.h"
#include "net/loop_local.h"

namespace tern::http {
namespace {

// The exchanges in progress on one loop, in recycled slots whose
// generation changes with each use (as the connections' ConnectionTable).
class ExchangeTable {
 public:
  ExchangeId add(net::EventLoop* loop, Exchange* exchange) {
    uint32_t slot;
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
    } else {
      slot = static_cast<uint32_t>(slots_.size());
      slots_.push_back({});
    }
    Entry& entry = slots_[slot];
    entry.exchange = exchange;
    return ExchangeId{loop, slot, ++entry.generation};
  }
  void remove(const ExchangeId& id) {
    Entry& entry = slots_[id.slot];
    TERN_DCHECK(entry.generation == id.generation);
    entry.exchange = nullptr;
    free_.push_back(id.slot);
  }
  // Exchange handlers running on this loop now (one may end its exchange).
  int handlers_running = 0;

  Exchange* find(const ExchangeId& id) const {
    if (id.slot >= slots_.size()) return nullptr;
    const Entry& entry = slots_[id.slot];
    return entry.generation == id.generation ? entry.exchange : nullptr;
  }

 private:
  struct Entry {
    Exchange* exchange = nullptr;
    uint32_t generation = 0;
  };
  std::vector<Entry> slots_;
  std::vector<uint32_t> free_;
};

net::LoopLocal<ExchangeTable>& tables() {
  static net::LoopLocal<ExchangeTable> tables;
  return tables;
}

ExchangeTable& table_of(net::EventLoop* loop) {
  ExchangeTable* table = tables().get(loop);
  return table != nullptr ? *table : tables().emplace(loop);
}

}  // namespace

void Exchange::begin(ExchangeTransport* transport, const Request* request,
                     const ResponseWriter::Context& context, bool has_body) {
  TERN_CHECK_MSG(!active(), "Exchange::begin while one is in progress");
  transport_ = transport;
  request_ = request;
  ResponseWriter::Context with_transport = context;
  with_transport.transport = transport;
  writer_.emplace(with_transport);
  body_complete_ = !has_body;
  body_paused_ = false;
  body_holds_ = 0;
  id_ = table_of(transport->loop()).add(transport->loop(), this);
}

void Exchange::end() {
  if (!active()) return;
  net::EventLoop* loop = id_.loop;
  ExchangeTable& table = table_of(loop);
  table.remove(id_);
  id_ = {};
  // What is running now may be the job (finish() from one of its methods):
  // it goes after the round, and the configuration it may use with it.
  if (job_) loop->release_after_round(std::move(job_));
  if (kept_) loop->release_after_round(std::move(kept_));
  held_.reset();
  if (!body_handler_ && !drain_handler_ && !abort_handler_) return;
  if (table.handlers_running == 0) {
    body_handler_ = nullptr;
    drain_handler_ = nullptr;
    abort_handler_ = nullptr;
    return;
  }
  // finish() from inside a handler: that handler must outlive its call.
  loop->defer([body = std::move(body_handler_), drain = std::move(drain_handler_),
               abort = std::move(abort_handler_)] {});
  body_handler_ = nullptr;
  drain_handler_ = nullptr;
  abort_handler_ = nullptr;
}

void Exchange::cancel() {
  auto abort_handler = std::move(abort_handler_);
  abort_handler_ = nullptr;
  end();
  if (abort_handler) abort_handler();
}

ExchangeId Exchange::id() const { return id_; }

Exchange* Exchange::find(const ExchangeId& id) {
  if (id.loop == nullptr) return nullptr;
  id.loop->assert_in_loop_thread();
  ExchangeTable* table = tables().get(id.loop);
  return table != nullptr ? table->find(id) : nullptr;
}

void Exchange::deliver(std::string_view piece, bool last) {
  if (last) body_complete_ = true;
  if (!body_handler_) return;
  // Counted on the loop, not here: the handler may end this exchange, and
  // its state may be reused before the call returns.
  ExchangeTable& table = table_of(transport_->loop());
  ++table.handlers_running;
  body_handler_(piece, last);
  --table.handlers_running;
}

void Exchange::drained() {
  if (!drain_handler_) return;
  auto handler = drain_handler_;  // it may set another
  handler();
}

ResponseWriter& Exchange::writer() { return *writer_; }

void Exchange::flush() { transport_->flush(); }

size_t Exchange::pending_output_bytes() const { return transport_->pending_output_bytes(); }

void Exchange::pause_body() {
  if (body_complete_ || body_paused_) return;
  const bool was = body_paused();
  body_paused_ = true;
  if (!was) transport_->pause_body();
}

void Exchange::resume_body() {
  if (!body_paused_) return;
  body_paused_ = false;
  if (body_holds_ == 0) transport_->resume_body();
}

void Exchange::hold_body() {
  if (body_complete_) return;
  const bool was = body_paused();
  ++body_holds_;
  if (!was) transport_->pause_body();
}

void Exchange::release_body() {
  if (body_holds_ == 0) return;
  if (--body_holds_ == 0 && !body_paused_) transport_->resume_body();
}

void Exchange::wait_for_drain() { transport_->wait_for_drain(); }

void Exchange::finish() {
  TERN_CHECK_MSG(active(), "Exchange::finish without an exchange in progress");
  transport_->finish_exchange();
}

bool Exchange::switch_protocols() {
  TERN_CHECK_MSG(active(), "Exchange::switch_protocols without an exchange in progress");
  if (!transport_->switch_protocols()) return false;
  body_complete_ = false;  // the client's bytes come as an endless body
  body_paused_ = false;
  body_holds_ = 0;
  return true;
}

void Exchange::write_raw(std::string_view bytes) { transport_->write_raw(bytes); }

void Exchange::abort() {
  TERN_CHECK_MSG(active(), "Exchange::abort without an exchange in progress");
  transport_->abort_exchange();
}

}  // namespace tern::http
