"""bench/host.py: the machine a benchmark's report names."""

from __future__ import annotations

from bench_scripts import load_bench

host = load_bench("host")

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Processor
siblings\t: 16
cpu cores\t: 8

processor\t: 1
model name\t: Another model that is not read
"""


def test_the_first_processor_gives_the_model_and_its_threads_per_core():
    assert host.cpu_topology(CPUINFO) == ("Intel(R) Xeon(R) Processor", 2)
    # No siblings or core count (some virtual machines, other architectures): one thread per core.
    assert host.cpu_topology("processor\t: 0\nmodel name\t: Neoverse-V2\n") == ("Neoverse-V2", 1)
    assert host.cpu_topology("") == ("", 1)


def test_a_report_line_names_cores_model_threads_memory_and_gpus():
    m = {"cores": 16, "cpu_model": "Intel(R) Xeon(R) Processor", "threads_per_core": 2, "ram_bytes": 128 * 2**30,
         "gpus": ["NVIDIA H200", "NVIDIA H200"]}
    assert host.describe(m) == "16 cores (Intel(R) Xeon(R) Processor, 2 threads per core), 128 GiB, 2 x NVIDIA H200"
    assert host.describe({**m, "threads_per_core": 1, "gpus": []}) == "16 cores (Intel(R) Xeon(R) Processor), 128 GiB"


def test_this_machine():
    m = host.machine()
    assert m["cores"] >= 1 and m["threads_per_core"] >= 1 and m["ram_bytes"] > 0 and isinstance(m["gpus"], list)
    assert host.describe(m).startswith(f"{m['cores']} cores (")
