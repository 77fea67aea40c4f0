"""``zarrstream rechunk|stats ... --dask local[:N]|ADDRESS`` and ``... --ray local[:N]|ADDRESS``: the
C++ command hands such runs to ``python3 -m zarrstream.dask`` or ``python3 -m zarrstream.ray``
(src/cli/engine_forward.h), which take the command's options and run the job's parts as tasks of
that engine (zarrstream.dask, zarrstream.ray)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from .errors import InvalidArgumentError, ZarrstreamError


def _where(engine: str, spec: str) -> tuple[str | None, int | None]:
    """``local``, ``local:N`` (a local cluster of N workers) or an address → (address, workers)."""
    if spec == "local":
        return None, None
    if spec.startswith("local:"):
        n = spec[len("local:"):]
        if not n.isdigit() or int(n) < 1:
            raise InvalidArgumentError(f"--{engine} local:N expects a positive worker count, got '{spec}'")
        return None, int(n)
    return spec, None


def _parser(engine: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m zarrstream.{engine}",
                                     description=f"zarrstream rechunk / stats as {engine} tasks")
    commands = parser.add_subparsers(dest="command", required=True)
    rechunk = commands.add_parser("rechunk", help="docs/rechunk.md")
    rechunk.add_argument("src")
    rechunk.add_argument("dst")
    rechunk.add_argument("--chunks")
    rechunk.add_argument("--shard")
    rechunk.add_argument("--codec")
    rechunk.add_argument("--stack")
    rechunk.add_argument("--gpu-friendly", action="store_true")
    rechunk.add_argument("--memory", type=float, default=2.0, help="GB per part (task)")
    stats = commands.add_parser("stats", help="docs/stats.md")
    stats.add_argument("url")
    stats.add_argument("--no-decode-cf", action="store_true")
    stats.add_argument("--tendencies", action="append", default=[])
    stats.add_argument("-o", "--output")
    for sub in (rechunk, stats):
        sub.add_argument("--vars", action="append", default=[])
        sub.add_argument("--select", action="append", nargs="+", default=[])
        sub.add_argument("--threads", type=int, default=0, help="threads per part (task)")
        sub.add_argument("--ref", help="an Icechunk repository's branch, tag or snapshot id")
        sub.add_argument(f"--{engine}", default="local", metavar="local[:N]|ADDRESS",
                         help="a local cluster of N workers (default: one per core), or an address")
        sub.add_argument("--parts", type=int, help="parts (tasks); default: four per worker thread")
        sub.add_argument("--retries", type=int, default=2)
    return parser


def main(engine: str, argv: Sequence[str] | None = None) -> int:
    """Runs the command line `argv` on `engine` ("dask" or "ray"); returns the exit status."""
    args = _parser(engine).parse_args(argv)
    select = [s for group in args.select for s in group]
    try:
        address, workers = _where(engine, getattr(args, engine))
        if engine == "dask":
            import zarrstream.dask as runner

            common = dict(client=address, progress=True)
        else:
            import zarrstream.ray as runner

            common = dict(address=address)
        common.update(workers=workers, parts=args.parts, retries=args.retries,
                      vars=args.vars or None, select=select, threads=args.threads, ref=args.ref)
        if args.command == "rechunk":
            report = runner.rechunk(args.src, args.dst, chunks=args.chunks, shard=args.shard,
                                    codec=args.codec, stack=args.stack,
                                    gpu_friendly=args.gpu_friendly, memory=args.memory, **common)
            for skipped in report.skipped_arrays:
                print(f"zarrstream rechunk: not copied: {skipped}", file=sys.stderr)
            print(f"rechunked {report.arrays} arrays: {report.output_bytes} bytes written, "
                  f"{report.slabs_total} slabs ({report.slabs_resumed} already done, skipped); "
                  f"read amplification {report.read_amplification:.2f}x")
            print(f"complete: {args.dst}")
        else:
            tendencies = [n for text in args.tendencies for n in text.split(",")]
            result = runner.stats(args.url, decode_cf=not args.no_decode_cf, output=args.output,
                                  tendencies=tendencies or None, **common)
            if args.output in (None, "-"):
                print(json.dumps(result, indent=2))
    except ZarrstreamError as e:
        print(f"zarrstream {args.command}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"zarrstream {args.command}: interrupted; rerun the same command to resume",
              file=sys.stderr)
        return 130
    return 0
