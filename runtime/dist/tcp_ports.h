#pragma once
// Free TCP ports on this machine, for the rendezvous store.

namespace exogym::runtime::dist {

// Whether a TCP port can be bound on every interface of this machine now.
bool port_is_free(int port);
// A port that was free a moment ago (the kernel's choice).
int pick_free_port();

}  // namespace exogym::runtime::dist
