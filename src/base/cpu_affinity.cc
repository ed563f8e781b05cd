#include "base/cpu_affinity.h"

#include <pthread.h>
#include <sched.h>

#include <cerrno>

namespace tern {

int available_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  int n = CPU_COUNT(&set);
  return n > 0 ? n : 1;
}

Result<void> pin_current_thread(int cpu) {
  if (cpu < 0 || cpu >= CPU_SETSIZE) return Error{EINVAL, "pin_current_thread"};
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  // pthread_setaffinity_np returns the error instead of setting errno.
  int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  if (rc != 0) return Error{rc, "pthread_setaffinity_np"};
  return {};
}

int current_cpu() { return sched_getcpu(); }

}  // namespace tern
