// Releasing the GIL around C++ work in a way that survives interpreter exit.
//
// CPython (before 3.14) ends a thread that tries to take the GIL back once the interpreter is
// finalizing (a daemon thread still in C++ when the main thread exits) with pthread_exit, whose
// unwinding through a noexcept frame (nanobind's gil_scoped_release destructor) aborts the process
// with "terminate called without an active exception". So once Python's atexit handlers run (the
// hook RegisterInterpreterExit installs), a thread coming back from C++ does not take the GIL
// again: it sleeps until the process ends, as CPython 3.14 has such threads do.
#pragma once

#include <nanobind/nanobind.h>

#include <type_traits>

namespace zarrstream::python {

// Registers the atexit hook, and notes which thread is Python's main thread (it alone handles
// signals).
void RegisterInterpreterExit(nanobind::module_& m);

// Releases the GIL for its scope; takes it back at the end, or never returns once the interpreter
// exits. Use instead of nanobind::gil_scoped_release in every binding.
class GilRelease {
 public:
  GilRelease();
  ~GilRelease();
  GilRelease(const GilRelease&) = delete;
  GilRelease& operator=(const GilRelease&) = delete;

  // On Python's main thread: takes the GIL to run Python's signal handlers, and true when one
  // raised (Ctrl-C's KeyboardInterrupt: the error stays set for nanobind::python_error). False on
  // other threads, which receive no signals.
  bool SignalRaised();

 private:
  PyThreadState* state_;
};

// Calls `work()` with the GIL released (as GilRelease does) and returns its result (a Status, a
// Result<T>) with the GIL held again: the way a binding runs C++ that may block, then throws or
// converts what came back.
template <typename Work>
std::invoke_result_t<Work&> WithoutGil(Work&& work) {
  GilRelease release;
  return work();
}

}  // namespace zarrstream::python
