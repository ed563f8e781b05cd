// SignalSet: delivers Unix signals to a loop as ordinary events (signalfd).
//
// The signals are blocked in the calling thread, and so in every thread
// created after it: create the SignalSet (or call block()) before starting
// other threads, or a signal may be delivered to one of them the old way.
// Handlers then run on the loop thread like any other callback, free to do
// anything (no async-signal-safety rules).
//
// Owned by the user; loop thread only.
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>

#include "net/channel.h"
#include "net/socket.h"

namespace tern::net {

class EventLoop;

class SignalSet {
 public:
  using Handler = std::function<void(int signo)>;  // runs on the loop, once per signal received

  // Blocks `signals` in the calling thread (and so in threads it starts
  // later: see above) and hands each to `handler` on `loop`.
  SignalSet(EventLoop* loop, std::initializer_list<int> signals, Handler handler);

  ~SignalSet();
  SignalSet(const SignalSet&) = delete;
  SignalSet& operator=(const SignalSet&) = delete;

  // Blocks the signals in the calling thread (threads started later inherit it).
  static void block(std::initializer_list<int> signals);

 private:
  void handle_read();

  EventLoop* const loop_;
  Socket fd_;
  Channel channel_;
  Handler handler_;
};

}  // namespace tern::net
