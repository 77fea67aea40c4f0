// libFuzzer target: declared shapes against small stored data. The parsers' targets see metadata
// documents alone; here the documents are well formed, but what they declare (shape, chunk shape,
// shard shape, any of them zero or near 2^64) meets a handful of stored chunks of any length, and
// regions of the array are read through Array::Read, as a user's read would go.
//
// Input (FuzzedDataProvider, front to back): flags (v2 or v3; sharded; F order for v2;
// missing chunks as errors), rank 0-4, data type, then per dimension the shape and the chunk (and
// inner chunk) extent, each small (0-127) or any 64-bit value; a region (start, extent per
// dimension, same encoding); up to four stored objects (grid coordinates, bytes), the rest of the
// input being their bytes. Every read must end in values or an error Status, never kInternal;
// memory is bounded by libFuzzer's -malloc_limit_mb (run_fuzzers.sh), so a declared size the
// library allocates for without checking it against what is stored is an out-of-memory report.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "store/memory_store.h"
#include "store/store_registry.h"
#include "zarrstream/array.h"
#include "zarrstream/data_type.h"

namespace {

using namespace zarrstream;

constexpr char kUrl[] = "memory://array_region_fuzzer";
// The most output one read may ask for: the region's bytes are allocated here, not by the library.
constexpr uint64_t kMaxRegionBytes = uint64_t{1} << 20;

// Small extents are what reads can succeed on; any 64-bit value is what overflow checks are for.
uint64_t TakeExtent(FuzzedDataProvider& in) {
  const uint8_t b = in.ConsumeIntegral<uint8_t>();
  if (b < 0xF0) return b % 16;
  if (b < 0xF8) return in.ConsumeIntegral<uint16_t>();
  return in.ConsumeIntegral<uint64_t>();
}

struct DataTypeCase {
  const char* v3;
  const char* v2;
  size_t size;
};
constexpr DataTypeCase kDataTypes[] = {
    {"uint8", "|u1", 1}, {"int16", "<i2", 2},     {"float32", "<f4", 4}, {"float64", ">f8", 8},
    {"bool", "|b1", 1},  {"complex64", "<c8", 8}, {"uint64", "<u8", 8},  {"float16", "<f2", 2},
};

std::string ChunkKey(bool v3, const std::vector<uint64_t>& coords) {
  std::string key = v3 ? "c" : "";
  for (size_t d = 0; d < coords.size(); ++d) {
    if (v3 || d > 0) key += v3 ? "/" : ".";
    key += std::to_string(coords[d]);
  }
  if (!v3 && coords.empty()) key = "0";
  return key;
}

void ClearStore(MemoryStore& store) {
  auto keys = store.List("");
  if (!keys.ok()) fuzz::FuzzFail("MemoryStore::List", keys.status());
  for (const KeyInfo& k : *keys) {
    if (Status s = store.Delete(k.key); !s.ok()) fuzz::FuzzFail("MemoryStore::Delete", s);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  static std::shared_ptr<MemoryStore> store = [] {
    auto opened = OpenStore(kUrl);
    if (!opened.ok()) fuzz::FuzzFail("OpenStore", opened.status());
    return std::static_pointer_cast<MemoryStore>(*opened);
  }();
  ClearStore(*store);

  const uint8_t flags = in.ConsumeIntegral<uint8_t>();
  const bool v3 = flags & 1;
  const bool sharded = v3 && (flags & 2);
  const bool fortran_order = !v3 && (flags & 4);
  const size_t rank = in.ConsumeIntegralInRange<size_t>(0, 4);
  const DataTypeCase& dtype = in.PickValueInArray(kDataTypes);

  std::vector<uint64_t> shape(rank), chunks(rank), inner(rank);
  for (size_t d = 0; d < rank; ++d) {
    shape[d] = TakeExtent(in);
    chunks[d] = TakeExtent(in);
    if (sharded) inner[d] = TakeExtent(in);
  }

  nlohmann::json meta;
  if (v3) {
    nlohmann::json bytes = {{"name", "bytes"}, {"configuration", {{"endian", "little"}}}};
    nlohmann::json codecs = nlohmann::json::array({bytes});
    if (sharded) {
      codecs = nlohmann::json::array(
          {{{"name", "sharding_indexed"},
            {"configuration",
             {{"chunk_shape", inner},
              {"codecs", nlohmann::json::array({bytes})},
              {"index_codecs", nlohmann::json::array({bytes, {{"name", "crc32c"}}})},
              {"index_location", (flags & 8) ? "start" : "end"}}}}});
    }
    meta = {{"zarr_format", 3},
            {"node_type", "array"},
            {"shape", shape},
            {"data_type", dtype.v3},
            {"chunk_grid", {{"name", "regular"}, {"configuration", {{"chunk_shape", chunks}}}}},
            {"chunk_key_encoding", {{"name", "default"}}},
            {"fill_value", 0},
            {"codecs", codecs}};
  } else {
    meta = {{"zarr_format", 2},
            {"shape", shape},
            {"chunks", chunks},
            {"dtype", dtype.v2},
            {"compressor", nullptr},
            {"fill_value", 0},
            {"order", fortran_order ? "F" : "C"},
            {"filters", nullptr}};
    if (std::string(dtype.v2) == "|b1") meta["fill_value"] = false;
  }
  if (Status s = store->Put(v3 ? "zarr.json" : ".zarray", meta.dump()); !s.ok()) {
    fuzz::FuzzFail("MemoryStore::Put", s);
  }

  std::vector<uint64_t> start(rank), extent(rank);
  for (size_t d = 0; d < rank; ++d) {
    start[d] = TakeExtent(in);
    extent[d] = TakeExtent(in);
  }

  const size_t num_objects = in.ConsumeIntegralInRange<size_t>(0, 4);
  for (size_t i = 0; i < num_objects && in.remaining_bytes() > 0; ++i) {
    std::vector<uint64_t> coords(rank);
    for (uint64_t& c : coords) c = in.ConsumeIntegralInRange<uint64_t>(0, 3);
    const std::string value = in.ConsumeRandomLengthString(4096);
    if (Status s = store->Put(ChunkKey(v3, coords), value); !s.ok()) {
      fuzz::FuzzFail("MemoryStore::Put", s);
    }
  }

  OpenOptions options;
  options.missing_chunks_are_errors = flags & 16;
  auto array = Array::Open(kUrl, options);
  if (!array.ok()) {
    fuzz::CheckNotInternal(array.status(), "Array::Open");
    return 0;
  }

  // The region's bytes, when they fit the bound; a region past the array's end must be refused
  // whatever its size, so such a read is made with a one-element buffer it must never touch.
  uint64_t region_bytes = dtype.size;
  bool fits = true;
  for (uint64_t e : extent) {
    if (e != 0 && region_bytes > kMaxRegionBytes / e) fits = false;
    region_bytes *= fits ? e : 1;
  }
  bool inside = true;
  for (size_t d = 0; d < rank; ++d) {
    inside &= start[d] <= shape[d] && extent[d] <= shape[d] - start[d];
  }
  if (!fits && inside) return 0;
  fuzz::GuardedBuffer out(fits ? region_bytes : 0);
  Status read = array->Read(start, extent, out.span().data());
  out.CheckGuard("Array::Read wrote past its region");
  if (!read.ok()) fuzz::CheckNotInternal(read, "Array::Read");
  if (read.ok() && !inside) fuzz::FuzzFail("Array::Read accepted a region past the array's end");
  return 0;
}
