// libFuzzer target: the loader's option space. A small ERA5-like dataset (coordinates, a 4-D
// variable with levels, a 3-D variable, a forcing; some NaNs; chunks that do not divide the
// shapes; uncompressed and zstd) is written once into a memory store; each input picks
// LoaderOptions (variables and level specs, forcings, targets and offsets, windows, strides,
// selections, shuffle mode and block sizes, batch size, ranks, dtype, NaN policy, prefetch,
// threads, cache size), opens a zarrstream::Loader over it and pulls a few batches, across an
// epoch boundary and a save/restore of its position.
//
// Every outcome must be batches or an error Status (never kInternal), batches must be the shape
// the loader announced, and nothing may crash, race (run the target under TSan too) or leak.
// Options are bounded (windows, batch sizes, threads, prefetch) so that one input runs in
// milliseconds.
#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "zarrstream/array.h"
#include "zarrstream/loader.h"

namespace {

using namespace zarrstream;

constexpr char kUrl[] = "memory://loader_options_fuzzer";
constexpr uint64_t kTimes = 9, kLevels = 3, kLat = 3, kLon = 5;

void Check(const Status& status, const char* what) {
  if (!status.ok()) fuzz::FuzzFail(what, status);
}

template <typename T>
void AddArray(const Group& group, const std::string& name, DataType dtype,
              std::vector<uint64_t> shape, std::vector<uint64_t> chunks,
              std::vector<std::string> dims, const std::vector<T>& values, const char* compressor,
              const std::string& attributes = "{}") {
  ArraySpec spec;
  spec.shape = shape;
  spec.dtype = dtype;
  spec.chunks = std::move(chunks);
  spec.compressor = compressor;
  spec.dims = std::move(dims);
  spec.attributes_json = attributes;
  auto array = group.CreateArray(name, spec);
  if (!array.ok()) fuzz::FuzzFail("CreateArray", array.status());
  const std::vector<uint64_t> start(shape.size(), 0);
  Check(array->Write(start, shape, values.data()), "Array::Write");
}

void WriteDataset() {
  auto group = Group::Create(kUrl);
  if (!group.ok()) fuzz::FuzzFail("Group::Create", group.status());
  std::vector<int64_t> hours;
  for (uint64_t t = 0; t < kTimes; ++t) hours.push_back(static_cast<int64_t>(6 * t));
  AddArray<int64_t>(*group, "time", DataType::kInt64, {kTimes}, {kTimes}, {"time"}, hours, "none",
                    R"({"units": "hours since 2000-01-01", "calendar": "standard"})");
  AddArray<int32_t>(*group, "level", DataType::kInt32, {kLevels}, {kLevels}, {"level"},
                    {500, 850, 1000}, "none");
  AddArray<float>(*group, "latitude", DataType::kFloat32, {kLat}, {kLat}, {"latitude"},
                  {10, 0, -10}, "none");
  AddArray<float>(*group, "longitude", DataType::kFloat32, {kLon}, {kLon}, {"longitude"},
                  {0, 72, 144, 216, 288}, "none");
  std::vector<float> temperature;
  for (uint64_t i = 0; i < kTimes * kLevels * kLat * kLon; ++i) {
    temperature.push_back(i % 17 == 3 ? std::numeric_limits<float>::quiet_NaN()
                                      : static_cast<float>(i));
  }
  AddArray<float>(*group, "temperature", DataType::kFloat32, {kTimes, kLevels, kLat, kLon},
                  {2, 2, kLat, 2}, {"time", "level", "latitude", "longitude"}, temperature,
                  "zstd:1");
  std::vector<double> t2m(kTimes * kLat * kLon);
  for (size_t i = 0; i < t2m.size(); ++i) t2m[i] = -static_cast<double>(i);
  AddArray<double>(*group, "t2m", DataType::kFloat64, {kTimes, kLat, kLon}, {4, 2, kLon},
                   {"time", "latitude", "longitude"}, t2m, "none");
  std::vector<float> tisr(kTimes * kLat * kLon, 1.0F);
  AddArray<float>(*group, "tisr", DataType::kFloat32, {kTimes, kLat, kLon}, {kTimes, kLat, kLon},
                  {"time", "latitude", "longitude"}, tisr, "zstd:1");
}

constexpr const char* kVariables[] = {
    "temperature@500,850", "temperature@*",    "t2m",  "temperature@1000", "temperature",
    "temperature@700",     "no_such_variable", "tisr", "t2m@500",          ""};
constexpr const char* kSelections[] = {"time=2000-01-01:2000-01-02",
                                       "latitude=10:0",
                                       "longitude=72:216",
                                       "level=500",
                                       "time=garbage",
                                       "latitude=0:10",
                                       "longitude=300:400",
                                       "time=2000-01-03",
                                       "latitude=10:10",
                                       "nope=1:2"};
constexpr const char* kSampleDims[] = {"time", "latitude", "longitude", "level", "valid_time"};
constexpr const char* kShuffles[] = {"none", "exact", "block", "blocks"};

std::vector<std::string> Pick(FuzzedDataProvider& in, const auto& list, size_t max) {
  std::vector<std::string> out(in.ConsumeIntegralInRange<size_t>(0, max));
  for (std::string& s : out) s = in.PickValueInArray(list);
  return out;
}

std::vector<std::pair<std::string, uint64_t>> PickWindows(FuzzedDataProvider& in) {
  std::vector<std::pair<std::string, uint64_t>> out(in.ConsumeIntegralInRange<size_t>(0, 2));
  for (auto& [dim, n] : out) {
    dim = in.PickValueInArray(kSampleDims);
    n = in.ConsumeBool() ? in.ConsumeIntegralInRange<uint64_t>(0, 10)
                         : in.ConsumeIntegral<uint64_t>();
  }
  return out;
}

size_t Product(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

// A delivered batch must be the loader's announced shape, batch dimension excepted.
void CheckBatch(const Loader& loader, const Batch& batch) {
  const LoaderOptions& o = loader.options();
  if (batch.size() > o.batch_size) fuzz::FuzzFail("batch larger than batch_size");
  std::vector<int64_t> input = loader.input_shape();
  input[0] = static_cast<int64_t>(batch.size());
  if (batch.input().shape != input) fuzz::FuzzFail("input shape differs from input_shape()");
  if (batch.input().data.size() != Product(input) * BatchDTypeSize(o.dtype)) {
    fuzz::FuzzFail("input bytes differ from its shape");
  }
  if (batch.origins().shape.size() != 2 ||
      batch.origins().shape[1] != static_cast<int64_t>(loader.sample_dims().size())) {
    fuzz::FuzzFail("origins shape differs from sample_dims()");
  }
  if (!o.fill_nan && !batch.input_mask().shape.empty()) fuzz::FuzzFail("mask without fill_nan");
}

// Pulls up to `n` batches; false once the epoch ends or a batch fails.
bool Pull(Loader& loader, int n) {
  for (int i = 0; i < n; ++i) {
    auto batch = loader.Next();
    if (!batch.ok()) {
      fuzz::CheckNotInternal(batch.status(), "Loader::Next");
      return false;
    }
    if (!batch->has_value()) return false;
    CheckBatch(loader, ***batch);
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool written = (WriteDataset(), true);
  (void)written;
  FuzzedDataProvider in(data, size);

  LoaderOptions o;
  o.variables = Pick(in, kVariables, 3);
  o.forcings = Pick(in, kVariables, 1);
  o.target_variables = Pick(in, kVariables, 2);
  o.sample = PickWindows(in);
  o.stride = PickWindows(in);
  if (in.ConsumeBool()) {
    o.target_dim = in.PickValueInArray(kSampleDims);
    o.target_offsets.resize(in.ConsumeIntegralInRange<size_t>(0, 3));
    for (uint64_t& t : o.target_offsets) {
      t = in.ConsumeBool() ? in.ConsumeIntegralInRange<uint64_t>(0, 10)
                           : in.ConsumeIntegral<uint64_t>();
    }
  }
  // Selections and the shuffle mode arrive as the command line's text and take its parsers.
  auto select = ParseLabelSelections(Pick(in, kSelections, 2));
  if (!select.ok()) {
    fuzz::CheckNotInternal(select.status(), "ParseLabelSelections");
    return 0;
  }
  o.select = std::move(*select);
  auto shuffle = ParseShuffleMode(in.PickValueInArray(kShuffles));
  if (!shuffle.ok()) {
    fuzz::CheckNotInternal(shuffle.status(), "ParseShuffleMode");
    return 0;
  }
  o.shuffle = *shuffle;
  o.seed = in.ConsumeIntegral<uint64_t>();
  o.block_chunks = in.ConsumeIntegralInRange<uint64_t>(0, 4);
  o.block_window = in.ConsumeIntegralInRange<uint64_t>(0, 5);
  o.batch_size = in.ConsumeIntegralInRange<uint64_t>(0, 6);
  o.world_size = in.ConsumeIntegralInRange<uint32_t>(0, 3);
  o.rank = in.ConsumeIntegralInRange<uint32_t>(0, 3);
  o.drop_last = in.ConsumeBool();
  o.dtype =
      in.PickValueInArray({BatchDType::kFloat32, BatchDType::kBFloat16, BatchDType::kFloat16});
  o.fill_nan = in.ConsumeBool();
  o.nan_fill = in.ConsumeFloatingPoint<double>();
  o.skip_bad_samples = in.ConsumeBool();
  o.pin_memory = PinMemory::kOff;  // no CUDA driver probing per input
  o.prefetch = in.ConsumeIntegralInRange<size_t>(0, 3);
  o.num_threads = in.ConsumeIntegralInRange<size_t>(1, 3);
  o.cache_bytes = in.PickValueInArray({uint64_t{1}, uint64_t{4096}, uint64_t{1} << 20});
  o.missing_chunks_are_errors = in.ConsumeBool();
  o.record_timeline = in.ConsumeBool();
  const int pulls = in.ConsumeIntegralInRange<int>(1, 3);
  const bool restore = in.ConsumeBool();

  auto opened = Loader::Open(kUrl, o);
  if (!opened.ok()) {
    fuzz::CheckNotInternal(opened.status(), "Loader::Open");
    return 0;
  }
  Loader& loader = *opened;
  if (loader.num_batches() > 0 && loader.input_shape().empty()) fuzz::FuzzFail("no input shape");
  Pull(loader, pulls);
  const std::string state = loader.StateJson();
  if (restore) {
    loader.StartNextEpoch();
    Pull(loader, 1);
    Check(loader.RestoreStateJson(state), "Loader::RestoreStateJson of its own StateJson");
  }
  Pull(loader, 1);
  (void)loader.stats();
  (void)loader.Timeline();
  return 0;
}
