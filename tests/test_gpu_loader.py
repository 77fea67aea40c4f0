"""GPU batches (``Loader(device="cuda")``): chunks decoded by nvCOMP and assembled by CUDA kernels
must equal the CPU loader's batches bit for bit, for stores zarr-python wrote with every codec the
GPU decodes (zstd, gzip, zlib, lz4, blosc with lz4 or zstd and byte or no shuffle, none, crc32c,
big-endian, sharded, behind the bitround and quantize filters), the ones it leaves to the CPU
(blosc with bitshuffle or blosclz, the casts of astype and quantize), missing
chunks, NaNs, every source and batch dtype and normalisation. Bad chunks fail with the CPU path's
error, or are skipped alike, down to a single bit flipped in zlib or gzip data that still decodes
to the chunk's size (the checksums are verified on the GPU).

Every test here is marked ``gpu``: without a CUDA device they are skipped, and the summary says so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numcodecs
import numpy as np
import pytest
import zarr
from zarr.codecs import BloscCodec, BytesCodec, Crc32cCodec, GzipCodec, ZstdCodec
from zarr.codecs import numcodecs as v3_codecs

torch = pytest.importorskip("torch")

import zarrstream  # noqa: E402
from conftest import run_cli  # noqa: E402

pytestmark = pytest.mark.gpu

NT, NY, NX = 13, 9, 14
DIMS = ["time", "latitude", "longitude"]


COORDS = ("time", "latitude", "longitude")


def _coords(g, v3: bool):
    values = {"time": 6 * np.arange(NT, dtype="int64"),
              "latitude": np.linspace(90, -90, NY).astype("float32"),
              "longitude": np.arange(NX, dtype="float32") * (360 / NX)}
    for name, v in values.items():
        kwargs = {"dimension_names": [name]} if v3 else {}
        a = g.create_array(name, shape=v.shape, chunks=v.shape, dtype=v.dtype, **kwargs)
        a[...] = v
        if not v3:
            a.attrs["_ARRAY_DIMENSIONS"] = [name]
    g["time"].attrs.update({"units": "hours since 1979-01-01", "calendar": "proleptic_gregorian"})


def _field(rng, dtype, nan_fraction=0.0):
    values = 250 + 30 * rng.standard_normal((NT, NY, NX))
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-300, 300, (NT, NY, NX)).astype(dtype)
    values = values.astype(dtype)
    if nan_fraction:
        values[rng.random(values.shape) < nan_fraction] = np.nan
    return values


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """Two ERA5-like groups written by zarr-python, one array per codec layout: (v3 path, v2 path)."""
    root = tmp_path_factory.mktemp("gpu")
    rng = np.random.default_rng(11)

    v3 = zarr.open_group(str(root / "v3.zarr"), mode="w", zarr_format=3)
    _coords(v3, True)
    layouts = {
        "zstd_f32": dict(dtype="float32", chunks=(1, 5, 6), compressors=ZstdCodec(level=3), nan=0.05),
        "gzip_f64": dict(dtype="float64", chunks=(2, 9, 14), compressors=GzipCodec(level=5)),
        "raw_i16": dict(dtype="int16", chunks=(3, 4, 14), compressors=None),
        "crc_be_f32": dict(dtype="float32", chunks=(2, 9, 7), serializer=BytesCodec(endian="big"),
                           compressors=[ZstdCodec(level=1), Crc32cCodec()]),
        "blosc_f32": dict(dtype="float32", chunks=(2, 9, 14),
                          compressors=BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")),
        "blosc_bitshuffle_f32": dict(dtype="float32", chunks=(3, 9, 14),  # decoded on the CPU
                                     compressors=BloscCodec(cname="lz4", clevel=5, shuffle="bitshuffle")),
        "blosc_zstd_noshuffle_f64": dict(dtype="float64", chunks=(5, 9, 14),
                                         compressors=BloscCodec(cname="zstd", clevel=1, shuffle="noshuffle")),
        "sharded_f32": dict(dtype="float32", chunks=(1, 9, 7), shards=(4, 9, 14),
                            compressors=ZstdCodec(level=1)),
        # `zarrstream rechunk --gpu-friendly`'s layout: inner chunks of blosc-lz4 with byte shuffle.
        "sharded_blosc_f32": dict(dtype="float32", chunks=(1, 9, 14), shards=(2, 9, 14),
                                  compressors=BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")),
        "f16": dict(dtype="float16", chunks=(2, 9, 14), compressors=ZstdCodec(level=1), nan=0.02),
        "u8": dict(dtype="uint8", chunks=(4, 9, 14), compressors=GzipCodec(level=1)),
        # Lossy filters whose decoders leave the bytes as they are: the GPU decodes the zstd.
        "quantize_bitround_f32": dict(dtype="float32", chunks=(2, 9, 14), compressors=ZstdCodec(level=1),
                                      filters=[v3_codecs.Quantize(digits=3), v3_codecs.BitRound(keepbits=12)]),
        # A cast (float64 stored as float32): decoded on the CPU.
        "astype_f64": dict(dtype="float64", chunks=(2, 9, 14), compressors=ZstdCodec(level=1),
                           filters=[v3_codecs.AsType(encode_dtype="f4", decode_dtype="f8")]),
    }
    for name, layout in layouts.items():
        nan = layout.pop("nan", 0.0)
        values = _field(rng, layout["dtype"], nan)
        a = v3.create_array(name, shape=values.shape, fill_value=0, dimension_names=DIMS, **layout)
        a[...] = values
    # Missing chunks (never written) read as the fill value.
    missing = v3.create_array("missing_f32", shape=(NT, NY, NX), chunks=(2, 9, 14), dtype="float32",
                              fill_value=1.5, dimension_names=DIMS, compressors=ZstdCodec(level=1))
    missing[0:4] = _field(rng, "float32")[0:4]
    zarr.consolidate_metadata(str(root / "v3.zarr"))

    v2 = zarr.open_group(str(root / "v2.zarr"), mode="w", zarr_format=2)
    _coords(v2, False)
    for name, dtype, compressor in [
        ("zlib_f32", "<f4", numcodecs.Zlib(level=5)),
        ("lz4_f32", "<f4", numcodecs.LZ4()),
        ("zstd_be_f8", ">f8", numcodecs.Zstd(level=3)),
        ("blosc_i32", "<i4", numcodecs.Blosc(cname="zstd", clevel=3, shuffle=numcodecs.Blosc.SHUFFLE)),
        ("blosc_lz4_f4", "<f4", numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE,
                                                 blocksize=1000)),  # many blocks, a short last one
        ("blosclz_f4", "<f4", numcodecs.Blosc(cname="blosclz", clevel=5)),  # decoded on the CPU
        ("none_be_i16", ">i2", None),
    ]:
        values = _field(rng, np.dtype(dtype).newbyteorder("="), 0.03 if dtype.endswith(("f4", "f8")) else 0)
        a = v2.create_array(name, shape=values.shape, chunks=(2, 5, 14), dtype=dtype, fill_value=0,
                            compressors=compressor)
        a[...] = values
        a.attrs["_ARRAY_DIMENSIONS"] = DIMS
    # v2 filters: bitround (GPU-decoded behind blosc), quantize to float32 (a cast: the CPU).
    for name, dtype, filters in [
        ("bitround_blosc_f4", "<f4", [numcodecs.BitRound(keepbits=9)]),
        ("quantize_f8_to_f4", "<f8", [numcodecs.Quantize(digits=2, dtype="<f8", astype="<f4")]),
    ]:
        values = _field(rng, dtype, 0.03)
        a = v2.create_array(name, shape=values.shape, chunks=(2, 5, 14), dtype=dtype, fill_value=0,
                            filters=filters, compressors=numcodecs.Blosc(cname="lz4", clevel=5, shuffle=1))
        a[...] = values
        a.attrs["_ARRAY_DIMENSIONS"] = DIMS
    zarr.consolidate_metadata(str(root / "v2.zarr"))
    return root / "v3.zarr", root / "v2.zarr"


def _variables(path: Path) -> list[str]:
    return sorted(k for k in zarr.open_group(str(path), mode="r").array_keys() if k not in COORDS)


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bits, so that NaN payloads count."""
    return t.view({4: torch.int32, 2: torch.int16, 1: torch.uint8}[t.element_size()])


def _assert_same_batches(cpu, gpu, epochs=2):
    for epoch in range(epochs):
        cpu.set_epoch(epoch)
        gpu.set_epoch(epoch)
        got_all = list(gpu)  # every batch in flight before any is compared
        want_all = list(cpu)
        assert len(got_all) == len(want_all) > 0
        for got, want in zip(got_all, want_all):
            assert set(got) == set(want)
            for key in want:
                if key == "origin":
                    assert not got[key].is_cuda
                    assert torch.equal(got[key], want[key])
                    continue
                assert got[key].is_cuda, key
                assert got[key].dtype == want[key].dtype and got[key].shape == want[key].shape
                assert torch.equal(_bits(got[key].cpu()), _bits(want[key])), key


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_gpu_batches_equal_cpu_batches_for_every_codec(stores, dtype):
    for path in stores:
        names = _variables(path)
        common = dict(target_offset={"time": 1}, batch_size=3, seed=3, dtype=dtype)
        cpu = zarrstream.Loader(path, names, **common)
        gpu = zarrstream.Loader(path, names, device="cuda", gpu_batches=True, prefetch=3, **common)
        assert "nvCOMP" in gpu.gpu_decode_status, gpu.gpu_decode_status
        _assert_same_batches(cpu, gpu)
        stats = gpu.stats()
        assert stats["gpu_decoded_chunks"] > 0
        assert stats["gpu_rejected_chunks"] == 0
        assert stats["bytes_to_gpu"] > 0
        # The sharded arrays' inner chunks are read straight into the pinned staging (v3 only).
        assert (stats["bytes_staged_without_copy"] > 0) == (path == stores[0])
        assert stats["bytes_staged_without_copy"] < stats["bytes_to_gpu"]


def test_chunks_decoded_by_the_cpu_make_the_same_gpu_batches(stores):
    # gpu_decode=False: the worker threads decode every compressed chunk; stored (uncompressed)
    # chunks still cross as they are.
    for path in stores:
        names = _variables(path)
        common = dict(target_offset={"time": 1}, batch_size=3, seed=5, dtype="float32")
        cpu = zarrstream.Loader(path, names, **common)
        gpu = zarrstream.Loader(path, names, device="cuda", gpu_batches=True, gpu_decode=False,
                                prefetch=2, **common)
        assert gpu.gpu_decode_status == "chunks decode on the CPU: gpu_decode is off"
        _assert_same_batches(cpu, gpu)
        stats = gpu.stats()
        # Rejected chunks would be ones read for the GPU and again for the CPU.
        assert stats["gpu_decoded_chunks"] == 0 and stats["gpu_rejected_chunks"] == 0
        assert stats["bytes_to_gpu"] > 0 and stats["chunks_decoded"] > 0


def test_cpu_and_gpu_decoding_side_by_side_make_the_same_gpu_batches(stores):
    # cpu_decode_share=0.5: the worker threads decode every other chunk nvCOMP could decode, in
    # arrays nvCOMP decodes whole (big-endian ones too: bytes the CPU decoded are not swapped again),
    # and every other shard of a sharded one (its inner chunks kept together, so that the shards
    # nvCOMP decodes are read straight into the staging).
    for path, names in zip(stores, (["blosc_f32", "crc_be_f32", "gzip_f64", "zstd_f32", "sharded_blosc_f32"],
                                    ["lz4_f32", "zlib_f32", "zstd_be_f8"])):
        common = dict(target_offset={"time": 1}, batch_size=3, seed=7, dtype="float32")
        cpu = zarrstream.Loader(path, names, **common)
        both = zarrstream.Loader(path, names, device="cuda", gpu_batches=True, cpu_decode_share=0.5,
                                 prefetch=2, **common)
        assert both.gpu_decode_status.endswith("; the worker threads decode 50 % of its chunks "
                                               "(cpu_decode_share)"), both.gpu_decode_status
        _assert_same_batches(cpu, both)
        stats = both.stats()
        # Per batch the CPU takes half of the chunks, rounded down, and nvCOMP the rest
        # (chunks_decoded counts both; ChunksDecodedOnGpu's unit tests check the split).
        on_gpu = stats["gpu_decoded_chunks"]
        on_cpu = stats["chunks_decoded"] - on_gpu
        # (They also count batches dropped part-made when the next epoch starts: one run under load
        # counted 248 on the CPU against 206 on the GPU. So the two are not compared.)
        assert on_cpu > 0 and on_gpu > 0 and stats["cpu_decode_share"] == 0.5, (
            path, {key: stats[key] for key in ("batches", "chunks_decoded", "gpu_decoded_chunks",
                                               "gpu_rejected_chunks", "cpu_decode_share")})
        assert stats["gpu_rejected_chunks"] == 0
        assert (stats["bytes_staged_without_copy"] > 0) == (path == stores[0])


def test_waves_of_one_chunk_read_while_the_last_decodes_make_the_same_gpu_batches(stores, tmp_path):
    # gpu_wave_bytes=1: every chunk is a wave of its own, and the waves alternate between the
    # batch's two workspaces (one read while the other's wave crosses, decodes and scatters); half
    # the chunks decoded by the worker threads, half by nvCOMP, and a corrupt chunk skipped alike.
    for path in stores:
        names = _variables(path)
        common = dict(target_offset={"time": 1}, batch_size=3, seed=11, dtype="float32")
        cpu = zarrstream.Loader(path, names, **common)
        gpu = zarrstream.Loader(path, names, device="cuda", gpu_batches=True, gpu_wave_bytes=1,
                                cpu_decode_share=0.5, prefetch=2, timeline=True, **common)
        _assert_same_batches(cpu, gpu)
        stats = gpu.stats()
        assert stats["gpu_decoded_chunks"] > 0 and stats["gpu_rejected_chunks"] == 0
        # One read span per wave, on the coordinating threads' lanes.
        reads = [s for s in gpu.timeline() if s["stage"] == "read"]
        assert len(reads) >= stats["gpu_decoded_chunks"]
        assert {s["thread"] for s in reads} <= {s["thread"] for s in gpu.timeline()
                                                 if s["stage"] == "scatter"}

    bad = _corrupt(stores[0], tmp_path / "bad.zarr")
    common = dict(batch_size=4, shuffle="exact", on_error="skip", target_offset={"time": 1})
    cpu = zarrstream.Loader(bad, ["zstd_f32", "gzip_f64"], **common)
    gpu = zarrstream.Loader(bad, ["zstd_f32", "gzip_f64"], device="cuda", gpu_wave_bytes=1,
                            **common)
    _assert_same_batches(cpu, gpu, epochs=1)
    assert gpu.stats()["skipped_samples"] == cpu.stats()["skipped_samples"] > 0


def test_an_adaptive_share_searches_as_batches_are_taken_and_changes_no_value(stores):
    """cpu_decode_share="auto": the share moves on a grid of tenths as the consumer takes batches
    (a window of batches judges each share it tries), so both the worker threads and nvCOMP decode;
    the batches stay the CPU loader's. The consumer does nothing but take batches, so it waits for
    them at every share (with every chunk on the CPU too, where it starts) and the search goes on."""
    path, names = stores[0], ["blosc_f32", "crc_be_f32", "zstd_f32"]
    common = dict(target_offset={"time": 1}, batch_size=1, seed=5, dtype="float32")
    auto = zarrstream.Loader(path, names, device="cuda", gpu_batches=True, cpu_decode_share="auto", prefetch=2,
                             **common)
    assert "adapts to the consumer's time per batch, from 100 %" in auto.gpu_decode_status, auto.gpu_decode_status
    assert auto.stats()["cpu_decode_share"] == 1.0
    cpu = zarrstream.Loader(path, names, **common)
    shares = []
    # Epochs until the search has tried a share under 1 (nvCOMP decoded chunks; three epochs at
    # least): with 16 worker threads ahead of a consumer that only takes batches, some windows see
    # no wait, and only windows with waits count towards a probe; within ten epochs (120 batches)
    # it must have.
    for epoch in range(10):
        if epoch >= 3 and auto.stats()["gpu_decoded_chunks"] > 0:
            break
        auto.set_epoch(epoch)
        cpu.set_epoch(epoch)
        want_all = list(cpu)
        got_all = []
        for batch in auto:
            got_all.append({key: value.cpu() for key, value in batch.items()})
        shares.append(auto.stats()["cpu_decode_share"])
        assert len(got_all) == len(want_all) == 12
        for got, want in zip(got_all, want_all):
            assert torch.equal(got["origin"], want["origin"])
            assert all(torch.equal(_bits(got[key]), _bits(want[key])) for key in want if key != "origin")
    # Past the loader's first eight batches (its start-up, judged by nothing) the share moved from
    # every chunk on the CPU (and may have come back by an epoch's end); every share is a tenth.
    assert all(abs(10 * share - round(10 * share)) < 1e-9 for share in shares), shares
    stats = auto.stats()
    on_gpu = stats["gpu_decoded_chunks"]
    assert 0 < on_gpu < stats["chunks_decoded"], stats  # both decoded
    with pytest.raises(zarrstream.ConfigError, match="'most': expected a share from 0 to 1 or 'auto'"):
        zarrstream.Loader(path, names, device="cuda", cpu_decode_share="most")


def test_a_data_parallel_rank_measures_both_ends_and_settles_at_one(stores):
    """A rank of a data-parallel job (world_size > 1) with cpu_decode_share="auto" measures only
    the two ends, by the time per batch alone (its steps wait for the other ranks'): it tries
    nvCOMP even where its own consumer never waits, which a loader alone does not (every chunk on
    the CPU with no wait cannot be beaten there), and every share it takes is an end."""
    path, names = stores[0], ["blosc_f32", "zstd_f32"]
    common = dict(target_offset={"time": 1}, batch_size=1, seed=7, device="cuda", gpu_batches=True,
                  cpu_decode_share="auto", prefetch=2)

    def run(**shard):
        loader = zarrstream.Loader(path, names, **common, **shard)
        shares = set()
        epochs = -(-36 // len(loader))  # at least 36 batches: past the start-up and two windows
        for epoch in range(epochs):
            loader.set_epoch(epoch)
            for _ in loader:
                time.sleep(0.03)  # a training step the worker threads keep well ahead of
                shares.add(loader.stats()["cpu_decode_share"])
        stats = loader.stats()
        assert stats["batches"] == epochs * len(loader) >= 36
        return stats, shares

    rank, rank_shares = run(rank=0, world_size=2)
    assert rank["gpu_decoded_chunks"] > 0, rank  # nvCOMP was measured
    assert rank_shares <= {0.0, 1.0}, rank_shares  # and nothing between the ends
    alone, alone_shares = run()
    assert alone["gpu_decoded_chunks"] == 0 and alone_shares == {1.0}, (alone, alone_shares)


def test_fewer_batches_ahead_mid_epoch_give_gpu_memory_back_and_keep_the_batches(stores):
    path, names = stores[0], ["blosc_f32", "zstd_f32"]
    common = dict(target_offset={"time": 1}, batch_size=1, seed=6)
    cpu = zarrstream.Loader(path, names, **common)
    gpu = zarrstream.Loader(path, names, device="cuda", gpu_batches=True, prefetch=3, **common)
    got_all, held = [], []
    for i, batch in enumerate(gpu):
        got_all.append({key: value.cpu() for key, value in batch.items()})
        if i < 5:
            held.append(batch)  # five device blocks at least
        if i == 4:
            assert gpu.stats()["batch_blocks"] >= 5
            gpu.prefetch = 1  # the batches ahead kept, the blocks beyond three freed as they return
            assert gpu.prefetch == 1
            held.clear()
        if i == 9:
            assert gpu.stats()["batch_blocks"] <= 3, gpu.stats()["batch_blocks"]
    want_all = list(cpu)
    assert len(got_all) == len(want_all) > 10
    for got, want in zip(got_all, want_all):
        assert torch.equal(got["origin"], want["origin"])
        assert all(torch.equal(_bits(got[key]), _bits(want[key])) for key in want if key != "origin")


def test_out_of_gpu_memory_for_nvcomp_the_worker_threads_decode_instead(tmp_path):
    """A batch with chunks on nvCOMP that finds no GPU memory for what nvCOMP alone needs (the
    decoded chunks before their scatter and zstd's scratch: about 30 MB a wave here) is made again
    with every chunk decoded by the worker threads, and so is every batch after it: the CPU
    loader's batches, where the loader used to fail with a CudaError."""
    path = tmp_path / "big.zarr"
    g = zarr.open_group(str(path), mode="w", zarr_format=3)
    t = g.create_array("time", shape=(12,), chunks=(12,), dtype="int64", dimension_names=["time"])
    t[...] = 6 * np.arange(12)
    t.attrs.update({"units": "hours since 1979-01-01", "calendar": "proleptic_gregorian"})
    values = np.random.default_rng(3).random((12, 1024, 1024), dtype=np.float32)
    g.create_array("t2m", shape=values.shape, chunks=(1, 1024, 1024), dtype="float32", dimension_names=DIMS,
                   compressors=ZstdCodec(level=1))[...] = values
    # Batches of one sample: a batch block (8.4 MB) is well below what nvCOMP needs beyond it.
    common = dict(target_offset={"time": 1}, batch_size=1, seed=2, prefetch=1)

    def gpu_loader(share):
        return zarrstream.Loader(path, "t2m", device="cuda", gpu_batches=True, cpu_decode_share=share, **common)

    def read_all(loader, free_before):
        """Every batch, copied to the host; and the most GPU memory the loader held at a batch."""
        got, peak = [], 0
        for batch in loader:
            got.append({key: value.cpu() for key, value in batch.items()})
            torch.cuda.synchronize()
            peak = max(peak, free_before - torch.cuda.mem_get_info()[0])
        return got, peak

    # What the loader takes at most with every chunk decoded by the worker threads; then the GPU
    # filled to leave that, one batch block more and a little (16 MB in all).
    torch.cuda.synchronize()
    free_before = torch.cuda.mem_get_info()[0]
    cpu_decoded = gpu_loader(1.0)
    _, needs = read_all(cpu_decoded, free_before)
    del cpu_decoded
    torch.cuda.synchronize()
    filler = torch.empty(torch.cuda.mem_get_info()[0] - needs - (16 << 20), dtype=torch.uint8, device="cuda")
    try:
        loader = gpu_loader(0.0)
        got_all, _ = read_all(loader, free_before)
        assert loader.stats()["cpu_decode_share"] == 1.0, (needs, loader.stats())
        del loader
    finally:
        del filler
        torch.cuda.empty_cache()  # the filler's memory back to the driver, for the tests after
    want_all = list(zarrstream.Loader(path, "t2m", **common))
    assert len(got_all) == len(want_all) > 1
    for got, want in zip(got_all, want_all):
        assert torch.equal(got["origin"], want["origin"])
        assert all(torch.equal(_bits(got[key]), _bits(want[key])) for key in want if key != "origin")


def test_running_out_of_gpu_memory_says_what_the_loader_holds(tmp_path):
    # Batches larger than any GPU: 2 samples of a 100,000 x 100,000 float32 field, input and
    # target, 160 GB (the store holds metadata only: every chunk is the fill value).
    path = tmp_path / "huge.zarr"
    g = zarr.open_group(str(path), mode="w", zarr_format=3)
    t = g.create_array("time", shape=(4,), chunks=(4,), dtype="int64", dimension_names=["time"])
    t[...] = 6 * np.arange(4)
    t.attrs.update({"units": "hours since 1979-01-01", "calendar": "proleptic_gregorian"})
    g.create_array("t2m", shape=(4, 100_000, 100_000), chunks=(1, 10_000, 10_000), dtype="float32",
                   fill_value=0, dimension_names=DIMS)
    loader = zarrstream.Loader(path, "t2m", target_offset={"time": 1}, batch_size=2, device="cuda",
                               gpu_batches=True, prefetch=1)
    with pytest.raises(zarrstream.CudaError) as error:
        next(iter(loader))
    message = str(error.value)
    assert "of GPU memory on cuda:" in message and " free of " in message, message
    assert "up to 3 batches of 160.0 GB" in message and "gpu_decode off" in message, message


def test_normalised_batches_with_nan_fill_and_masks_equal_the_cpu(stores, tmp_path):
    path = stores[0]
    names = _variables(path)
    stats_file = tmp_path / "stats.json"
    r = run_cli("stats", path, "--vars", ",".join(names), "--output", stats_file)
    assert r.returncode == 0, r.stderr
    common = dict(target_offset={"time": 1}, batch_size=4, normalize=stats_file, nan=-3.0, seed=1)
    cpu = zarrstream.Loader(path, names, **common)
    gpu = zarrstream.Loader(path, names, device="cuda", gpu_batches=True, **common)
    _assert_same_batches(cpu, gpu, epochs=1)
    batch = next(iter(gpu))
    assert batch["input_mask"].dtype == torch.bool and batch["input_mask"].any()


def test_windows_crops_and_partial_chunks(stores):
    path = stores[0]
    common = dict(sample={"time": 2, "latitude": 4, "longitude": 5}, stride={"latitude": 3, "longitude": 4},
                  batch_size=5, seed=2, shuffle="block", block_chunks=2)  # the CPU and GPU pick their own
    cpu = zarrstream.Loader(path, ["zstd_f32", "crc_be_f32", "sharded_f32"], **common)
    gpu = zarrstream.Loader(path, ["zstd_f32", "crc_be_f32", "sharded_f32"], device="cuda", **common)
    _assert_same_batches(cpu, gpu, epochs=1)


def test_block_shuffle_shares_steps_within_gpu_batches(tmp_path):
    """GPU batches have no chunk cache: the loader sizes blocks so that a group of blocks falls in
    one batch, whose plan decodes each step once although it is one sample's target and the next
    one's input. The batches are the CPU loader's with the same block size."""
    path = tmp_path / "steps.zarr"
    g = zarr.open_group(str(path), mode="w", zarr_format=3)
    values = _field(np.random.default_rng(5), "float32")[:1].repeat(64, axis=0)
    values += np.arange(64, dtype="float32")[:, None, None]
    t = g.create_array("time", shape=(64,), chunks=(64,), dtype="int64", dimension_names=["time"])
    t[...] = 6 * np.arange(64)
    for name, v in (("latitude", np.linspace(90, -90, NY)), ("longitude", np.arange(NX) * (360 / NX))):
        a = g.create_array(name, shape=v.shape, chunks=v.shape, dtype="float32", dimension_names=[name])
        a[...] = v
    a = g.create_array("t2m", shape=values.shape, chunks=(1, NY, NX), dtype="float32", dimension_names=DIMS,
                       compressors=ZstdCodec(level=3))
    a[...] = values
    common = dict(target_offset={"time": 1}, batch_size=16, seed=4, shuffle="block", block_window=4)
    gpu = zarrstream.Loader(path, "t2m", device="cuda", gpu_batches=True, **common)
    assert gpu.stats()["block_chunks"] == 4  # 4 blocks of 4 samples: one batch
    cpu = zarrstream.Loader(path, "t2m", block_chunks=4, **common)
    _assert_same_batches(cpu, gpu, epochs=2)
    single = zarrstream.Loader(path, "t2m", device="cuda", gpu_batches=True, block_chunks=1, **common)
    for epoch in range(2):
        single.set_epoch(epoch)
        assert sum(len(b["origin"]) for b in single) == 63

    def decoded_per_use(loader) -> float:
        # Over every batch planned so far: the pipeline runs ahead into the next epoch, planning
        # batches (their uses counted) before it reads them; starting another epoch stops it once
        # the batches in production are read.
        loader.set_epoch(0)
        stats = loader.stats()
        assert stats["gpu_decoded_chunks"] > 0 and stats["gpu_rejected_chunks"] == 0
        return stats["chunks_decoded"] / stats["chunk_refs"]

    # Each sample uses two steps; blocks of 4 decode 5 steps per 4 samples (0.625 where a group is
    # one batch; the CPU loader with the same blocks measured 0.61-0.65 decodes + cache hits per
    # use), single-step blocks share a step only where two neighbours meet in a batch (0.86-0.87).
    shared, unshared = decoded_per_use(gpu), decoded_per_use(single)
    assert shared < 0.7 and shared < 0.8 * unshared, (shared, unshared)


def test_gpu_batches_on_the_current_device_and_a_missing_one_is_an_error(stores):
    """device="cuda" is torch's current device; an index the machine lacks is a clear error, from
    torch's count or (no torch: DLPack output) the CUDA driver's."""
    count = torch.cuda.device_count()
    path = stores[0]
    for output in ("torch", "dlpack"):
        with pytest.raises(zarrstream.ConfigError, match=f"this machine has {count} .cuda:0 to"):
            zarrstream.Loader(path, "zstd_f32", device=f"cuda:{count}", output=output)
    current = torch.cuda.current_device()
    batch = next(iter(zarrstream.Loader(path, "zstd_f32", device="cuda", gpu_batches=True, batch_size=2)))
    assert batch["input"].device == torch.device("cuda", current)
    arrays = next(iter(zarrstream.Loader(path, "zstd_f32", device=f"cuda:{current}", output="dlpack",
                                         batch_size=2)))
    assert arrays["input"].device == f"cuda:{current}"
    assert arrays["input"].__dlpack_device__() == (2, current)  # kDLCUDA, the device


@pytest.mark.multi_gpu
def test_gpu_batches_on_another_device_equal_the_cpu_loaders(stores):
    """device="cuda:N" (a data-parallel rank's device): the batches live on device N and equal the
    CPU loader's; "cuda" under torch.cuda.device(N) is N too."""
    count = torch.cuda.device_count()
    if count < 2:
        pytest.skip(f"GPU test: a second device is needed, this machine has {count}")
    path = stores[0]
    names = _variables(path)
    common = dict(target_offset={"time": 1}, batch_size=3, seed=6)
    last = count - 1
    cpu = zarrstream.Loader(path, names, **common)
    gpu = zarrstream.Loader(path, names, device=f"cuda:{last}", gpu_batches=True, **common)
    assert next(iter(gpu))["input"].device == torch.device("cuda", last)
    _assert_same_batches(cpu, gpu)
    with torch.cuda.device(last):
        current = zarrstream.Loader(path, names, device="cuda", gpu_batches=True, **common)
    assert next(iter(current))["input"].device == torch.device("cuda", last)
    arrays = next(iter(zarrstream.Loader(path, names, device=f"cuda:{last}", output="dlpack", **common)))
    assert arrays["input"].device == f"cuda:{last}"
    assert arrays["input"].__dlpack_device__() == (2, last)


def _corrupt(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    (dst / "zstd_f32" / "c" / "5" / "1" / "1").write_bytes(b"\x28\xb5\x2f\xfd not a zstd frame")
    return dst


def test_a_corrupt_chunk_fails_with_the_cpu_error_or_is_skipped_alike(stores, tmp_path):
    bad = _corrupt(stores[0], tmp_path / "bad.zarr")
    gpu = zarrstream.Loader(bad, ["zstd_f32"], batch_size=4, shuffle="none", device="cuda", gpu_batches=True)
    with pytest.raises(zarrstream.CorruptChunkError) as e:
        for _ in gpu:
            pass
    assert "zstd_f32" in str(e.value) and "c/5/1/1" in str(e.value) and "time=5" in str(e.value)
    assert gpu.stats()["gpu_rejected_chunks"] >= 1

    common = dict(batch_size=4, shuffle="exact", on_error="skip", target_offset={"time": 1})
    cpu = zarrstream.Loader(bad, ["zstd_f32", "gzip_f64"], **common)
    gpu = zarrstream.Loader(bad, ["zstd_f32", "gzip_f64"], device="cuda", **common)
    _assert_same_batches(cpu, gpu, epochs=1)
    assert gpu.stats()["skipped_samples"] == cpu.stats()["skipped_samples"] > 0


def _deflate_span(kind: str, stored: bytes) -> tuple[int, int]:
    """Where the deflate stream of a zlib stream or gzip member lies in it."""
    if kind == "zlib":
        return 2, len(stored) - 4  # header, then Adler-32 (big-endian)
    assert stored[:4] == b"\x1f\x8b\x08\x00", "a gzip header without optional fields"
    return 10, len(stored) - 8  # header, then CRC-32 and ISIZE (little-endian)


def _flip_a_bit_keeping_the_size(kind: str, stored: bytes) -> bytes:
    """`stored` with one bit of its deflate data flipped such that the stream still decodes, whole,
    to as many bytes (others): only the checksum can tell."""
    start, end = _deflate_span(kind, stored)
    original = zlib.decompress(stored, wbits=15 if kind == "zlib" else 31)
    middle = (start + end) // 2
    for byte in [*range(middle, end), *range(start, middle)]:
        for bit in range(8):
            damaged = bytearray(stored)
            damaged[byte] ^= 1 << bit
            d = zlib.decompressobj(wbits=-15)
            try:
                out = d.decompress(bytes(damaged[start:end]))
            except zlib.error:
                continue
            if d.eof and not d.unused_data and len(out) == len(original) and out != original:
                return bytes(damaged)
    raise AssertionError(f"no single-bit flip of this {kind} stream keeps its size")


@pytest.fixture(scope="module")
def deflate_stores(stores, tmp_path_factory):
    """Copies of the stores with zlib (v2) and gzip (v3) arrays at level 0 (stored blocks: the
    chunk's bytes as they are) besides the level-5 ones (Huffman-coded literals)."""
    root = tmp_path_factory.mktemp("deflate")
    v3, v2 = shutil.copytree(stores[0], root / "v3.zarr"), shutil.copytree(stores[1], root / "v2.zarr")
    rng = np.random.default_rng(5)
    g3 = zarr.open_group(str(v3), mode="r+")
    a = g3.create_array("gzip0_f64", shape=(NT, NY, NX), chunks=(2, 9, 14), dtype="float64",
                        fill_value=0, dimension_names=DIMS, compressors=GzipCodec(level=0))
    a[...] = _field(rng, "float64")
    zarr.consolidate_metadata(str(v3))
    g2 = zarr.open_group(str(v2), mode="r+")
    a = g2.create_array("zlib0_f32", shape=(NT, NY, NX), chunks=(2, 5, 14), dtype="<f4", fill_value=0,
                        compressors=numcodecs.Zlib(level=0))
    a[...] = _field(rng, "float32")
    a.attrs["_ARRAY_DIMENSIONS"] = DIMS
    zarr.consolidate_metadata(str(v2))
    return v3, v2


def _corrupt_chunk_error(path: Path, name: str, **device) -> tuple[zarrstream.Loader, str]:
    loader = zarrstream.Loader(path, [name], batch_size=4, shuffle="none", **device)
    with pytest.raises(zarrstream.CorruptChunkError) as e:
        for _ in loader:
            pass
    return loader, str(e.value)


_DEFLATE_DAMAGE = [
    (store, name, key, kind, damage)
    for store, name, key, kind in [
        (0, "gzip_f64", "c/2/0/0", "gzip"),
        (0, "gzip0_f64", "c/2/0/0", "gzip"),
        (1, "zlib_f32", "2.1.0", "zlib"),
        (1, "zlib0_f32", "2.1.0", "zlib"),
    ]
    # zlib streams carry no size: only gzip's ISIZE can be damaged.
    for damage in ["deflate data", "checksum"] + (["gzip size"] if kind == "gzip" else [])
]


@pytest.mark.parametrize("store, name, key, kind, damage", _DEFLATE_DAMAGE)
def test_a_flipped_bit_that_keeps_the_size_fails_with_the_cpu_error(deflate_stores, store, name, key,
                                                                   kind, damage):
    """zlib's Adler-32 and gzip's CRC-32 (and ISIZE) are verified when the GPU decodes: a single bit
    flipped in the deflate data (the stream still decodes to the chunk's size) or in the trailer
    fails as the CPU loader fails, with its error naming the chunk."""
    path = deflate_stores[store]
    chunk = path / name / key
    stored = chunk.read_bytes()
    if damage == "deflate data":
        damaged = _flip_a_bit_keeping_the_size(kind, stored)
    else:
        damaged = bytearray(stored)
        damaged[{"checksum": -3 if kind == "zlib" else -7, "gzip size": -2}[damage]] ^= 0x10
    chunk.write_bytes(bytes(damaged))
    try:
        _, cpu_error = _corrupt_chunk_error(path, name)
        gpu, gpu_error = _corrupt_chunk_error(path, name, device="cuda", gpu_batches=True)
    finally:
        chunk.write_bytes(stored)
    assert gpu_error == cpu_error
    assert name in gpu_error and key in gpu_error, gpu_error
    assert "nvcompBatchedCRC32Async" not in gpu.gpu_decode_status  # gzip decoded on the GPU
    assert gpu.stats()["gpu_rejected_chunks"] >= 1


def test_released_batches_are_reused_only_after_the_consumers_stream(stores):
    """Work queued on a side stream reads each batch after the loader has moved on: the values it
    sees are still the batch's (the buffer waits for the consumer's stream before reuse)."""
    path = stores[0]
    names = ["zstd_f32", "gzip_f64"]
    cpu = zarrstream.Loader(path, names, batch_size=2, seed=4, prefetch=1)
    gpu = zarrstream.Loader(path, names, batch_size=2, seed=4, prefetch=1, device="cuda", gpu_batches=True)
    side = torch.cuda.Stream()
    copies = []
    with torch.cuda.stream(side):
        for batch in gpu:
            torch.cuda._sleep(20_000_000)  # keep the stream busy past the next batches
            copies.append(batch["input"].clone())
            del batch  # released while the stream still has to read it
    torch.cuda.synchronize()
    want = [b["input"] for b in cpu]
    assert len(copies) == len(want) > 3  # more batches than the pool's buffers
    for got, expected in zip(copies, want):
        assert torch.equal(_bits(got.cpu()), _bits(expected))


def test_dlpack_batches_feed_cupy_on_its_stream(stores):
    """output="dlpack": CuPy imports the GPU batches without a copy, on its own stream; a batch
    dropped while that stream still reads it keeps its values (the loader waits for the stream
    CuPy named in __dlpack__ before reusing the memory)."""
    cupy = pytest.importorskip("cupy")
    path = stores[0]
    names = ["zstd_f32", "gzip_f64"]
    cpu = zarrstream.Loader(path, names, batch_size=2, seed=4, prefetch=1)
    gpu = zarrstream.Loader(path, names, batch_size=2, seed=4, prefetch=1, device="cuda",
                            output="dlpack")
    side = cupy.cuda.Stream(non_blocking=True)
    copies = []
    with side:
        for batch in gpu:
            assert batch["input"].device == "cuda:0" and batch["origin"].device == "cpu"
            x = cupy.from_dlpack(batch["input"])
            assert x.data.ptr != 0 and x.shape == batch["input"].shape
            with torch.cuda.stream(torch.cuda.ExternalStream(side.ptr)):
                torch.cuda._sleep(20_000_000)  # keep CuPy's stream busy past the next batches
            copies.append(x.copy())  # queued behind the sleep
            del x, batch
    side.synchronize()
    want = [b["input"] for b in cpu]
    assert len(copies) == len(want) > 3
    for got, expected in zip(copies, want):
        assert np.array_equal(cupy.asnumpy(got).view(np.uint32), expected.numpy().view(np.uint32))


@pytest.mark.gpu
@pytest.mark.jax
def test_dlpack_batches_feed_jax(stores, monkeypatch):
    """output="dlpack": JAX imports the GPU batches (jax.dlpack.from_dlpack, which names its own
    stream in __dlpack__) onto its GPU, bit for bit the CPU loader's batches. make gpu-test runs it
    as its own step where JAX is installed."""
    # JAX would otherwise take 75 % of the GPU's memory at its first use, before the loader's.
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    pytest.importorskip("jax")
    import jax
    import jax.dlpack

    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    assert gpus, f"JAX sees no GPU here (its devices: {jax.devices()})"
    path = stores[0]
    names = ["zstd_f32", "gzip_f64"]
    cpu = zarrstream.Loader(path, names, batch_size=2, seed=4, prefetch=1)
    gpu = zarrstream.Loader(path, names, batch_size=2, seed=4, prefetch=1, device="cuda",
                            output="dlpack")
    got = []
    for batch in gpu:
        x = jax.dlpack.from_dlpack(batch["input"])
        assert x.devices() == {gpus[0]} and x.shape == batch["input"].shape
        got.append(np.asarray(x))
        del x, batch
    want = [b["input"].numpy() for b in cpu]
    assert len(got) == len(want) > 3
    for g, w in zip(got, want):
        assert np.array_equal(g.view(np.uint32), w.view(np.uint32))


@pytest.mark.parametrize("variant", [dict(zarr_format=2), dict(zarr_format=3, sharded=True)],
                         ids=["v2", "v3-sharded"])
def test_cf_decoded_batches_equal_the_cpu_for_every_dtype(tmp_path, variant):
    """Packed int16/uint8 variables with fill values, a float32 field with its own _FillValue
    (tests/era5_fixtures.py): decoded, masked, normalised and cast in the scatter kernel, bit for
    bit as on the CPU, and with decode_cf=False the stored integers alike."""
    import era5_fixtures

    path = era5_fixtures.cds_era5(tmp_path, **variant)
    names = ["t", "z", "t2m", "msl", "lsm", "sst"]
    stats_file = tmp_path / "stats.json"
    r = run_cli("stats", path, "--vars", ",".join(names), "--output", stats_file)
    assert r.returncode == 0, r.stderr
    for dtype in ["float32", "bfloat16", "float16"]:
        for extra in (dict(), dict(normalize=stats_file, nan=-3.0), dict(decode_cf=False)):
            common = dict(target_offset={"valid_time": 1}, batch_size=3, seed=2, dtype=dtype,
                          **extra)
            cpu = zarrstream.Loader(str(path), names, **common)
            gpu = zarrstream.Loader(str(path), names, device="cuda", gpu_batches=True, **common)
            _assert_same_batches(cpu, gpu, epochs=1)
            if "nan" in extra:
                assert next(iter(gpu))["input_mask"].any()
            # A shard's inner chunks are read straight into the pinned staging.
            assert (gpu.stats()["bytes_staged_without_copy"] > 0) == bool(variant.get("sharded"))


def test_windowed_boxes_of_wide_fields_scatter_like_the_cpu(tmp_path):
    """Boxes of more than one axis and rows wider than a warp (the small stores above have rows of
    at most 14): chunks 45 wide cut by longitude windows (rows of 45, of parts of it and of 10), a
    level axis, a big-endian float64 field and NaNs, and whole fields, equal to the CPU loader's
    batches bit for bit."""
    nt, ny, nx = 8, 11, 100
    levels = np.array([500, 850, 1000], dtype="int64")
    dims = ["time", "level", "latitude", "longitude"]
    g = zarr.open_group(str(tmp_path / "wide.zarr"), mode="w", zarr_format=3)
    coords = {"time": 6 * np.arange(nt, dtype="int64"), "level": levels,
              "latitude": np.linspace(90, -90, ny).astype("float32"),
              "longitude": np.arange(nx, dtype="float32") * (360 / nx)}
    for name, v in coords.items():
        a = g.create_array(name, shape=v.shape, chunks=v.shape, dtype=v.dtype, dimension_names=[name])
        a[...] = v
    g["time"].attrs.update({"units": "hours since 1979-01-01", "calendar": "proleptic_gregorian"})
    rng = np.random.default_rng(5)
    t = (250 + 30 * rng.standard_normal((nt, len(levels), ny, nx))).astype("float32")
    t[rng.random(t.shape) < 0.03] = np.nan
    a = g.create_array("t", shape=t.shape, chunks=(2, 2, 7, 45), dtype="float32", fill_value=0,
                       dimension_names=dims, compressors=ZstdCodec(level=1))
    a[...] = t
    z = 1000 * rng.standard_normal((nt, ny, nx))
    a = g.create_array("z", shape=z.shape, chunks=(1, ny, nx), dtype="float64", fill_value=0,
                       dimension_names=[dims[0], *dims[2:]], serializer=BytesCodec(endian="big"),
                       compressors=GzipCodec(level=1))
    a[...] = z
    zarr.consolidate_metadata(str(tmp_path / "wide.zarr"))
    path = str(tmp_path / "wide.zarr")
    for dtype, windows in [("float32", True), ("bfloat16", True), ("float32", False)]:
        common = dict(target_offset={"time": 1}, batch_size=3, seed=1, dtype=dtype, nan=-2.0)
        if windows:
            common.update(sample={"longitude": 70}, stride={"longitude": 13})
        cpu = zarrstream.Loader(path, ["t", "z"], **common)
        gpu = zarrstream.Loader(path, ["t", "z"], device="cuda", gpu_batches=True, **common)
        _assert_same_batches(cpu, gpu, epochs=1)
        assert gpu.stats()["gpu_decoded_chunks"] > 0


_SMALL_GRID_SCRIPT = """
import sys
sys.path.insert(0, sys.argv[1])
import zarrstream
from test_gpu_loader import _assert_same_batches, _variables
path = sys.argv[2]
common = dict(target_offset={"time": 1}, batch_size=3, seed=3, dtype="bfloat16", nan=-1.0)
cpu = zarrstream.Loader(path, _variables(path), **common)
gpu = zarrstream.Loader(path, _variables(path), device="cuda", gpu_batches=True, **common)
_assert_same_batches(cpu, gpu)
print("same batches")
"""


def test_grids_of_one_block_per_multiprocessor_make_the_same_batches(stores):
    """ZARRSTREAM_GPU_BLOCKS_PER_SM=1: each launch has one block per multiprocessor in all, so the
    kernels' blocks loop over boxes and over elements (paths a full grid rarely takes), and the
    batches are the CPU loader's bit for bit; a value out of range is an error naming it."""
    tests = str(Path(__file__).resolve().parent)
    for path in stores:
        env = dict(os.environ, ZARRSTREAM_GPU_BLOCKS_PER_SM="1")
        run = subprocess.run([sys.executable, "-c", _SMALL_GRID_SCRIPT, tests, str(path)], env=env,
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0 and "same batches" in run.stdout, run.stderr[-3000:]
    env = dict(os.environ, ZARRSTREAM_GPU_BLOCKS_PER_SM="0")
    run = subprocess.run([sys.executable, "-c", _SMALL_GRID_SCRIPT, tests, str(stores[0])], env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode != 0
    assert "ZARRSTREAM_GPU_BLOCKS_PER_SM='0': expected a whole number from 1 to 64" in run.stderr
