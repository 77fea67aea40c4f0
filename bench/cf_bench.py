"""What CF decoding costs the loader: the same channels from a float32 store and from its packed
twin (int16 with scale_factor, add_offset and _FillValue, as netCDF-converted ERA5 arrives), read
CF-decoded (the default) and as stored (--no-decode-cf), side by side in one run, on the CPU and on
the GPU.

  python bench/cf_bench.py --preset era5-1deg --steps 40 --work /tmp/cfbench --devices cpu,cuda

The float32 store is `zarrstream synth --layout v3-zstd`; the packed twin is written from it by
xarray (`Dataset.to_zarr` with an int16 encoding per variable, the float32 store's chunks, zstd), so
both hold the same fields in the same chunk grid. Each row is `zarrstream bench` (a fresh process)
over the same channels, batch size and steps; rounds alternate the stores so that drift in the
machine's state weighs on each alike. The packed store's chunks are half the bytes: the decode work
per chunk is smaller, the CF arithmetic (float64 for packed values, as xarray) is added.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np


def zarrstream_cli() -> str:
    found = shutil.which("zarrstream")
    if found is None:
        sys.exit("cf_bench: the zarrstream CLI is not on PATH (make build installs it)")
    return found


def synthesize(cli: str, path: Path, preset: str, steps: int | None) -> None:
    if (path / "zarr.json").exists():
        return
    command = [cli, "synth", str(path), "--preset", preset, "--layout", "v3-zstd"]
    if steps:
        command += ["--steps", str(steps)]
    subprocess.run(command, check=True)


def write_packed_twin(source: Path, dest: Path, variables: list[str]) -> None:
    """int16 with scale_factor/add_offset over each variable's range and _FillValue -32767, as the
    CDS's netCDF files pack ERA5; the source's chunks, zstd."""
    if (dest / "zarr.json").exists():
        return
    import xarray as xr
    from zarr.codecs import ZstdCodec

    ds = xr.open_zarr(str(source), decode_times=False)
    ds = ds[variables]
    encoding = {}
    for name in variables:
        var = ds[name]
        lo, hi = float(var.min()), float(var.max())
        scale = (hi - lo) / 65532 or 1.0
        encoding[name] = {
            "dtype": "int16",
            "scale_factor": scale,
            "add_offset": lo + 32766 * scale,
            "_FillValue": np.int16(-32767),
            "chunks": var.encoding.get("chunks") or tuple(c[0] for c in var.chunks),
            "compressors": [ZstdCodec(level=3)],
        }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_zarr(str(dest), mode="w", zarr_format=3, encoding=encoding, consolidated=True)


def bench(cli: str, url: Path, args: argparse.Namespace, device: str, decode_cf: bool) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json") as report:
        command = [cli, "bench", str(url), "--variables", ",".join(args.variables), "--device", device,
                   "--batch-size", str(args.batch_size), "--epochs", str(args.epochs),
                   "--json", report.name]
        if args.batches:
            command += ["--steps", str(args.batches)]
        if not decode_cf:
            command.append("--no-decode-cf")
        proc = subprocess.run(command, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"cf_bench: {' '.join(command)} failed:\n{proc.stderr}")
        return json.loads(Path(report.name).read_text())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="era5-1deg")
    p.add_argument("--steps", type=int, default=40, help="time steps of the synthesized store")
    p.add_argument("--work", required=True, help="folder for the two stores (kept for reruns)")
    p.add_argument("--variables", default="2m_temperature,temperature,geopotential,u_component_of_wind",
                   help="comma-separated variables (their levels become channels)")
    p.add_argument("--devices", default="cpu", help="cpu, cuda or cpu,cuda")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--batches", type=int, help="batches per epoch (default: the whole epoch)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", help="write every run's numbers here")
    args = p.parse_args()
    args.variables = args.variables.split(",")
    cli = zarrstream_cli()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    plain, packed = work / "float32.zarr", work / "packed.zarr"
    synthesize(cli, plain, args.preset, args.steps)
    write_packed_twin(plain, packed, args.variables)

    rows = [("float32", plain, True), ("int16 packed, decoded", packed, True),
            ("int16 packed, as stored", packed, False)]
    results: dict[str, list[dict]] = {}
    for device in args.devices.split(","):
        for _ in range(args.rounds):
            for name, url, decode_cf in rows:
                results.setdefault(f"{device}|{name}", []).append(bench(cli, url, args, device, decode_cf))

    print(f"\n{args.preset}, {args.steps} steps, variables {','.join(args.variables)}, "
          f"batch {args.batch_size}, {args.epochs} epochs, {args.rounds} rounds (median, range)\n")
    print("| device | store | samples/s | decoded GB/s delivered | vs float32 |")
    print("|---|---|---|---|---|")
    for device in args.devices.split(","):
        base = statistics.median(r["samples_per_second"] for r in results[f"{device}|float32"])
        for name, _, _ in rows:
            runs = results[f"{device}|{name}"]
            rates = [r["samples_per_second"] for r in runs]
            gbs = statistics.median(r["delivered_bytes_per_second"] / 1e9 for r in runs)
            print(f"| {device} | {name} | {statistics.median(rates):.1f} ({min(rates):.1f}–{max(rates):.1f}) "
                  f"| {gbs:.2f} | {statistics.median(rates) / base:.2f}× |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
