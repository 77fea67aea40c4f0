// `zarrstream rechunk|stats ... --dask local[:N]|ADDRESS`: the job's parts as tasks on a Dask
// cluster. Dask is Python, so the runner is the Python package's (zarrstream.dask, the code behind
// zarrstream.dask.rechunk and zarrstream.dask.stats): the command replaces itself with
// `python3 -m zarrstream.dask` and the same arguments.
#pragma once

namespace zarrstream::cli {

// Replaces the process with the Python runner given the command line as it came; returns (an exit
// status, after saying why) only when that cannot start. The interpreter: $ZARRSTREAM_PYTHON, else
// the python3 beside this executable (the environment pip installed both into), else python3 on
// the PATH.
int ForwardToDask(int argc, char** argv);

}  // namespace zarrstream::cli
