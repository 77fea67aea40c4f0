"""The soak (bench/soak.py), short: many epochs of every way a training job drives a loader
(epochs back to back, a restored state, an epoch jump, a validation loader made and dropped) with
the process's RSS, open files and threads flat."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SOAK = Path(__file__).resolve().parent.parent / "bench" / "soak.py"


def run_soak(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SOAK), *args], capture_output=True, text=True,
                          timeout=600)


def test_many_epochs_leave_memory_files_and_threads_flat():
    proc = run_soak("--epochs", "300", "--report-every", "100")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "soak: flat" in proc.stdout
    assert "300 epochs" in proc.stdout


@pytest.mark.gpu
def test_many_epochs_of_gpu_batches_leave_device_memory_flat():
    proc = run_soak("--epochs", "200", "--device", "cuda", "--report-every", "50")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "soak: flat" in proc.stdout and "GPU memory" in proc.stdout
