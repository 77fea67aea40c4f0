"""The machine a benchmark ran on, for its report: numbers are only comparable on one host, and two
hosts of one kind can differ (the CPU model, cores that are hyperthreads of half as many).

    from host import machine, describe
    m = machine()       # a dict for the JSON report
    print(describe(m))  # "16 cores (Intel(R) Xeon(R) Processor, 2 threads per core), 125 GiB, 1 x NVIDIA H200"
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path


def cpu_topology(cpuinfo: str) -> tuple[str, int]:
    """(model name, threads per core) of the first processor in /proc/cpuinfo's text; threads per
    core is its "siblings" over its "cpu cores" (1 where either is missing)."""
    model, fields = "", {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor's block is enough
            continue
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    model = fields.get("model name", "")
    try:
        siblings, cores = int(fields["siblings"]), int(fields["cpu cores"])
        threads = max(1, siblings // cores) if cores > 0 else 1
    except (KeyError, ValueError):
        threads = 1
    return model, threads


def gpu_names() -> list[str]:
    """The NVIDIA GPUs' names (nvidia-smi's), none where there is no nvidia-smi or it fails."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []


def machine() -> dict:
    """cores (those this process may run on), cpu_model, threads_per_core (2: the cores are
    hyperthreads of half as many physical ones), ram_bytes, dev_shm_bytes, kernel, python, gpus."""
    try:
        model, threads = cpu_topology(Path("/proc/cpuinfo").read_text())
    except OSError:
        model, threads = "", 1
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    shm = shutil.disk_usage("/dev/shm").total if Path("/dev/shm").exists() else 0
    return {"cores": len(os.sched_getaffinity(0)), "cpu_model": model, "threads_per_core": threads,
            "ram_bytes": ram, "dev_shm_bytes": shm, "kernel": platform.release(),
            "python": platform.python_version(), "gpus": gpu_names()}


def describe(m: dict) -> str:
    """One line of `machine()`'s dict, for a report's header."""
    cpu = m.get("cpu_model") or platform.machine()
    if m.get("threads_per_core", 1) > 1:
        cpu += f", {m['threads_per_core']} threads per core"
    text = f"{m['cores']} cores ({cpu}), {m['ram_bytes'] / 2**30:.0f} GiB"
    gpus = m.get("gpus") or []
    for name in dict.fromkeys(gpus):
        text += f", {gpus.count(name)} x {name}"
    return text
