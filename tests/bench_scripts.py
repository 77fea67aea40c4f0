"""The scripts under bench/ as their tests load and run them: imported as modules (their helpers
tested directly) or run end to end in their smallest configuration with a JSON report."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

BENCH_DIR = Path(__file__).resolve().parent.parent / "bench"


def load_bench(name: str) -> ModuleType:
    """bench/<name>.py imported as module `name`."""
    spec = importlib.util.spec_from_file_location(name, BENCH_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def run_bench(name: str, args: list, out: Path, timeout: float) -> dict:
    """Runs bench/<name>.py with `args` and `--json out/result.json`; its report, with "stdout"."""
    proc = subprocess.run([sys.executable, str(BENCH_DIR / f"{name}.py"), *map(str, args), "--json",
                           str(out / "result.json")], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{name} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    result = json.loads((out / "result.json").read_text())
    result["stdout"] = proc.stdout
    return result
