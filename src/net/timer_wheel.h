// TimerWheel: a hierarchical timing wheel.
//
// Four levels of 256 slots, one tick per millisecond: level 0 holds timers due
// in the current 256 ms block, level 1 those in the current 65.5 s block,
// level 2 the current 4.7 h block and level 3 the current 49.7 day block (later
// ones wait in an overflow list). A timer sits in the lowest level whose block
// also contains "now"; when now crosses a block boundary, the slot that starts
// there is cascaded down a level. Every timer therefore moves at most four
// times in its life, and add, cancel and refresh are O(1): unlink from an
// intrusive list, compute a slot, link. A refresh that pushes a timer back
// only stores the new deadline; the timer is moved when its old slot comes
// up (once per timeout period at most, not once per refresh). Timer nodes live in one vector and are
// recycled through a free list, so steady state does not allocate (besides
// what a large callback capture needs).
//
// Why not a heap or std::set: connection idle timeouts are refreshed on every
// request and almost never fire. A balanced tree pays O(log n) and an
// allocation for each refresh; the wheel pays a few pointer writes.
//
// The wheel knows nothing about clocks or file descriptors: the owner passes
// the time in to advance() and asks next_wakeup() when to call again. EventLoop
// drives it with one timerfd; tests drive it with a fake clock.
//
// Owned by one EventLoop (or a test). Loop thread only. Callbacks run inside
// advance() and may add, cancel and refresh timers, including their own.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace tern::net {

// Names one timer. Generation-checked: using the id of a timer that has fired
// or been cancelled is harmless (cancel and refresh return false).
struct TimerId {
  uint32_t index = UINT32_MAX;  // the timer's slot in the wheel
  uint32_t generation = 0;      // that slot's generation when the timer was added
  bool valid() const { return index != UINT32_MAX; }  // names a timer (one that may have fired)
  friend bool operator==(const TimerId&, const TimerId&) = default;  // the same timer
};

class TimerWheel {
 public:
  using Callback = std::function<void()>;       // what a timer runs
  static constexpr int kLevels = 4;             // wheels, each 256 times coarser than the one below
  static constexpr int kSlotBits = 8;           // log2 of the slots of each
  static constexpr int kSlots = 1 << kSlotBits;  // slots of each

  // `now` is the current tick (milliseconds on the owner's clock).
  explicit TimerWheel(uint64_t now = 0);

  TimerWheel(const TimerWheel&) = delete;
  TimerWheel& operator=(const TimerWheel&) = delete;

  // Schedules cb at tick `expire` (at the next tick if that has passed). With
  // interval > 0 it fires again every `interval` ticks until cancelled.
  TimerId add(uint64_t expire, Callback cb, uint64_t interval = 0);
  using Function = void (*)(void* arg);  // what a one-shot add() runs: fn(arg)
  // The same for fn(arg), one-shot: no std::function is kept (Timeout's
  // form; a wheel holding a timer for each of ten thousand idle
  // connections spends 40 bytes on each).
  TimerId add(uint64_t expire, Function fn, void* arg);
  // Returns false if the timer already fired (one-shot) or was cancelled.
  bool cancel(TimerId id);
  // Moves a pending timer to a new tick. Returns false as cancel does.
  bool refresh(TimerId id, uint64_t expire);
  bool pending(TimerId id) const;  // whether the timer is still to run

  // Runs every timer due at or before `now`, in tick order (timers due on the
  // same tick run in an unspecified order), and sets the wheel's time to now.
  void advance(uint64_t now);

  // The tick at which advance() next has work: the exact deadline of the
  // earliest timer when it is due within the current 256 ms block, else the
  // next block boundary at which a timer cascades. nullopt when empty. Never
  // later than the earliest deadline; earlier when a timer was pushed back
  // since it was placed (that wake-up only moves it).
  std::optional<uint64_t> next_wakeup() const;

  uint64_t now() const { return now_; }  // the tick of the last advance()
  size_t size() const { return size_; }  // timers pending

 private:
  static constexpr uint32_t kNil = UINT32_MAX;
  static constexpr uint16_t kOverflowList = kLevels * kSlots;
  static constexpr uint16_t kExpiringList = kOverflowList + 1;
  static constexpr uint16_t kNoList = kExpiringList + 1;
  static constexpr int kListCount = kNoList;

  enum class State : uint8_t { kFree, kPending, kRunning, kCancelledWhileRunning, kRearmed };

  // What a node runs: fn(arg), or, with fn null, the Callback in extras_
  // at `extra` (with a repeating timer's interval).
  struct Node {
    Function fn = nullptr;
    union {
      void* arg = nullptr;
      uint32_t extra;
    };
    uint64_t expire = 0;
    uint32_t prev = kNil;
    uint32_t next = kNil;  // also the free-list link
    uint32_t generation = 0;
    uint16_t list = kNoList;
    State state = State::kFree;
  };
  static_assert(sizeof(Node) <= 40);
  struct Extra {
    Callback callback;
    uint64_t interval = 0;
  };

  Node* lookup(TimerId id);
  const Node* lookup(TimerId id) const;
  uint32_t allocate();
  // A node just allocated and given its callback, made pending at expire.
  TimerId schedule(uint32_t index, uint64_t expire);
  void release(uint32_t index);  // frees the node (and its Callback) for reuse

  void insert(uint32_t index);
  void link(uint16_t list, uint32_t index);
  void unlink(uint32_t index);
  uint32_t detach_all(uint16_t list);

  void cascade();
  void expire_current_slot();
  void run(uint32_t index);

  // First slot >= from in level's bitmap, or -1.
  int find_slot(int level, int from) const;
  void mark(uint16_t list, bool non_empty);  // a wheel slot's bit in occupied_

  std::vector<Node> nodes_;
  uint32_t free_head_ = kNil;
  std::vector<Extra> extras_;
  std::vector<uint32_t> free_extras_;
  std::array<uint32_t, kListCount> heads_;
  std::array<uint32_t, kListCount> tails_;
  std::array<std::array<uint64_t, kSlots / 64>, kLevels> occupied_{};
  uint64_t now_;
  size_t size_ = 0;
  bool advancing_ = false;
};

}  // namespace tern::net
