#include "net/timer_wheel.h"

#include <utility>

#include "base/assert.h"

namespace tern::net {
namespace {

constexpr uint64_t kSlotMask = TimerWheel::kSlots - 1;

constexpr int shift_of(int level) { return TimerWheel::kSlotBits * level; }

}  // namespace

TimerWheel::TimerWheel(uint64_t now) : now_(now) {
  heads_.fill(kNil);
  tails_.fill(kNil);
}

TimerId TimerWheel::add(uint64_t expire, Callback cb, uint64_t interval) {
  uint32_t extra;
  if (!free_extras_.empty()) {
    extra = free_extras_.back();
    free_extras_.pop_back();
  } else {
    TERN_CHECK(extras_.size() < kNil);
    extra = static_cast<uint32_t>(extras_.size());
    extras_.emplace_back();
  }
  extras_[extra] = Extra{std::move(cb), interval};
  const uint32_t index = allocate();
  nodes_[index].fn = nullptr;
  nodes_[index].extra = extra;
  return schedule(index, expire);
}

TimerId TimerWheel::add(uint64_t expire, Function fn, void* arg) {
  TERN_DCHECK(fn != nullptr);
  const uint32_t index = allocate();
  nodes_[index].fn = fn;
  nodes_[index].arg = arg;
  return schedule(index, expire);
}

TimerId TimerWheel::schedule(uint32_t index, uint64_t expire) {
  Node& node = nodes_[index];
  node.expire = expire > now_ ? expire : now_ + 1;
  node.state = State::kPending;
  insert(index);
  ++size_;
  return TimerId{index, node.generation};
}

bool TimerWheel::cancel(TimerId id) {
  Node* node = lookup(id);
  if (node == nullptr) return false;
  switch (node->state) {
    case State::kPending:
      unlink(id.index);
      release(id.index);
      return true;
    case State::kRunning:
    case State::kRearmed:
      // The callback is on the stack in run(); it frees the node afterwards.
      node->state = State::kCancelledWhileRunning;
      return true;
    default:
      return false;
  }
}

bool TimerWheel::refresh(TimerId id, uint64_t expire) {
  Node* node = lookup(id);
  if (node == nullptr) return false;
  expire = expire > now_ ? expire : now_ + 1;
  if (node->state == State::kPending) {
    // Pushed back (an idle timeout on every request): only the deadline
    // changes. The node stays in the slot of its old deadline, which is
    // earlier; when that slot comes up the node is placed again by its new
    // deadline (cascade() and expire_current_slot() both do so), and it
    // runs only at that deadline.
    if (expire >= node->expire) {
      node->expire = expire;
      return true;
    }
    unlink(id.index);
    node->expire = expire;
    insert(id.index);
    return true;
  }
  if (node->state == State::kRunning || node->state == State::kRearmed) {
    node->expire = expire;
    node->state = State::kRearmed;
    return true;
  }
  return false;
}

bool TimerWheel::pending(TimerId id) const {
  const Node* node = lookup(id);
  return node != nullptr &&
         (node->state == State::kPending || node->state == State::kRearmed);
}

void TimerWheel::advance(uint64_t now) {
  TERN_CHECK_MSG(!advancing_, "TimerWheel::advance called from a timer callback");
  advancing_ = true;
  // Jump from event to event: each step lands on the exact tick of a due
  // level-0 timer or on a block boundary where a slot cascades, so the cost
  // is proportional to the work, not to the time that passed. Jumping over
  // boundaries whose slots are empty keeps every timer's placement valid:
  // anything placed relative to the old time would have had an earlier
  // wake-up than the one we jump to.
  while (now_ < now) {
    std::optional<uint64_t> next = next_wakeup();
    if (!next || *next > now) {
      now_ = now;
      break;
    }
    now_ = *next;
    if ((now_ & kSlotMask) == 0) cascade();
    expire_current_slot();
  }
  advancing_ = false;
}

std::optional<uint64_t> TimerWheel::next_wakeup() const {
  if (size_ == 0) return std::nullopt;
  for (int level = 0; level < kLevels; ++level) {
    const int shift = shift_of(level);
    const uint64_t current = (now_ >> shift) & kSlotMask;
    // Level 0 holds ticks > now_; higher levels hold slots after the current one.
    const uint64_t from = level == 0 ? ((now_ + 1) & kSlotMask) : current + 1;
    if (from == 0 || from > kSlotMask) continue;
    int slot = find_slot(level, static_cast<int>(from));
    if (slot < 0) continue;
    const int block_shift = shift_of(level + 1);
    return ((now_ >> block_shift) << block_shift) + (static_cast<uint64_t>(slot) << shift);
  }
  if (heads_[kOverflowList] != kNil) {
    const int top = shift_of(kLevels);
    return ((now_ >> top) + 1) << top;
  }
  // Only timers that are running right now (their nodes are in no list).
  return std::nullopt;
}

TimerWheel::Node* TimerWheel::lookup(TimerId id) {
  if (id.index >= nodes_.size()) return nullptr;
  Node& node = nodes_[id.index];
  if (node.generation != id.generation || node.state == State::kFree) return nullptr;
  return &node;
}

const TimerWheel::Node* TimerWheel::lookup(TimerId id) const {
  return const_cast<TimerWheel*>(this)->lookup(id);
}

uint32_t TimerWheel::allocate() {
  if (free_head_ != kNil) {
    uint32_t index = free_head_;
    free_head_ = nodes_[index].next;
    nodes_[index].next = kNil;
    return index;
  }
  TERN_CHECK(nodes_.size() < kNil);
  nodes_.emplace_back();
  return static_cast<uint32_t>(nodes_.size() - 1);
}

void TimerWheel::release(uint32_t index) {
  Node& node = nodes_[index];
  if (node.fn == nullptr) {
    extras_[node.extra].callback = nullptr;
    free_extras_.push_back(node.extra);
  }
  node.fn = nullptr;
  node.arg = nullptr;
  node.state = State::kFree;
  ++node.generation;
  node.prev = kNil;
  node.next = free_head_;
  free_head_ = index;
  --size_;
}

void TimerWheel::insert(uint32_t index) {
  const uint64_t expire = nodes_[index].expire;
  for (int level = 0; level < kLevels; ++level) {
    const int block_shift = shift_of(level + 1);
    if ((expire >> block_shift) == (now_ >> block_shift)) {
      const uint64_t slot = (expire >> shift_of(level)) & kSlotMask;
      link(static_cast<uint16_t>(level * kSlots + static_cast<int>(slot)), index);
      return;
    }
  }
  link(kOverflowList, index);
}

void TimerWheel::link(uint16_t list, uint32_t index) {
  Node& node = nodes_[index];
  node.list = list;
  node.next = kNil;
  node.prev = tails_[list];
  if (tails_[list] != kNil) {
    nodes_[tails_[list]].next = index;
  } else {
    heads_[list] = index;
    mark(list, true);
  }
  tails_[list] = index;
}

void TimerWheel::unlink(uint32_t index) {
  Node& node = nodes_[index];
  const uint16_t list = node.list;
  TERN_DCHECK(list != kNoList);
  if (node.prev != kNil) {
    nodes_[node.prev].next = node.next;
  } else {
    heads_[list] = node.next;
  }
  if (node.next != kNil) {
    nodes_[node.next].prev = node.prev;
  } else {
    tails_[list] = node.prev;
  }
  if (heads_[list] == kNil) mark(list, false);
  node.prev = node.next = kNil;
  node.list = kNoList;
}

uint32_t TimerWheel::detach_all(uint16_t list) {
  uint32_t head = heads_[list];
  heads_[list] = tails_[list] = kNil;
  mark(list, false);
  return head;
}

void TimerWheel::cascade() {
  // Called when now_ has just reached a multiple of 256. Each level whose
  // block starts here hands its current slot down; the highest level goes
  // first so that what it hands down can cascade further in the same call.
  auto redistribute = [this](uint16_t list) {
    for (uint32_t index = detach_all(list); index != kNil;) {
      uint32_t next = nodes_[index].next;
      insert(index);
      index = next;
    }
  };
  if ((now_ & ((uint64_t{1} << shift_of(kLevels)) - 1)) == 0) redistribute(kOverflowList);
  for (int level = kLevels - 1; level >= 1; --level) {
    const uint64_t mask = (uint64_t{1} << shift_of(level)) - 1;
    if ((now_ & mask) != 0) continue;
    const uint64_t slot = (now_ >> shift_of(level)) & kSlotMask;
    redistribute(static_cast<uint16_t>(level * kSlots + static_cast<int>(slot)));
  }
}

void TimerWheel::expire_current_slot() {
  const auto slot = static_cast<uint16_t>(now_ & kSlotMask);
  if (heads_[slot] == kNil) return;
  // Move the slot's timers to the expiring list first: a callback may cancel
  // a timer that is due on this same tick, which must then not run.
  for (uint32_t index = detach_all(slot); index != kNil;) {
    uint32_t next = nodes_[index].next;
    if (nodes_[index].expire > now_) {
      insert(index);  // pushed back since it was placed (see refresh)
    } else {
      link(kExpiringList, index);
    }
    index = next;
  }
  while (heads_[kExpiringList] != kNil) run(heads_[kExpiringList]);
}

void TimerWheel::run(uint32_t index) {
  unlink(index);
  nodes_[index].state = State::kRunning;
  // The callback may add timers and so reallocate nodes_ and extras_: hold
  // no reference to either across the call.
  const Function fn = nodes_[index].fn;
  uint64_t interval = 0;
  Callback callback;
  if (fn != nullptr) {
    fn(nodes_[index].arg);
  } else {
    const uint32_t extra = nodes_[index].extra;
    callback = std::move(extras_[extra].callback);
    interval = extras_[extra].interval;
    callback();
  }

  Node& node = nodes_[index];
  const bool again = node.state == State::kRearmed || (node.state == State::kRunning && interval > 0);
  if (!again) return release(index);
  if (fn == nullptr) extras_[node.extra].callback = std::move(callback);
  if (node.state == State::kRunning) {
    const uint64_t next = node.expire + interval;
    node.expire = next > now_ ? next : now_ + 1;
  }
  node.state = State::kPending;
  insert(index);
}

int TimerWheel::find_slot(int level, int from) const {
  const auto& words = occupied_[static_cast<size_t>(level)];
  for (int word = from / 64; word < kSlots / 64; ++word) {
    uint64_t bits = words[static_cast<size_t>(word)];
    if (word == from / 64) bits &= ~uint64_t{0} << (from % 64);
    if (bits != 0) return word * 64 + __builtin_ctzll(bits);
  }
  return -1;
}

void TimerWheel::mark(uint16_t list, bool non_empty) {
  if (list >= kOverflowList) return;
  const int level = list / kSlots;
  const int slot = list % kSlots;
  uint64_t& word = occupied_[static_cast<size_t>(level)][static_cast<size_t>(slot / 64)];
  const uint64_t bit = uint64_t{1} << (slot % 64);
  word = non_empty ? (word | bit) : (word & ~bit);
}

}  // namespace tern::net
