#include "cli/engine_forward.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

namespace zarrstream::cli {

int ForwardToEngine(const std::string& engine, int argc, char** argv) {
  std::string python = "python3";
  if (const char* chosen = std::getenv("ZARRSTREAM_PYTHON"); chosen && *chosen) {
    python = chosen;
  } else {
    std::error_code error;
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
    const std::filesystem::path beside = self.parent_path() / "python3";
    if (!error && access(beside.c_str(), X_OK) == 0) python = beside.string();
  }
  std::vector<std::string> args = {python, "-m", "zarrstream." + engine};
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  std::vector<char*> exec_args;
  exec_args.reserve(args.size() + 1);
  for (std::string& arg : args) exec_args.push_back(arg.data());
  exec_args.push_back(nullptr);
  execvp(exec_args[0], exec_args.data());
  std::cerr << "zarrstream " << (argc > 1 ? argv[1] : "") << ": --" << engine
            << " runs the job through Python's zarrstream." << engine
            << " (pip install 'zarrstream[" << engine << "]'), but " << python
            << " could not be started: " << std::strerror(errno)
            << " (set ZARRSTREAM_PYTHON to the Python that has zarrstream installed)\n";
  return 2;
}

}  // namespace zarrstream::cli
