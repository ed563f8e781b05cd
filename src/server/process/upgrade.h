// Binary upgrade without a refused connection, as nginx's: on SIGUSR2 the
// running tern starts the executable it was started from (by now, perhaps,
// a new build at the same path) with the same arguments, and hands it
// every listening socket ($LISTEN_FDS, net/inherited_sockets.h). Both
// serve, from the same accept queues, until the operator tells the old one
// to finish (tern -s quit with the pid file it moved to PID_FILE.oldbin) or
// the new one to go (if it misbehaves: the old one serves on alone).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/result.h"

namespace tern::server {

// The executable this process runs, as a path that names the new build
// once one replaces it (read at start, before anything can replace it).
std::string executable_path();

// Every listening TCP socket of this process.
std::vector<int> listening_descriptors();

// Starts `executable` with `argv` (argv[0] first), the environment of this
// process, and `sockets` as descriptors 3.. with $LISTEN_FDS and
// $LISTEN_PID set for the child ($TERN_UPGRADE_FROM names this process).
// Returns the child's pid.
Result<pid_t> start_upgrade(const std::string& executable, const std::vector<std::string>& argv,
                            const std::vector<int>& sockets);

}  // namespace tern::server
