#pragma once

#include <string>

namespace zarrstream::cli {

struct InspectOptions {
  std::string url;
  bool json = false;
  std::string ref;  // an Icechunk repository's branch, tag or snapshot id ("": main)
};

// Prints the store's tree; returns the process exit code.
int RunInspect(const InspectOptions& options);

}  // namespace zarrstream::cli
