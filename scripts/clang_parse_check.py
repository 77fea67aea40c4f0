"""Parses every C++ source with clang, as `make fuzz` compiles them, without building anything.

The project builds with g++, while the fuzzers (and clang-tidy) need clang to take the same code;
a construct one compiler accepts and the other rejects (clang 14 cannot capture a structured
binding in a lambda) broke `make fuzz` once without any test noticing. This takes each command of
BUILD_DIR/compile_commands.json, runs it as `clang++ -fsyntax-only`, parses fuzz/*.cc with the
library's flags too, and fails naming the files clang rejects. About 2 minutes on 2 cores.

    python scripts/clang_parse_check.py BUILD_DIR [--jobs N]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# Arguments of a g++ compile command that a parse-only clang run drops (with their value, for the
# first set). -Werror too: the check is for code clang rejects, as `make fuzz` builds without it.
DROP_WITH_VALUE = {"-o", "-MF", "-MT", "-MQ"}
DROP = {"-c", "-MD", "-MMD", "-Werror"}


def parse_command(entry: dict, source: str | None = None, include: list[str] = ()) -> list[str]:
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    out = ["clang++", "-fsyntax-only", "-Wno-unknown-warning-option", *include]
    skip = False
    for arg in args[1:]:
        if skip:
            skip = False
        elif arg in DROP_WITH_VALUE:
            skip = True
        elif arg in DROP:
            pass
        elif source is not None and arg == entry["file"]:
            out.append(source)
        else:
            out.append(arg)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build_dir", type=Path)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    database = args.build_dir / "compile_commands.json"
    if not database.exists():
        print(f"clang_parse_check: no {database} (configure or build {args.build_dir} first)", file=sys.stderr)
        return 2
    repo = Path(__file__).resolve().parent.parent
    entries = [e for e in json.loads(database.read_text()) if e["file"].endswith(".cc")]
    library = next(e for e in entries if "/src/" in e["file"] and not e["file"].endswith("_test.cc"))
    jobs = [(e["file"], parse_command(e), e["directory"]) for e in entries]
    # The fuzzers include "fuzz/fuzz_check.h" from the repository root (fuzz/CMakeLists.txt).
    jobs += [(str(f), parse_command(library, str(f), [f"-I{repo}"]), library["directory"])
             for f in sorted((repo / "fuzz").glob("*_fuzzer.cc"))]

    def parse(job: tuple[str, list[str], str]) -> tuple[str, int, str]:
        path, command, directory = job
        done = subprocess.run(command, cwd=directory, capture_output=True, text=True)
        return path, done.returncode, done.stderr

    with ThreadPoolExecutor(args.jobs) as pool:
        failed = [r for r in pool.map(parse, jobs) if r[1] != 0]
    for path, _, stderr in failed:
        print(f"clang++ rejects {os.path.relpath(path, repo)}:\n{stderr}", file=sys.stderr)
    print(f"clang parsed {len(jobs)} files: {len(failed)} rejected")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
