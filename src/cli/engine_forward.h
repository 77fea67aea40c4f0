// `zarrstream rechunk|stats ... --dask local[:N]|ADDRESS` (or `--ray`): the job's parts as tasks
// of a Dask or Ray cluster. The engines are Python, so the runners are the Python package's
// (zarrstream.dask and zarrstream.ray, the code behind zarrstream.dask.rechunk and the like): the
// command replaces itself with `python3 -m zarrstream.dask` (or `.ray`) and the same arguments.
#pragma once

#include <string>

namespace zarrstream::cli {

// Replaces the process with `python3 -m zarrstream.<engine>` given the command line as it came;
// returns (an exit status, after saying why) only when that cannot start. The interpreter:
// $ZARRSTREAM_PYTHON, else the python3 beside this executable (the environment pip installed both
// into), else python3 on the PATH.
int ForwardToEngine(const std::string& engine, int argc, char** argv);

}  // namespace zarrstream::cli
