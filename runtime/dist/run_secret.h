#pragma once
// The secret the processes of a run share, so that nothing else can talk to
// their rendezvous store (docs/failures.md#the-run-secret). `--nproc`
// generates one and hands it to its children in EXOGYM_RUN_SECRET; processes
// started by hand on several hosts take it from EXOGYM_RUN_SECRET or from the
// file named by EXOGYM_RUN_SECRET_FILE. It is never logged.
#include <string>

namespace exogym::runtime::dist {

inline constexpr const char* kSecretVariable = "EXOGYM_RUN_SECRET";
inline constexpr const char* kSecretFileVariable = "EXOGYM_RUN_SECRET_FILE";

// The secret from the environment; empty when neither variable is set.
// Throws sdk::ConfigError naming the variable for an unreadable or empty
// file, or when both are set.
std::string run_secret_from_environment();

// 32 random bytes from the kernel, as 64 hexadecimal digits.
std::string generate_run_secret();

}  // namespace exogym::runtime::dist
