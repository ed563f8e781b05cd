#include "cache/zone.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

namespace tern::cache {
namespace {

namespace fs = std::filesystem;

class ZoneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tern-zone-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  ZoneOptions options() const {
    ZoneOptions o;
    o.name = "pages";
    o.path = dir_.string();
    o.memory_body_max = 1024;
    return o;
  }

  // Writes an entry as a fill does and indexes it; returns its file's size.
  uint64_t fill(Zone& zone, const std::string& key, const std::string& body, int64_t now) {
    EntryHead head;
    head.key = key;
    head.fields = {{"Content-Type", "text/plain"}};
    head.stored = now;
    head.expires = now + 60;
    const KeyHash hash = KeyHash::of(key);
    EntryWriter writer;
    EXPECT_TRUE(writer.open(zone.options().path, hash, head));
    EXPECT_TRUE(writer.append(body));
    auto stored = std::make_shared<Stored>();
    stored->hash = hash;
    stored->head = head;
    stored->head.body_size = body.size();
    stored->path = writer.path();
    if (body.size() <= zone.options().memory_body_max) {
      stored->body = body;
      stored->body_in_memory = true;
    }
    EXPECT_TRUE(zone.insert(writer, stored, now));
    std::error_code gone;  // evicted already by another thread
    const uintmax_t size = fs::file_size(stored->path, gone);
    return gone ? 0 : size;
  }

  bool on_disk(const std::string& key) const { return fs::exists(entry_path(dir_.string(), KeyHash::of(key))); }

  fs::path dir_;
};

TEST_F(ZoneTest, AnEntryIsFoundWithItsHeadAndASmallBody) {
  Zone zone(options());
  EXPECT_EQ(zone.find(KeyHash::of("a"), 100), nullptr);
  const uint64_t small = fill(zone, "a", "hello", 100);
  const uint64_t large = fill(zone, "b", std::string(5000, 'x'), 100);
  std::shared_ptr<const Stored> a = zone.find(KeyHash::of("a"), 101);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->head.key, "a");
  EXPECT_EQ(a->head.field("content-type"), "text/plain");
  EXPECT_TRUE(a->body_in_memory);
  EXPECT_EQ(a->body, "hello");
  std::shared_ptr<const Stored> b = zone.find(KeyHash::of("b"), 101);
  ASSERT_NE(b, nullptr);
  EXPECT_FALSE(b->body_in_memory);  // served from its file
  EXPECT_EQ(b->head.body_size, 5000u);
  EXPECT_EQ(b->path, entry_path(dir_.string(), KeyHash::of("b")));
  const Zone::Counts counts = zone.counts();
  EXPECT_EQ(counts.entries, 2u);
  EXPECT_EQ(counts.disk_bytes, small + large);
  EXPECT_GT(counts.memory_bytes, 5u);
}

// A restart keeps the cache: the index is read back from the files, what a
// fill left half written is removed, and so is anything not an entry.
TEST_F(ZoneTest, LoadRebuildsTheIndexFromCompleteEntriesOnly) {
  uint64_t bytes = 0;
  {
    Zone zone(options());
    bytes += fill(zone, "kept-1", "one", 100);
    bytes += fill(zone, "kept-2", std::string(3000, 'z'), 100);
    EntryWriter half;
    EntryHead head;
    head.key = "half";
    ASSERT_TRUE(half.open(dir_.string(), KeyHash::of("half"), head));
    ASSERT_TRUE(half.append("partial"));
    // A crash of another process: its temp file stays (copied under that
    // process's name before the writer goes). One had this process's pid,
    // as a container's PID 1 killed while filling and started again does.
    fs::path temp;
    for (const auto& e : fs::recursive_directory_iterator(dir_)) {
      if (e.is_regular_file() && is_temp_name(e.path().filename().string())) temp = e.path();
    }
    ASSERT_FALSE(temp.empty());
    const std::string half_path = entry_path(dir_.string(), KeyHash::of("half"));
    fs::copy_file(temp, half_path + ".tmp.999999999.1");
    fs::copy_file(temp, half_path + ".tmp." + std::to_string(::getpid()) + ".7");
    fs::copy_file(temp, half_path + ".tmp." + std::to_string(::getpid()) + "-0123456789abcdef.8");
  }
  // A fill of this process under way while the zone loads: left alone.
  EntryWriter live;
  EntryHead live_head;
  live_head.key = "live";
  ASSERT_TRUE(live.open(dir_.string(), KeyHash::of("live"), live_head));
  fill(*std::make_unique<Zone>(options()), "broken", "will be cut", 100);
  fs::resize_file(entry_path(dir_.string(), KeyHash::of("broken")), 40);
  std::ofstream(dir_ / "stray") << "not an entry";

  Zone zone(options());
  EXPECT_EQ(zone.load(), 2u);
  EXPECT_EQ(zone.counts().entries, 2u);
  EXPECT_EQ(zone.counts().disk_bytes, bytes);
  std::shared_ptr<const Stored> one = zone.find(KeyHash::of("kept-1"), 200);
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->body, "one");
  EXPECT_EQ(zone.find(KeyHash::of("broken"), 200), nullptr);
  EXPECT_FALSE(on_disk("broken"));
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir_)) {
    if (e.is_regular_file()) {
      ++files;
      const std::string name = e.path().filename().string();
      EXPECT_TRUE(!is_temp_name(name) || name.starts_with(KeyHash::of("live").hex())) << e.path();
    }
  }
  EXPECT_EQ(files, 4u);  // the two entries, the live fill and "stray" at the top, not the zone's to judge
  ASSERT_TRUE(live.commit());  // its temp file was still there
}

TEST_F(ZoneTest, BeyondMaxSizeTheLeastRecentlyUsedEntriesGo) {
  ZoneOptions o = options();
  o.max_size = 2500;
  Zone zone(o);
  const uint64_t size = fill(zone, "old", std::string(1000, 'o'), 100);
  ASSERT_LT(size, 1250u);
  fill(zone, "used", std::string(1000, 'u'), 101);
  ASSERT_NE(zone.find(KeyHash::of("old"), 102), nullptr);  // now "used" is the oldest
  fill(zone, "new", std::string(1000, 'n'), 103);
  EXPECT_EQ(zone.counts().entries, 2u);
  EXPECT_LE(zone.counts().disk_bytes, 2500u);
  EXPECT_EQ(zone.find(KeyHash::of("used"), 104), nullptr);
  EXPECT_FALSE(on_disk("used"));
  EXPECT_NE(zone.find(KeyHash::of("old"), 104), nullptr);
  EXPECT_NE(zone.find(KeyHash::of("new"), 104), nullptr);
}

// Memory goes to heads and bodies of the entries in use; beyond it they
// are let go first (read again from the file) and entries are removed only
// when their nodes alone fill it.
TEST_F(ZoneTest, BeyondMemoryHeadsGoFirstThenEntries) {
  ZoneOptions o = options();
  o.memory = 4000;
  Zone zone(o);
  for (int i = 0; i < 6; ++i) fill(zone, "k" + std::to_string(i), std::string(900, 'b'), 100 + i);
  EXPECT_EQ(zone.counts().entries, 6u);
  EXPECT_LE(zone.counts().memory_bytes, 4000u);
  for (int i = 0; i < 6; ++i) {
    std::shared_ptr<const Stored> hit = zone.find(KeyHash::of("k" + std::to_string(i)), 200);
    ASSERT_NE(hit, nullptr) << i;
    EXPECT_EQ(hit->body, std::string(900, 'b'));
  }
  EXPECT_LE(zone.counts().memory_bytes, 4000u);

  o.memory = 400;  // room for a few nodes, no heads
  Zone small(o);
  EXPECT_EQ(small.load(), 6u);
  EXPECT_LE(small.counts().memory_bytes, 400u);
  EXPECT_LT(small.counts().entries, 6u);
  EXPECT_GT(small.counts().entries, 0u);
}

TEST_F(ZoneTest, EntriesUnusedForInactiveAreRemoved) {
  ZoneOptions o = options();
  o.inactive = std::chrono::seconds(60);
  Zone zone(o);
  fill(zone, "idle", "i", 100);
  fill(zone, "busy", "b", 100);
  ASSERT_NE(zone.find(KeyHash::of("busy"), 150), nullptr);
  EXPECT_EQ(zone.expire_inactive(159), 0u);
  EXPECT_EQ(zone.expire_inactive(170), 1u);
  EXPECT_FALSE(on_disk("idle"));
  EXPECT_TRUE(on_disk("busy"));
  EXPECT_TRUE(zone.erase(KeyHash::of("busy")));
  EXPECT_FALSE(zone.erase(KeyHash::of("busy")));
  EXPECT_FALSE(on_disk("busy"));
  EXPECT_EQ(zone.counts().entries, 0u);
  EXPECT_EQ(zone.counts().disk_bytes, 0u);
  EXPECT_EQ(zone.counts().memory_bytes, 0u);
}

// A purge makes its entries misses at once, whether their heads are in
// memory or only their nodes, and never one filled after it; the sweep
// removes the files of those nobody asked for, read back from disk too.
TEST_F(ZoneTest, PurgedEntriesAreMissesAtOnceAndTheSweepRemovesTheRest) {
  {
    Zone before(options());
    fill(before, "http://x/old/1", "read back at start", 100);
  }
  ZoneOptions o = options();
  o.memory = 64 * 1024;
  Zone zone(o);
  EXPECT_EQ(zone.load(), 1u);
  fill(zone, "http://x/a", "a", 100);
  fill(zone, "http://x/a/b", "ab", 100);
  fill(zone, "http://x/products/1", "p1", 100);
  fill(zone, "http://x/products/2", std::string(5000, 'p'), 100);  // its body on disk only
  fill(zone, "http://x/other", "o", 100);
  EXPECT_EQ(zone.sweep_purges(), 0u);  // nothing to do

  zone.purge("http://x/a", false);  // the key alone, not those it begins
  EXPECT_EQ(zone.find(KeyHash::of("http://x/a"), 101), nullptr);
  EXPECT_FALSE(on_disk("http://x/a"));
  EXPECT_NE(zone.find(KeyHash::of("http://x/a/b"), 101), nullptr);

  zone.purge("http://x/products/", true);
  zone.purge("http://x/old/", true);
  fill(zone, "http://x/products/3", "filled after the purge", 101);
  EXPECT_EQ(zone.find(KeyHash::of("http://x/products/1"), 101), nullptr);
  EXPECT_NE(zone.find(KeyHash::of("http://x/products/3"), 101), nullptr);
  // products/2 and old/1 were not asked for: the sweep reads their heads.
  EXPECT_TRUE(on_disk("http://x/products/2"));
  EXPECT_TRUE(on_disk("http://x/old/1"));
  EXPECT_EQ(zone.sweep_purges(), 2u);
  EXPECT_FALSE(on_disk("http://x/products/2"));
  EXPECT_FALSE(on_disk("http://x/old/1"));
  EXPECT_EQ(zone.counts().entries, 3u);  // a/b, products/3, other
  // The purges are done with: a refill of a purged key stays.
  fill(zone, "http://x/products/1", "again", 102);
  EXPECT_NE(zone.find(KeyHash::of("http://x/products/1"), 102), nullptr);
  EXPECT_EQ(zone.sweep_purges(), 0u);
}

// Loops find, fill and evict at once (TSan watches): the counts add up.
TEST_F(ZoneTest, ThreadsFindFillAndEvictTogether) {
  ZoneOptions o = options();
  o.max_size = 40'000;
  o.memory = 20'000;
  Zone zone(o);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        const std::string key = "k" + std::to_string((i * 7 + t) % 120);
        if (!zone.find(KeyHash::of(key), 1000 + i)) fill(zone, key, std::string(200 + i % 900, 'x'), 1000 + i);
        if (i % 50 == 0) zone.erase(KeyHash::of("k" + std::to_string(i % 120)));
      }
    });
  }
  for (std::thread& th : threads) th.join();
  const Zone::Counts counts = zone.counts();
  EXPECT_LE(counts.disk_bytes, 40'000u);
  EXPECT_LE(counts.memory_bytes, 20'000u);
  uint64_t files = 0, bytes = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir_)) {
    if (e.is_regular_file()) {
      ++files;
      bytes += e.file_size();
    }
  }
  EXPECT_EQ(files, counts.entries);
  EXPECT_EQ(bytes, counts.disk_bytes);
}

// One filler a key: the others leave a wake-up that its end runs, once;
// a waiter that stops waiting leaves, and what its wake-up held goes then.
TEST_F(ZoneTest, OneFillAKeyAndTheOthersAreWokenWhenItEnds) {
  using FillEnd = Zone::FillEnd;
  constexpr std::chrono::milliseconds kAge = std::chrono::minutes(1);
  Zone zone(options());
  const KeyHash a = KeyHash::of("a");
  int woken = 0;
  std::vector<FillEnd> told;
  uint64_t ticket = 0, second = 0, third = 0, other = 0;
  EXPECT_TRUE(zone.begin_fill(a, [](FillEnd) {}, kAge, &ticket));
  EXPECT_FALSE(zone.begin_fill(a, [&](FillEnd end) { ++woken, told.push_back(end); }, kAge, &second));
  EXPECT_FALSE(zone.begin_fill(a, [&](FillEnd end) { woken += 10, told.push_back(end); }, kAge, &third));
  EXPECT_NE(second, third);
  EXPECT_TRUE(zone.begin_fill(KeyHash::of("b"), [](FillEnd) {}, kAge, &other));  // another key fills beside it
  EXPECT_NE(other, ticket);
  auto held = std::make_shared<int>(7);
  uint64_t leaving = 0;
  EXPECT_FALSE(zone.begin_fill(a, [held, &woken](FillEnd) { woken += 100; }, kAge, &leaving));
  zone.leave_fill(a, leaving);
  EXPECT_EQ(held.use_count(), 1);
  EXPECT_EQ(woken, 0);
  zone.end_fill(a, other, FillEnd::kSettled);  // another fill's ticket: not this one's end
  EXPECT_EQ(woken, 0);
  zone.end_fill(a, ticket, FillEnd::kFailed);
  EXPECT_EQ(woken, 11);
  EXPECT_EQ(told, (std::vector<FillEnd>{FillEnd::kFailed, FillEnd::kFailed}));  // each told how it ended
  zone.end_fill(a, ticket, FillEnd::kSettled);  // nothing under way: nothing to wake
  zone.leave_fill(a, second);  // nor to leave
  EXPECT_EQ(woken, 11);
  // The next miss fills again, and those waiting for it hear how it ended.
  uint64_t next = 0;
  EXPECT_TRUE(zone.begin_fill(a, [](FillEnd) {}, kAge, &next));
  EXPECT_NE(next, ticket);
  EXPECT_FALSE(zone.begin_fill(a, [&](FillEnd end) { told.push_back(end); }, kAge, &second));
  zone.end_fill(a, ticket, FillEnd::kFailed);  // the earlier fill's: ended already
  EXPECT_EQ(told.size(), 2u);
  zone.end_fill(a, next, FillEnd::kSettled);
  EXPECT_EQ(told.back(), FillEnd::kSettled);
}

// A fill under way for lock_age is taken over by the next miss, which
// fills it too; its waiters are woken once, by the first filler to settle
// it or by the last to fail.
TEST_F(ZoneTest, AFillUnderWayForItsAgeIsTakenOver) {
  using FillEnd = Zone::FillEnd;
  using std::chrono::milliseconds;
  constexpr milliseconds kLong = std::chrono::minutes(1);
  Zone zone(options());
  const KeyHash a = KeyHash::of("a");
  std::vector<FillEnd> told;
  uint64_t stuck = 0, waiter = 0, taker = 0, later = 0;
  EXPECT_TRUE(zone.begin_fill(a, [](FillEnd) {}, kLong, &stuck));
  EXPECT_FALSE(zone.begin_fill(a, [&](FillEnd end) { told.push_back(end); }, kLong, &waiter));
  std::this_thread::sleep_for(milliseconds(500));
  EXPECT_FALSE(zone.begin_fill(a, [&](FillEnd end) { told.push_back(end); }, kLong, &later));  // not aged for it
  EXPECT_TRUE(zone.begin_fill(a, [](FillEnd) {}, milliseconds(50), &taker));
  EXPECT_EQ(taker, stuck);  // the same fill, filled twice
  // Taken over, it is young again: 0.6 s after the take-over, 1.1 s after
  // the first filler began.
  std::this_thread::sleep_for(milliseconds(600));
  EXPECT_FALSE(zone.begin_fill(a, [&](FillEnd end) { told.push_back(end); }, milliseconds(900), &later));
  // The stuck filler fails: the taker may yet store the entry, so nobody wakes.
  zone.end_fill(a, stuck, FillEnd::kFailed);
  EXPECT_TRUE(told.empty());
  zone.end_fill(a, taker, FillEnd::kSettled);
  EXPECT_EQ(told, std::vector<FillEnd>(3, FillEnd::kSettled));
  // A fill whose every filler fails wakes its waiters as failed, once.
  told.clear();
  uint64_t first = 0, second = 0;
  EXPECT_TRUE(zone.begin_fill(a, [](FillEnd) {}, kLong, &first));
  EXPECT_FALSE(zone.begin_fill(a, [&](FillEnd end) { told.push_back(end); }, kLong, &waiter));
  EXPECT_TRUE(zone.begin_fill(a, [](FillEnd) {}, milliseconds(0), &second));
  zone.end_fill(a, second, FillEnd::kFailed);
  EXPECT_TRUE(told.empty());
  zone.end_fill(a, first, FillEnd::kFailed);
  EXPECT_EQ(told, std::vector<FillEnd>{FillEnd::kFailed});
  zone.end_fill(a, first, FillEnd::kFailed);  // over: nothing more
  EXPECT_EQ(told.size(), 1u);
}

// An entry whose file an operator removed is forgotten at its first
// failed use, if it is still the entry that was read.
TEST_F(ZoneTest, AnEntryWhoseFileWentIsForgotten) {
  Zone zone(options());
  fill(zone, "gone", std::string(5000, 'g'), 100);
  std::shared_ptr<const Stored> read = zone.find(KeyHash::of("gone"), 101);
  ASSERT_NE(read, nullptr);
  fill(zone, "gone", "refilled", 102);
  zone.forget(*read);  // another entry now: it stays
  EXPECT_EQ(zone.counts().entries, 1u);
  std::shared_ptr<const Stored> now = zone.find(KeyHash::of("gone"), 103);
  ASSERT_NE(now, nullptr);
  fs::remove(entry_path(dir_.string(), KeyHash::of("gone")));
  zone.forget(*now);
  EXPECT_EQ(zone.counts().entries, 0u);
  EXPECT_EQ(zone.find(KeyHash::of("gone"), 104), nullptr);
}

TEST_F(ZoneTest, AnEntryIsHeldUntilPurgedRefilledOrRemoved) {
  Zone zone(options());
  fill(zone, "held", "one", 100);
  std::shared_ptr<const Stored> read = zone.find(KeyHash::of("held"), 101);
  ASSERT_NE(read, nullptr);
  EXPECT_TRUE(zone.holds(*read));
  fill(zone, "held", "two", 102);
  EXPECT_FALSE(zone.holds(*read));  // filled again
  std::shared_ptr<const Stored> again = zone.find(KeyHash::of("held"), 103);
  ASSERT_NE(again, nullptr);
  EXPECT_TRUE(zone.holds(*again));
  zone.purge("held", false);
  EXPECT_FALSE(zone.holds(*again));  // purged, before the sweep
  EXPECT_EQ(zone.sweep_purges(), 1u);
  EXPECT_FALSE(zone.holds(*again));  // and after it: removed
}

}  // namespace
}  // namespace tern::cache
