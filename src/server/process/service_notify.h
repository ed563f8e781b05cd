// The service manager's side of tern's life (systemd Type=notify, through
// libsystemd's sd_notify): READY once the ports are bound and privileges
// dropped, RELOADING while a SIGHUP is applied, STOPPING when a stop
// begins, and a STATUS line `systemctl status` shows. Nothing is sent when
// no service manager asked for it ($NOTIFY_SOCKET unset).
#pragma once

#include <string>

namespace tern::server::service_notify {

// Whether a service manager listens ($NOTIFY_SOCKET is set).
bool enabled();

void ready(const std::string& status);
void reloading();
void stopping(const std::string& status);
void status(const std::string& status);

}  // namespace tern::server::service_notify
