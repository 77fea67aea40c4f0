#pragma once

#include <string>

namespace zarrstream::cli {

struct InspectOptions {
  std::string url;
  bool json = false;
};

// Prints the store's tree; returns the process exit code.
int RunInspect(const InspectOptions& options);

}  // namespace zarrstream::cli
