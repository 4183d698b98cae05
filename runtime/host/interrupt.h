#pragma once
// Ctrl-C (SIGINT) and SIGTERM stop a run cleanly: every node stops at its
// next step, the run folder keeps every row written so far, and the CLI exits
// with status 130. A second signal kills the process at once, unless it
// comes within half a second of the first (one request delivered twice).
#include <string>

#include "exogym/sdk/error.h"

namespace exogym::runtime::host {

// Thrown when a run stops because a stop was requested.
class Interrupted : public sdk::Error {
 public:
  using sdk::Error::Error;
};

// Installs the handlers (the CLI calls this; a library user need not).
void install_interrupt_handlers();

// Whether a stop was requested.
bool interrupt_requested();

// The signal that requested it, for messages: "Ctrl-C" (SIGINT) or
// "SIGTERM".
std::string interrupt_signal_text();

}  // namespace exogym::runtime::host
