"""A GraphCast-like input set from three stores against the same channels from one store: what
joining stores costs the loader, side by side in one run, on the CPU and on the GPU.

Public ERA5 comes split into a surface store, a pressure-level store and a constants store. This
harness synthesizes an ERA5-like store (`zarrstream synth`, 0.25° by default), splits it with
`zarrstream rechunk --vars` into those three (the source's chunks, zstd 3 as synth writes them),
and measures two loaders over the same GraphCast-like channels:

  joined   Loader([surface, pressure, constants], ...): each variable from the store holding it
  single   Loader(synth store, ...): the one store they were cut from

Inputs (GraphCast's, as far as the synthetic store has them; it has no vertical velocity):
2 m temperature, 10 m winds, mean sea level pressure and 6-hourly precipitation; temperature,
geopotential, u, v and specific humidity at the store's 13 pressure levels (WeatherBench2's, as
GraphCast's 13-level version); land-sea mask and surface geopotential as static fields; the 9
computed forcings (cos/sin of latitude, longitude, julian day and local time, and the cosine of
the solar zenith angle). Two input steps (t - 6 h, t), the target 6 h later, a sample at every
step (windows overlap), as GraphCast trains.

Before timing, the first --verify-batches batches of the two loaders (same seed, same shuffle)
are compared value by value on each device; a difference is reported and the run exits 1 after
the table. Each timed run is `zarrstream bench` in a fresh process; the rounds alternate the
order of the two (joined first in even rounds, single first in odd ones) so that drift in the
machine's state weighs on both alike. Every file of the stores is read once before the first
round, so both read from a warm page cache.

    python bench/multistore_bench.py --workdir /tmp/multistore --steps 12 --devices cpu,cuda --json multistore.json

Prints samples/s, GB/s of decoded fields delivered, the read amplification and the CPU seconds
the bench process spent per sample (start-up included: the work each dataset costs, which other
load on the machine changes less than it changes samples/s), median and range over the rounds,
and the ratio joined / single of the median samples/s and of each round's pair.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from host import machine  # noqa: E402

SURFACE = ["2m_temperature", "10m_u_component_of_wind", "10m_v_component_of_wind",
           "mean_sea_level_pressure", "total_precipitation"]
PRESSURE = ["temperature", "geopotential", "u_component_of_wind", "v_component_of_wind",
            "specific_humidity"]
CONSTANTS = ["land_sea_mask", "geopotential_at_surface"]
COMPUTED_FORCINGS = ["cos_latitude", "sin_latitude", "cos_longitude", "sin_longitude", "cos_julian_day",
                     "sin_julian_day", "cos_local_time", "sin_local_time", "cos_solar_zenith_angle"]
LAYOUTS = ("joined", "single")
COMPLETE = ".multistore-complete"  # written into a store once it is whole, so a rerun reuses it


def find_cli() -> str:
    beside = Path(sys.executable).parent / "zarrstream"
    found = str(beside) if beside.exists() else shutil.which("zarrstream")
    if not found:
        sys.exit("multistore_bench: no `zarrstream` command (make build installs it)")
    return found


def make_stores(cli: str, work: Path, preset: str, steps: int | None) -> dict[str, list[Path]]:
    """The synth store and its three parts under `work`, made once and reused by later runs."""
    work.mkdir(parents=True, exist_ok=True)
    single = work / f"{preset}-{steps or 'default'}.zarr"
    parts = {name: work / f"{single.stem}-{name}.zarr" for name in ("surface", "pressure", "constants")}
    if not (single / COMPLETE).exists():
        command = [cli, "synth", str(single), "--preset", preset, "--layout", "v3-zstd", "--overwrite"]
        if steps:
            command += ["--steps", str(steps)]
        subprocess.run(command, check=True, stdout=sys.stderr)
        (single / COMPLETE).touch()
    for name, variables in (("surface", SURFACE), ("pressure", PRESSURE), ("constants", CONSTANTS)):
        dest = parts[name]
        if not (dest / COMPLETE).exists():
            subprocess.run([cli, "rechunk", str(single), str(dest), "--vars", ",".join(variables), "--codec", "zstd:3",
                            "--overwrite"], check=True, stdout=sys.stderr)
            (dest / COMPLETE).touch()
    return {"joined": list(parts.values()), "single": [single]}


def stored_bytes(stores: list[Path]) -> int:
    return sum(p.stat().st_size for store in stores for p in store.rglob("*") if p.is_file())


def size_text(size: int) -> str:
    return f"{size / 1e9:.2f} GB" if size >= 1e9 else f"{size / 1e6:.1f} MB"


def warm_page_cache(stores: list[Path]) -> None:
    for store in stores:
        for path in sorted(p for p in store.rglob("*") if p.is_file()):
            with open(path, "rb", buffering=0) as f:
                while f.read(1 << 22):
                    pass


def loader_dataset(stores: list[Path]) -> str | list[str]:
    return [str(s) for s in stores] if len(stores) > 1 else str(stores[0])


def first_difference(name: str, a: np.ndarray, b: np.ndarray, labels: tuple[str, str] = ("joined", "single")
                     ) -> str | None:
    """Where `a` and `b` differ (shape, dtype or values; NaN equals NaN), or None if they do not."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"{name}: {a.shape} {a.dtype} {labels[0]}, {b.shape} {b.dtype} {labels[1]}"
    differ = ~((a == b) | (np.isnan(a) & np.isnan(b))) if a.dtype.kind == "f" else a != b
    if differ.any():
        where = tuple(int(i) for i in np.argwhere(differ)[0])
        return f"{name}: {int(differ.sum())} of {differ.size} values differ, the first at index {where}"
    return None


def verify(stores: dict[str, list[Path]], args: argparse.Namespace, device: str) -> dict:
    """Compares the two loaders' first batches; {"identical": bool, "batches": n, "detail": text}."""
    import zarrstream

    def open_loader(layout: str):
        return zarrstream.Loader(
            loader_dataset(stores[layout]), args.variables, forcings=args.forcings,
            sample={"time": args.input_steps}, stride={"time": 1}, target_offset={"time": 1},
            batch_size=args.batch_size, shuffle=args.shuffle, seed=0, prefetch=1, num_threads=args.num_threads,
            device=device)

    joined, single = open_loader("joined"), open_loader("single")
    if joined.channels != single.channels or joined.target_channels != single.target_channels:
        return {"identical": False, "batches": 0,
                "detail": f"channels differ: {joined.channels} joined, {single.channels} single"}
    compared = 0
    for a, b in zip(joined, single):
        for key in ("input", "target", "origin"):
            problem = first_difference(f"batch {compared} {key}", a[key].cpu().numpy(), b[key].cpu().numpy())
            if problem:
                return {"identical": False, "batches": compared, "detail": problem}
        compared += 1
        if compared == args.verify_batches:
            break
    return {"identical": compared > 0, "batches": compared, "channels": len(joined.channels),
            "input_shape": list(joined.input_shape), "detail": f"the first {compared} batches are equal"}


def bench(cli: str, stores: list[Path], args: argparse.Namespace, device: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        command = [cli, "bench", *map(str, stores), "--variables", ",".join(args.variables),
                   "--forcings", ",".join(args.forcings), "--sample", f"time={args.input_steps}", "--stride", "time=1",
                   "--target-offset", "time=1", "--batch-size", str(args.batch_size), "--epochs", str(args.epochs),
                   "--shuffle", args.shuffle, "--device", device, "--json", str(report)]
        if args.batches:
            command += ["--steps", str(args.batches)]
        if args.num_threads:
            command += ["--threads", str(args.num_threads)]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run(command, capture_output=True, text=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            sys.exit(f"multistore_bench: {' '.join(command)} failed:\n{proc.stderr}")
        result = json.loads(report.read_text())
        # The process's CPU time per sample, start-up included: the work each dataset costs, which
        # other load on the machine does not change as it changes samples/s.
        cpu_seconds = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        result["cpu_seconds_per_sample"] = cpu_seconds / (result["measured_samples"] + args.batch_size)
        return result


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def spread(values: list[float], spec: str) -> str:
    return f"{statistics.median(values):{spec}} ({min(values):{spec}}–{max(values):{spec}})"


def summarize(runs: dict[str, dict[str, list[dict]]]) -> dict:
    out = {}
    for device, by_layout in runs.items():
        rows = {}
        for layout in LAYOUTS:
            reports = by_layout[layout]
            rows[layout] = {
                "samples_per_second": [r["samples_per_second"] for r in reports],
                "delivered_gb_per_second": [r["delivered_bytes_per_second"] / 1e9 for r in reports],
                "read_amplification": [r["read_amplification"] for r in reports],
                "cpu_seconds_per_sample": [r["cpu_seconds_per_sample"] for r in reports],
            }
        joined, single = rows["joined"]["samples_per_second"], rows["single"]["samples_per_second"]
        rows["ratio_of_medians"] = statistics.median(joined) / statistics.median(single)
        rows["ratio_per_round"] = [j / s for j, s in zip(joined, single)]
        out[device] = rows
    return out


def print_table(summary: dict) -> None:
    print("| device | dataset | samples/s | GB/s delivered | read amplification | CPU s per sample "
          "| joined / single (samples/s) |")
    print("|---|---|---|---|---|---|---|")
    for device, rows in summary.items():
        for layout in LAYOUTS:
            row = rows[layout]
            ratio = (f"{rows['ratio_of_medians']:.3f} (rounds {min(rows['ratio_per_round']):.3f}–"
                     f"{max(rows['ratio_per_round']):.3f})" if layout == "joined" else "")
            name = "3 stores joined" if layout == "joined" else "1 store"
            print(f"| {device} | {name} | {spread(row['samples_per_second'], '.2f')} "
                  f"| {spread(row['delivered_gb_per_second'], '.2f')} "
                  f"| {spread(row['read_amplification'], '.2f')} | {spread(row['cpu_seconds_per_sample'], '.2f')} "
                  f"| {ratio} |")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workdir", help="folder for the stores, reused by later runs (default: a temporary folder, "
                                     "removed at the end)")
    p.add_argument("--preset", default="era5", help="zarrstream synth preset (era5: 0.25°, 721 x 1440)")
    p.add_argument("--steps", type=int, default=12,
                   help="6-hourly time steps of the synthesized store (era5: about 250 MB stored per step, "
                        "and as much again for the three parts)")
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--batches", type=int, default=0, help="batches per epoch (default: the whole epoch)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--devices", default="cpu", help="cpu, cuda or cpu,cuda (cuda is skipped, and said so, "
                                                    "where no GPU can be used)")
    p.add_argument("--num-threads", type=int, default=0, help="loader threads (0: one per core)")
    p.add_argument("--input-steps", type=int, default=2, help="time steps per input window (GraphCast: 2)")
    p.add_argument("--shuffle", default="exact", choices=("exact", "block", "none"))
    p.add_argument("--verify-batches", type=int, default=2, help="batches compared before timing")
    p.add_argument("--json", help="write the settings, the check, every run's report and the summary here")
    args = p.parse_args(argv)
    args.variables = SURFACE + PRESSURE
    args.forcings = CONSTANTS + COMPUTED_FORCINGS
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cli = find_cli()
    devices = args.devices.split(",")
    skipped = {}
    if "cuda" in devices and not cuda_available():
        skipped["cuda"] = "no GPU can be used here (torch.cuda.is_available() is false)"
        devices.remove("cuda")
        print(f"multistore_bench: skipping cuda: {skipped['cuda']}", file=sys.stderr)
    tmp = None if args.workdir else tempfile.TemporaryDirectory(prefix="multistore-")
    try:
        work = Path(args.workdir or tmp.name)
        stores = make_stores(cli, work, args.preset, args.steps)
        sizes = {layout: stored_bytes(paths) for layout, paths in stores.items()}
        t0 = time.perf_counter()
        warm_page_cache(stores["joined"] + stores["single"])
        print(f"read every file of the stores once ({time.perf_counter() - t0:.1f} s): the runs read from the "
              "page cache", file=sys.stderr)

        checks = {device: verify(stores, args, device) for device in devices}
        for device, check in checks.items():
            word = "equal" if check["identical"] else "DIFFERENT"
            print(f"check on {device}: joined and single batches {word}: {check['detail']}", file=sys.stderr)

        runs: dict[str, dict[str, list[dict]]] = {d: {layout: [] for layout in LAYOUTS} for d in devices}
        for round_index in range(args.rounds):
            order = LAYOUTS if round_index % 2 == 0 else LAYOUTS[::-1]
            for device in devices:
                for layout in order:
                    report = bench(cli, stores[layout], args, device)
                    runs[device][layout].append(report)
                    print(f"round {round_index + 1}/{args.rounds} {device} {layout}: "
                          f"{report['samples_per_second']:.2f} samples/s", file=sys.stderr)
        summary = summarize(runs)

        print(f"\n{args.preset}, {args.steps} steps; {len(args.variables)} variables "
              f"({checks[devices[0]].get('channels', '?')} channels per step with {len(CONSTANTS)} static fields "
              f"and {len(COMPUTED_FORCINGS)} computed forcings), {args.input_steps} input steps, target +1; "
              f"batch {args.batch_size}, {args.epochs} epochs, shuffle {args.shuffle}, {args.rounds} rounds "
              f"(median, range); stored: 3 stores {size_text(sizes['joined'])}, 1 store "
              f"{size_text(sizes['single'])} (it holds every synth variable)\n")
        print_table(summary)
        identical = all(c["identical"] for c in checks.values())
        details = "; ".join(f"{device}: {check['detail']}" for device, check in checks.items())
        print(f"\nbatches of the two datasets: {'equal' if identical else 'NOT EQUAL'} ({details})")
        if args.json:
            Path(args.json).write_text(json.dumps({
                "settings": {k: v for k, v in vars(args).items() if k != "json"},
                "machine": machine(), "stores": {k: [str(p) for p in v] for k, v in stores.items()},
                "stored_bytes": sizes, "skipped": skipped, "checks": checks, "identical": identical,
                "summary": summary, "runs": runs}, indent=1))
        return 0 if identical else 1
    finally:
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    sys.exit(main())
