"""GPU decode by codec and chunk size: nvCOMP batched decode of Zarr-standard chunks.

Chooses the layout of ``zarrstream rechunk --gpu-friendly`` (and ``synth``'s GPU layout): for each
candidate codec and latitude-band chunk size it compresses a batch of ERA5-like float32 fields
(bench/era5_like.py) with the standard CPU libraries that Zarr writers use (numcodecs), then on the
GPU measures what the zarrstream GPU path will do per batch (docs/architecture.md, "On the GPU"):

* one H2D copy of all the batch's compressed bytes from pinned host memory (CUDA events);
* ONE nvCOMP batched decode call per codec per batch (nvcompBatched*DecompressAsync, called through
  ctypes on libnvcomp, all buffers preallocated; CUDA events; warm-up, median of --reps);
* for blosc: the host parses the blosc1 frames, nvCOMP decodes the blocks' inner lz4/zstd streams
  in one batched call, and a CUDA kernel undoes the byte shuffle (timed separately);
* every decoded batch is checked bit for bit against the original fields on the GPU;
* CPU decode of the same chunks for context (1 thread on a subset, and --cpu-threads threads over
  the whole batch: zstandard / zlib / numcodecs, whichever releases the GIL).

Columns: ratio = field bytes / stored bytes (Zarr stores edge chunks padded, so padding counts);
GB/s are decoded field bytes (unpadded) per second; ``pcie-bound`` = H2D GB/s of compressed bytes
times the ratio, i.e. the decoded rate the PCIe link can feed; ``path`` = min(pcie-bound, decode),
the GPU path's ceiling when copy and decode overlap.

How to run (on a machine with an NVIDIA GPU, CuPy, numpy; nvCOMP and numcodecs from PyPI):

    python3 -m pip install nvidia-libnvcomp-cu13 numcodecs zstandard   # or carry wheels, below
    python3 bench/gpu/nvcomp_layout_bench.py                 # 4 time steps x 69 channels, 721x1440
    python3 bench/gpu/nvcomp_layout_bench.py --quick         # smoke test, a few seconds

Where the GPU machine has no network, the wheels travel with the working tree: in the repository
root, ignore a wheel folder (``echo /.whl/ >> .git/info/exclude``; never commit it), download the
x86-64 / CPython 3.12 wheels into it with
``python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp
--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d .whl
nvidia-libnvcomp-cu13==6.0.0.12 numcodecs==0.16.6 zstandard==0.25.0``, and on the GPU machine run
``python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl &&
PYTHONPATH=/tmp/site python3 bench/gpu/nvcomp_layout_bench.py``.
Only the libnvcomp C library is used (through ctypes), not nvCOMP's Python package.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import json
import multiprocessing as mp
import os
import platform
import statistics
import struct
import sys
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from era5_like import era5_like_field  # noqa: E402

ALIGN = 16  # every compressed stream starts on a 16-byte boundary in the staging buffer

# ---------------------------------------------------------------------------------------------
# codecs (CPU side): name -> (numcodecs codec factory, nvCOMP decoder(s), payload extraction)
# ---------------------------------------------------------------------------------------------


def make_codec(name: str):
    from numcodecs import LZ4, Blosc, GZip, Zstd

    if name.startswith("zstd"):
        return Zstd(level=int(name[4:]))
    if name == "lz4":
        return LZ4(acceleration=1)
    if name.startswith("gzip"):
        return GZip(level=int(name[4:]))
    if name.startswith("blosc-lz4"):  # blosc-lz4-c5
        return Blosc(cname="lz4", clevel=int(name.split("-c")[1]), shuffle=Blosc.SHUFFLE)
    if name.startswith("blosc-zstd"):  # blosc-zstd-c3
        return Blosc(cname="zstd", clevel=int(name.split("-c")[1]), shuffle=Blosc.SHUFFLE)
    raise ValueError(name)


# decoders measured per codec: (label, nvcomp algorithm, extra option)
DECODERS = {
    "zstd": [("zstd", "Zstd", None)],
    "lz4": [("lz4", "LZ4", None)],
    "gzip": [("gzip", "Gzip", 0), ("gzip-lookahead", "Gzip", 1), ("deflate(raw)", "Deflate", None)],
    "blosc-lz4": [("lz4+unshuffle", "LZ4", None)],
    "blosc-zstd": [("zstd+unshuffle", "Zstd", None)],
}


def family(name: str) -> str:
    for fam in ("blosc-lz4", "blosc-zstd", "zstd", "lz4", "gzip"):
        if name.startswith(fam):
            return fam
    raise ValueError(name)


def gzip_payload(buf: bytes) -> tuple[int, int]:
    """(offset, length) of the raw deflate stream inside a gzip member."""
    assert buf[0] == 0x1F and buf[1] == 0x8B and buf[2] == 8
    flg = buf[3]
    pos = 10
    if flg & 4:
        pos += 2 + struct.unpack_from("<H", buf, pos)[0]
    if flg & 8:
        pos = buf.index(b"\0", pos) + 1
    if flg & 16:
        pos = buf.index(b"\0", pos) + 1
    if flg & 2:
        pos += 2
    return pos, len(buf) - pos - 8


def parse_blosc(buf: bytes):
    """Blosc1 frame -> (typesize, blocks); each block is (out_offset, nbytes, streams) where
    streams is a list of (offset_in_buf, csize, dsize, is_raw). A full block of a shuffled frame
    whose compressor splits is stored as ``typesize`` streams; leftover and unsplit blocks as one."""
    ver, verlz, flags, ts, nbytes, blocksize, cbytes = struct.unpack_from("<BBBBIII", buf, 0)
    if flags & 0x2:
        raise ValueError("memcpyed blosc frame")
    if not flags & 0x1 or flags & 0x4:
        raise ValueError("expected byte shuffle")
    split = not (flags & 0x10)
    nblocks = -(-nbytes // blocksize)
    bstarts = struct.unpack_from("<%di" % nblocks, buf, 16)
    blocks = []
    for b in range(nblocks):
        bsz = min(blocksize, nbytes - b * blocksize)
        nst = ts if (split and bsz == blocksize) else 1
        neb = bsz // nst
        pos = bstarts[b]
        streams = []
        for _ in range(nst):
            cs = struct.unpack_from("<i", buf, pos)[0]
            pos += 4
            streams.append((pos, cs, neb, cs == neb))
            pos += cs
        blocks.append((b * blocksize, bsz, streams))
    return ts, blocks


# ---------------------------------------------------------------------------------------------
# worker processes: generate fields, compress chunks (fork; workers never touch CUDA)
# ---------------------------------------------------------------------------------------------

_FIELDS = None  # (F, nlat, nlon) float32, inherited by forked workers


def _gen(args):
    t, c, nlat, nlon = args
    return era5_like_field(t, c, nlat, nlon)


def _compress(args):
    name, rows, f = args
    codec = make_codec(name)
    field = _FIELDS[f]
    nlat, nlon = field.shape
    nchunk = -(-nlat // rows)
    pad = np.zeros((nchunk * rows, nlon), np.float32)  # Zarr pads edge chunks (fill value 0)
    pad[:nlat] = field
    return [bytes(codec.encode(pad[k * rows:(k + 1) * rows])) for k in range(nchunk)]


# ---------------------------------------------------------------------------------------------
# nvCOMP through ctypes
# ---------------------------------------------------------------------------------------------


class Opts(ctypes.Structure):  # every *DecompressOpts_t is 64 bytes of ints then zeros
    _fields_ = [("i0", ctypes.c_int), ("i1", ctypes.c_int), ("i2", ctypes.c_int),
                ("i3", ctypes.c_int), ("reserved", ctypes.c_char * 48)]


class Props(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("cudart_version", ctypes.c_uint32)]


class Align(ctypes.Structure):
    _fields_ = [("input", ctypes.c_size_t), ("output", ctypes.c_size_t), ("temp", ctypes.c_size_t)]


def load_nvcomp():
    for d in sys.path:  # the nvidia-libnvcomp-cu13 wheel's library, else the system's
        p = os.path.join(d or ".", "nvidia", "libnvcomp", "lib64", "libnvcomp.so.6")
        if os.path.isfile(p):
            return ctypes.CDLL(p)
    return ctypes.CDLL("libnvcomp.so.6")


def make_opts(algo: str, extra) -> Opts:
    o = Opts()  # backend 0 = default (CUDA on H100: no hardware decompression engine)
    if algo == "Gzip" and extra:
        o.i1 = int(extra)  # algorithm: 0 naive, 1 lookahead
    return o


class NvcompDecoder:
    def __init__(self, lib, algo: str, extra):
        self.lib, self.algo = lib, algo
        self.opts = make_opts(algo, extra)
        p = "nvcompBatched" + algo
        self.f_temp = getattr(lib, p + "DecompressGetTempSize")
        self.f_temp.argtypes = [ctypes.c_size_t, ctypes.c_size_t, Opts,
                                ctypes.POINTER(ctypes.c_size_t), ctypes.c_size_t, ctypes.c_void_p]
        self.f_dec = getattr(lib, p + "DecompressAsync")
        self.f_dec.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                               ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                               Opts, ctypes.c_void_p, ctypes.c_void_p]
        self.f_dec.restype = self.f_temp.restype = ctypes.c_int
        f_al = getattr(lib, p + "DecompressGetRequiredAlignments")
        f_al.argtypes = [Opts, ctypes.POINTER(Align)]
        al = Align()
        check(f_al(self.opts, ctypes.byref(al)), "alignments")
        self.align = (al.input, al.output, al.temp)

    def temp_bytes(self, n, max_chunk, total, stream):
        t = ctypes.c_size_t(0)
        check(self.f_temp(n, max_chunk, self.opts, ctypes.byref(t), total, stream), "temp size")
        return t.value

    def __call__(self, d_in_ptrs, d_in_bytes, d_out_bytes, d_actual, n, d_temp, temp_bytes,
                 d_out_ptrs, d_status, stream):
        check(self.f_dec(d_in_ptrs, d_in_bytes, d_out_bytes, d_actual, n, d_temp, temp_bytes,
                         d_out_ptrs, self.opts, d_status, stream), self.algo + " decompress")


def check(status, what):
    if status != 0:
        raise RuntimeError(f"nvCOMP {what} failed: status {status}")


UNSHUFFLE_SRC = r"""
extern "C" __global__ void unshuffle4(const unsigned long long* __restrict__ src, // 4 per block
                                      const unsigned long long* __restrict__ dst, // 1 per block
                                      const unsigned int* __restrict__ nelem) {   // 1 per block
  const int b = blockIdx.x;
  const unsigned char* s0 = (const unsigned char*)src[4 * b + 0];
  const unsigned char* s1 = (const unsigned char*)src[4 * b + 1];
  const unsigned char* s2 = (const unsigned char*)src[4 * b + 2];
  const unsigned char* s3 = (const unsigned char*)src[4 * b + 3];
  unsigned int* d = (unsigned int*)dst[b];
  const unsigned int n = nelem[b];
  const unsigned int n4 = n & ~3u;
  for (unsigned int i = 4 * threadIdx.x; i < n4; i += 4 * blockDim.x) {
    const uchar4 a = *(const uchar4*)(s0 + i), c = *(const uchar4*)(s1 + i);
    const uchar4 e = *(const uchar4*)(s2 + i), g = *(const uchar4*)(s3 + i);
    uint4 o;
    o.x = a.x | (c.x << 8) | (e.x << 16) | ((unsigned)g.x << 24);
    o.y = a.y | (c.y << 8) | (e.y << 16) | ((unsigned)g.y << 24);
    o.z = a.z | (c.z << 8) | (e.z << 16) | ((unsigned)g.z << 24);
    o.w = a.w | (c.w << 8) | (e.w << 16) | ((unsigned)g.w << 24);
    *(uint4*)(d + i) = o;
  }
  for (unsigned int i = n4 + threadIdx.x; i < n; i += blockDim.x)
    d[i] = s0[i] | (s1[i] << 8) | (s2[i] << 16) | ((unsigned)s3[i] << 24);
}
"""


# ---------------------------------------------------------------------------------------------
# one (codec, chunk rows) configuration
# ---------------------------------------------------------------------------------------------


def align_up(x, a=ALIGN):
    return (x + a - 1) // a * a


def build_staging(name, chunks, chunk_bytes, raw_deflate=False):
    """Lay out the batch's compressed payloads in one buffer (host numpy), each at an ALIGN
    boundary. Returns (host buffer, list of decode jobs, blosc unshuffle plan or None).
    A job is (staging offset, csize, out offset, dsize); out offsets are relative to the
    decode target (the output batch, or for blosc the shuffled scratch of the same layout)."""
    fam = family(name)
    jobs = []
    plan = None
    pieces = []  # (bytes-like, offset in source, length)
    pos = 0

    def put(buf, off, n):
        nonlocal pos
        start = pos
        pieces.append((buf, off, n, start))
        pos = align_up(pos + n)
        return start

    if fam in ("zstd", "lz4", "gzip"):
        for i, c in enumerate(chunks):
            if fam == "zstd":
                off, n = 0, len(c)
            elif fam == "lz4":  # numcodecs LZ4: 4-byte little-endian size, then one lz4 block
                off, n = 4, len(c) - 4
            elif raw_deflate:  # gzip member -> its raw deflate payload (header stripped)
                off, n = gzip_payload(c)
            else:  # gzip: the whole member
                off, n = 0, len(c)
            s = put(c, off, n)
            jobs.append((s, n, i * chunk_bytes, chunk_bytes))
    else:
        src, dst, nel = [], [], []
        for i, c in enumerate(chunks):
            ts, blocks = parse_blosc(c)
            assert ts == 4
            for out_off, bsz, streams in blocks:
                base = i * chunk_bytes + out_off
                neb = bsz // 4
                ptrs = []
                for j, (soff, cs, dsz, raw) in enumerate(streams):
                    s = put(c, soff, cs)
                    if raw:
                        ptrs.append(("stage", s))
                    else:
                        jobs.append((s, cs, base + j * dsz, dsz))
                        ptrs.append(("scratch", base + j * dsz))
                if len(streams) == 1:  # unsplit: one stream holds all 4 byte planes
                    kind, p = ptrs[0]
                    ptrs = [(kind, p + k * neb) for k in range(4)]
                src.append(ptrs)
                dst.append(base)
                nel.append(neb)
        plan = (src, dst, nel)
    host = np.zeros(align_up(pos) + ALIGN, np.uint8)
    for buf, off, n, start in pieces:
        host[start:start + n] = np.frombuffer(buf, np.uint8, n, off)
    return host, jobs, plan


def time_events(fn, stream, reps, warmup):
    import cupy as cp

    for _ in range(warmup):
        fn()
    stream.synchronize()
    ts = []
    for _ in range(reps):
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record(stream)
        fn()
        e1.record(stream)
        e1.synchronize()
        ts.append(cp.cuda.get_elapsed_time(e0, e1) / 1e3)
    return statistics.median(ts), ts


def cpu_decode_fn(name):
    """A function bytes -> decoded bytes that releases the GIL where the library allows."""
    fam = family(name)
    if fam == "zstd":
        try:
            import zstandard

            import threading

            tls = threading.local()  # a ZstdDecompressor must not be shared between threads

            def dz(c):
                d = getattr(tls, "d", None)
                if d is None:
                    d = tls.d = zstandard.ZstdDecompressor()
                return d.decompress(c)

            return "zstandard", dz
        except ImportError:
            pass
    if fam == "gzip":
        return "zlib", lambda c: zlib.decompress(c, 31)
    if fam.startswith("blosc"):
        from numcodecs import blosc

        return "numcodecs.blosc", lambda c: blosc.decompress(c)
    codec = make_codec(name)
    return "numcodecs", lambda c: codec.decode(c)


def cpu_bench(name, chunks, field_bytes_per_chunk, threads, reps):
    from numcodecs import blosc as nblosc

    lib, fn = cpu_decode_fn(name)
    nblosc.use_threads = False  # one blosc thread per call; we parallelise over chunks
    sub = chunks[: max(1, len(chunks) // 16)]
    fn(sub[0])
    t1 = []
    for _ in range(reps):
        t = time.perf_counter()
        for c in sub:
            fn(c)
        t1.append(time.perf_counter() - t)
    one = len(sub) * field_bytes_per_chunk / min(t1) / 1e9
    tn = []
    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(fn, chunks[:threads]))
        for _ in range(reps):
            t = time.perf_counter()
            for _ in ex.map(fn, chunks, chunksize=max(1, len(chunks) // (threads * 4))):
                pass
            tn.append(time.perf_counter() - t)
    many = len(chunks) * field_bytes_per_chunk / min(tn) / 1e9
    return lib, one, many


def run_config(args, name, rows, chunks, orig_dev, lib, kern, stream, results):
    import cupy as cp

    F, nlat, nlon = args.fields, args.nlat, args.nlon
    nchunk = -(-nlat // rows)
    chunk_bytes = rows * nlon * 4
    field_bytes = F * nlat * nlon * 4
    stored = sum(len(c) for c in chunks)
    ratio = field_bytes / stored
    fam = family(name)

    cpu_lib, cpu1, cpun = cpu_bench(name, chunks, field_bytes / len(chunks), args.cpu_threads,
                                    args.cpu_reps)

    for label, algo, extra in DECODERS[fam]:
        host, jobs, plan = build_staging(name, chunks, chunk_bytes, raw_deflate=algo == "Deflate")
        pinned_mem = cp.cuda.alloc_pinned_memory(host.nbytes)
        pinned = np.frombuffer(pinned_mem, np.uint8, host.nbytes)
        pinned[:] = host
        del host
        d_stage = cp.empty(pinned.nbytes, cp.uint8)
        out = cp.empty(F * nchunk * chunk_bytes, cp.uint8)
        scratch = cp.empty(out.nbytes, cp.uint8) if plan else None
        target = scratch if plan else out

        # The closures take this configuration's buffers as defaults, not as loop variables: they
        # are called only in this iteration, and deleted with the buffers at its end.
        def h2d(d_stage=d_stage, pinned=pinned):
            cp.cuda.runtime.memcpyAsync(d_stage.data.ptr, pinned.ctypes.data, pinned.nbytes, 1,
                                        stream.ptr)

        t_h2d, _ = time_events(h2d, stream, args.reps, 1)
        h2d_gbs = pinned.nbytes / t_h2d / 1e9

        unshuf = None
        if plan:
            src, dst, nel = plan
            sp = np.array([[(d_stage.data.ptr if k == "stage" else scratch.data.ptr) + p
                            for k, p in blk] for blk in src], np.uint64).reshape(-1)
            d_src = cp.asarray(sp)
            d_dst = cp.asarray(np.array(dst, np.uint64) + np.uint64(out.data.ptr))
            d_nel = cp.asarray(np.array(nel, np.uint32))
            nblk = len(dst)

            def unshuf(nblk=nblk, d_src=d_src, d_dst=d_dst, d_nel=d_nel):
                kern((nblk,), (256,), (d_src, d_dst, d_nel), stream=stream)

        dec = NvcompDecoder(lib, algo, extra)
        n = len(jobs)
        d_in_ptrs = cp.asarray(np.array([j[0] for j in jobs], np.uint64)
                               + np.uint64(d_stage.data.ptr))
        d_in_bytes = cp.asarray(np.array([j[1] for j in jobs], np.uint64))
        d_out_ptrs = cp.asarray(np.array([j[2] for j in jobs], np.uint64)
                                + np.uint64(target.data.ptr))
        d_out_bytes = cp.asarray(np.array([j[3] for j in jobs], np.uint64))
        d_actual = cp.zeros(n, cp.uint64)
        d_status = cp.full(n, -1, cp.int32)
        max_chunk = max(j[3] for j in jobs)
        total = sum(j[3] for j in jobs)
        tb = dec.temp_bytes(n, max_chunk, total, stream.ptr)
        d_temp = cp.empty(max(tb, 1), cp.uint8)

        def decode(k=n, dec=dec, d_in_ptrs=d_in_ptrs, d_in_bytes=d_in_bytes, d_out_bytes=d_out_bytes,
                   d_actual=d_actual, d_temp=d_temp, tb=tb, d_out_ptrs=d_out_ptrs, d_status=d_status):
            dec(d_in_ptrs.data.ptr, d_in_bytes.data.ptr, d_out_bytes.data.ptr, d_actual.data.ptr,
                k, d_temp.data.ptr, tb, d_out_ptrs.data.ptr, d_status.data.ptr, stream.ptr)

        # correctness: poison, decode (and unshuffle), compare with the original fields
        h2d()
        out.fill(0xA5)
        if plan:
            scratch.fill(0x5A)
        decode()
        if plan:
            unshuf()
        stream.synchronize()
        st = cp.asnumpy(d_status)
        if (st != 0).any():
            bad = int(np.flatnonzero(st != 0)[0])
            raise RuntimeError(f"{name}/{label}: chunk {bad} status {st[bad]} "
                               f"(alignments {dec.align})")
        if not (cp.asnumpy(d_actual) == cp.asnumpy(d_out_bytes)).all():
            raise RuntimeError(f"{name}/{label}: wrong decoded sizes")
        got = out.view(cp.float32).reshape(F, nchunk * rows, nlon)[:, :nlat]
        if not bool(cp.array_equal(got, orig_dev)):
            raise RuntimeError(f"{name}/{label}: decoded batch differs from the original")

        t_dec, all_t = time_events(decode, stream, args.reps, args.warmup)
        # one time step (the first 1/steps of the jobs): fewer chunks in flight
        k1 = n // args.steps
        t_dec1, _ = time_events(functools.partial(decode, k1), stream, args.reps, args.warmup)
        t_un = time_events(unshuf, stream, args.reps, args.warmup)[0] if plan else 0.0
        dec_gbs = field_bytes / (t_dec + t_un) / 1e9
        dec1_gbs = field_bytes / args.steps / (t_dec1 + t_un / args.steps) / 1e9
        pcie = h2d_gbs * ratio
        row = dict(codec=name, decoder=label, rows=rows, chunk_kib=chunk_bytes / 1024,
                   chunks=len(chunks), streams=n, stored_mb=stored / 1e6, ratio=ratio,
                   h2d_gbs=h2d_gbs, t_h2d_ms=t_h2d * 1e3, t_decode_ms=t_dec * 1e3,
                   t_unshuffle_ms=t_un * 1e3, decode_gbs=dec_gbs, decode_1step_gbs=dec1_gbs,
                   pcie_bound_gbs=pcie, path_gbs=min(pcie, dec_gbs), cpu_lib=cpu_lib,
                   cpu_1t_gbs=cpu1, cpu_nt_gbs=cpun, temp_mb=tb / 1e6,
                   decode_ms_all=[x * 1e3 for x in all_t], align=dec.align)
        results.append(row)
        print(fmt_row(row), flush=True)
        del h2d, unshuf, decode, d_temp, pinned, pinned_mem, d_stage, out, scratch, target


HEADER = ("| codec | decoder | chunk lat rows | chunk KiB | streams/batch | ratio | H2D GB/s "
          "| GPU decode GB/s | 1-step GB/s | unshuffle ms | PCIe-bound GB/s | path GB/s "
          "| CPU 1-thr GB/s | CPU N-thr GB/s |\n|" + "---|" * 14)


def fmt_row(r):
    return (f"| {r['codec']} | {r['decoder']} | {r['rows']} | {r['chunk_kib']:.0f} | {r['streams']} "
            f"| {r['ratio']:.3f} | {r['h2d_gbs']:.1f} | {r['decode_gbs']:.1f} "
            f"| {r['decode_1step_gbs']:.1f} | {r['t_unshuffle_ms']:.2f} | {r['pcie_bound_gbs']:.1f} "
            f"| {r['path_gbs']:.1f} | {r['cpu_1t_gbs']:.2f} | {r['cpu_nt_gbs']:.1f} |")


def main():
    global _FIELDS
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=4, help="time steps per batch")
    ap.add_argument("--channels", type=int, default=69)
    ap.add_argument("--nlat", type=int, default=721)
    ap.add_argument("--nlon", type=int, default=1440)
    ap.add_argument("--rows", default="721,181,103,46",
                    help="latitude rows per chunk (721: whole field 4.15 MB; 181: 1.04 MB; "
                         "103: 593 KB; 46: 265 KB)")
    ap.add_argument("--codecs", default="zstd1,zstd3,zstd5,lz4,gzip5,blosc-lz4-c5,"
                                        "blosc-zstd-c1,blosc-zstd-c3")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--cpu-threads", type=int, default=os.cpu_count())
    ap.add_argument("--cpu-reps", type=int, default=2)
    ap.add_argument("--json", help="write all numbers here")
    ap.add_argument("--quick", action="store_true", help="small smoke test")
    args = ap.parse_args()
    if args.quick:
        args.steps, args.channels, args.reps, args.warmup, args.cpu_reps = 2, 3, 3, 1, 1
    args.fields = args.steps * args.channels
    rows_list = [int(x) for x in args.rows.split(",")]
    codecs = args.codecs.split(",")

    ctx = mp.get_context("fork")
    nproc = os.cpu_count()
    t0 = time.perf_counter()
    with ctx.Pool(nproc) as pool:
        fields = pool.map(_gen, [(t, c, args.nlat, args.nlon) for t in range(args.steps)
                                 for c in range(args.channels)], chunksize=4)
    _FIELDS = np.stack(fields)
    del fields
    print(f"# generated {args.fields} fields of {args.nlat}x{args.nlon} "
          f"({_FIELDS.nbytes / 1e9:.2f} GB) in {time.perf_counter() - t0:.1f} s", flush=True)
    pool = ctx.Pool(nproc)  # forked now, so workers see _FIELDS; before CUDA is touched

    import cupy as cp
    import numcodecs

    lib = load_nvcomp()
    props = Props()
    check(lib.nvcompGetProperties(ctypes.byref(props)), "properties")
    dev = cp.cuda.runtime.getDeviceProperties(0)
    print(f"# device {dev['name'].decode()}, {dev['multiProcessorCount']} SMs; driver "
          f"{cp.cuda.runtime.driverGetVersion()}; nvCOMP {props.version} (cudart "
          f"{props.cudart_version}); CuPy {cp.__version__}; numcodecs {numcodecs.__version__}; "
          f"numpy {np.__version__}; Python {platform.python_version()}; {nproc} CPUs", flush=True)
    kern = cp.RawKernel(UNSHUFFLE_SRC, "unshuffle4")
    stream = cp.cuda.Stream(non_blocking=True)
    results = []
    orig_dev = cp.asarray(_FIELDS)
    print(HEADER, flush=True)
    for rows in rows_list:
        for name in codecs:
            t = time.perf_counter()
            per_field = pool.map(_compress, [(name, rows, f) for f in range(args.fields)],
                                 chunksize=2)
            chunks = [c for fl in per_field for c in fl]
            del per_field
            tc = time.perf_counter() - t
            run_config(args, name, rows, chunks, orig_dev, lib, kern, stream, results)
            results[-1]["compress_s"] = tc
            cp.get_default_memory_pool().free_all_blocks()
    pool.close()
    print("\n# summary\n" + HEADER)
    for r in results:
        print(fmt_row(r))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(dict(args=vars(args), nvcomp=props.version, results=results), fh, indent=1)


if __name__ == "__main__":
    main()
