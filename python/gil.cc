#include "gil.h"

#include <chrono>
#include <mutex>
#include <thread>

namespace nb = nanobind;

namespace zarrstream::python {
namespace {

// Set, under exiting_mutex, by the atexit hook; a thread takes the GIL only under the same mutex
// and while it is unset, so that none starts taking it after the hook.
std::mutex exiting_mutex;
bool exiting = false;
unsigned long main_thread_ident = 0;

bool InterpreterFinalizing() {
#if PY_VERSION_HEX >= 0x030D0000 && (!defined(Py_LIMITED_API) || Py_LIMITED_API >= 0x030D0000)
  return Py_IsFinalizing();
#elif !defined(Py_LIMITED_API)
  return _Py_IsFinalizing();
#else
  return false;
#endif
}

// Takes the GIL back for `state`'s thread, or sleeps until the process ends.
void RestoreOrSleep(PyThreadState* state) {
  std::unique_lock<std::mutex> lock(exiting_mutex);
  if (exiting || InterpreterFinalizing() || !nb::is_alive()) {
    lock.unlock();
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  }
  PyEval_RestoreThread(state);
}

}  // namespace

void RegisterInterpreterExit(nb::module_& m) {
  main_thread_ident = nb::cast<unsigned long>(
      nb::module_::import_("threading").attr("main_thread")().attr("ident"));
  m.def("_interpreter_exiting", [] {
    // Objects a thread still running holds (its loader, its batches) are never freed: not leaks
    // for nanobind to report at exit.
    if (nb::cast<int>(nb::module_::import_("threading").attr("active_count")()) > 1) {
      nb::set_leak_warnings(false);
    }
    nb::gil_scoped_release release;  // the main thread, never ended: takes the GIL back
    std::lock_guard<std::mutex> lock(exiting_mutex);
    exiting = true;
  });
  nb::module_::import_("atexit").attr("register")(m.attr("_interpreter_exiting"));
}

GilRelease::GilRelease() : state_(PyEval_SaveThread()) {}

GilRelease::~GilRelease() { RestoreOrSleep(state_); }

bool GilRelease::SignalRaised() {
  if (PyThread_get_thread_ident() != main_thread_ident) return false;
  RestoreOrSleep(state_);
  const bool raised = PyErr_CheckSignals() != 0;
  state_ = PyEval_SaveThread();
  return raised;
}

}  // namespace zarrstream::python
