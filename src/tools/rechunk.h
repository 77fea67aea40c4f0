// Rechunk / transcode: copy a Zarr array or group (v2 or v3) into a Zarr v3 layout chosen for
// training reads: new chunk and shard shapes by dimension name, another codec, a subset of
// variables, a label-based selection, and optionally every variable and level stacked into one
// (time, channel, ...) array.
//
// How the work is cut. Each output array is divided into slabs: boxes made of whole output
// stored objects (shards, or chunks when not sharded), grown along a dimension when that lets a
// source chunk be decoded once instead of once per output object (and the slab still fits the
// memory budget). A slab is read from the source into one buffer and written with Array::Write,
// which encodes whole objects without reading them back. Slabs are the unit of parallelism, of
// partitioning (`part_count` > 1: the job's slabs, array after array, are cut into runs of about
// equal bytes and part i takes the i-th, so parts write disjoint stored objects and can run on
// different machines against one destination) and of resumption (a part records finished slabs
// under `.zarrstream-rechunk/` in the destination; a rerun with the same options skips them; a
// stored object is replaced atomically, so an interrupted run never leaves a torn chunk or shard).
// When the last part finishes, the group's metadata is consolidated, temporary objects of killed
// writes are removed and the progress records give way to a record of the finished job's plan: a
// rerun with the same options (a requeued batch job) then returns at once, and one with other
// options is refused.
//
// Memory: at most `max(1, memory_limit_bytes / slab_bytes)` slabs are in flight (capped by the
// thread count), each holding one decoded slab buffer; on top, each decoding or encoding thread
// keeps scratch for one stored object (a source chunk, an output chunk or shard: encoded and
// decoded). RechunkReport::memory_bound_bytes states the sum for the run; slabs grow to cover
// source chunks only while a slab stays under a quarter of the budget, so a small budget trades
// re-decoding source chunks (reported as read amplification) for memory.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "zarrstream/status.h"

namespace zarrstream::tools {

// The --gpu-friendly preset: the layout the GPU decode path reads fastest, from the nvCOMP
// measurements in docs/benchmarks.md ("GPU decode by codec and chunk size", "The GPU-friendly
// codec for training"): blosc-lz4 with byte shuffle (nvCOMP decodes it faster than blosc-zstd
// with no scratch memory, the CPU twice as fast, for 4-11 % more bytes), one 2-D field per
// chunk, one time step per shard. Dimensions a dataset lacks are skipped; options given
// explicitly win.
inline constexpr const char* kGpuFriendlyChunks = "time=1,level=1,channel=1";
inline constexpr const char* kGpuFriendlyShards = "level=all,channel=all";
inline constexpr const char* kGpuFriendlyCodec = "blosc:lz4:5:shuffle";

// "time=1,level=all" → {{"time", 1}, {"level", kWholeDimension}}. Values are positive integers
// or "all" (the dimension's full extent); names are unique.
inline constexpr uint64_t kWholeDimension = ~uint64_t{0};
Result<std::vector<std::pair<std::string, uint64_t>>> ParseDimSizes(std::string_view spec);

// The most parts a rechunk job may be cut into (each run reads every part's progress record).
inline constexpr uint32_t kMaxRechunkParts = uint32_t{1} << 16;

struct RechunkOptions {
  std::string source_url;
  // An Icechunk repository's branch, tag or snapshot id to copy ("": branch main).
  std::string source_ref;
  std::string dest_url;
  // Read-chunk extent per named dimension; dimensions not named keep their full extent. Empty:
  // keep the source's read chunks (stacked arrays: time=1, channel=1).
  std::vector<std::pair<std::string, uint64_t>> chunks;
  // Shard extent per named dimension (a multiple of the chunk extent); dimensions not named keep
  // the chunk extent. Empty: no sharding. An array whose shard would be one chunk is not sharded.
  std::vector<std::pair<std::string, uint64_t>> shards;
  // The compressor in ArraySpec's short form ("zstd:3", "lz4", "blosc:lz4:5:shuffle", "none").
  // Empty: zstd:3, or the preset's.
  std::string codec;
  // Fill what `chunks`, `shards` and `codec` leave empty from the --gpu-friendly preset.
  bool gpu_friendly = false;
  // Variables to copy (default: every data variable of the group). With `stack_name`, channel
  // specs ("temperature@500,850", "2m_temperature").
  std::vector<std::string> variables;
  // Label selections "dim=lo:hi" (inclusive, like xarray's .sel(slice(lo, hi))); CF times as
  // dates ("time=1979-01-01:2015-12-31").
  std::vector<std::string> selections;
  // When set, the variables (and their levels) are stacked into one array of this name with a
  // "channel" dimension after time, whose "channel_names" attribute names each channel.
  std::string stack_name;
  // Threads decoding and encoding (0: all cores).
  size_t threads = 0;
  // Budget for slab buffers in flight.
  uint64_t memory_limit_bytes = uint64_t{2} << 30;
  // This run's part of the job: part_index in [0, part_count), part_count at most
  // kMaxRechunkParts.
  uint32_t part_index = 0;
  uint32_t part_count = 1;
  // Replace whatever is at the destination (single-part runs only).
  bool overwrite = false;
  // Keep this run's slab buffers in the process for the next run (an engine worker running part
  // after part) instead of freeing them on return: up to the run's in-flight slabs stay allocated,
  // at most memory_limit_bytes (or one slab, when a slab exceeds it), until a run without this
  // option returns.
  bool keep_slab_buffers = false;
  // Called after each slab with the bytes done and total for this part (decoded output bytes),
  // from worker threads, one call at a time.
  std::function<void(uint64_t done_bytes, uint64_t total_bytes)> on_progress;
  // When not null and it becomes true (it may be set from a signal handler: it is lock-free), no
  // further slab starts; the slabs in flight finish, the progress record is saved and Rechunk
  // returns a report with `interrupted` set. A rerun with the same options resumes. Must outlive
  // the Rechunk call.
  const std::atomic<bool>* interrupt = nullptr;
};

struct RechunkReport {
  size_t arrays = 0;                  // output arrays (data arrays and coordinates)
  size_t slabs_total = 0;             // this part's slabs
  size_t slabs_resumed = 0;           // found finished by an earlier run and skipped
  size_t slabs_written = 0;           // written by this run
  uint64_t output_bytes = 0;          // decoded bytes this run wrote
  uint64_t source_bytes_decoded = 0;  // decoded source-chunk bytes this run's reads touched
  // Data in flight at most: slab buffers plus per-thread codec scratch (see the overview).
  uint64_t memory_bound_bytes = 0;
  // Members of the source not copied, each with why ("name: Zarr v3 has no data type for ...").
  std::vector<std::string> skipped_arrays;
  bool job_complete = false;  // every part finished; metadata consolidated
  bool interrupted = false;   // stopped early by RechunkOptions::interrupt; progress saved
  // Source bytes decoded per output byte (1.0 when slabs cover source chunks exactly).
  double read_amplification() const {
    return output_bytes ? static_cast<double>(source_bytes_decoded) / output_bytes : 0.0;
  }
};

// Runs this part of the rechunk job. Errors name the source or destination array and the slab
// (and the stored object, for a failed write such as a full disk); the progress of the slabs that
// finished is saved before an error returns, so a rerun with the same options resumes after them.
Result<RechunkReport> Rechunk(const RechunkOptions& options);

// Finishes a job whose `options.part_count` parts have all completed (run with these options):
// consolidates the metadata and leaves the finished record, as the last part to finish does. For
// runners that run the parts and then finish the job once, and to rerun a finish that failed.
// Copies nothing; the part index is not used. A job already finished returns `job_complete` at
// once; parts not completed are an error naming them.
Result<RechunkReport> FinishRechunk(const RechunkOptions& options);

}  // namespace zarrstream::tools
