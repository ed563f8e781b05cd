// Pinning threads to CPUs. Used for loop threads when the configuration asks
// for it (one loop per core avoids cache and scheduler migration costs).
#pragma once

#include "base/result.h"

namespace tern {

// Number of CPUs this process may run on (sched_getaffinity), at least 1.
int available_cpus();

// Pins the calling thread to one CPU. Any thread.
Result<void> pin_current_thread(int cpu);

// CPU the calling thread last ran on, or -1 if unknown.
int current_cpu();

}  // namespace tern
