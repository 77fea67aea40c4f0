#include "tools/synth_dataset.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

#include "dataset/cf_time.h"
#include "store/store_registry.h"
#include "tools/zarr_v2_writer.h"
#include "util/thread_pool.h"
#include "zarrstream/array.h"

namespace zarrstream::tools {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int64_t kStepHours = 6;
constexpr uint64_t kNumLevels = kEra5PressureLevelsHpa.size();

// Chunking per preset. A chunk should hold at least ~1 MB where the grid allows it (object count
// and per-request overhead) and stay small enough to decode quickly and read selectively:
//   era5-small: a level field is 8 KB, so a chunk holds all 13 levels of a time step (106 KB);
//     shards hold a week of time steps.
//   era5-1deg: a level field is 260 KB; all 13 levels make a 3.4 MB chunk; shards hold two days
//     (27 MB for the pressure-level variables).
//   era5: a level field is 4.15 MB, already a good chunk; 13 levels would be 54 MB and make
//     reading a few levels ("temperature@500,850") decode all of them. Shards hold a day of one
//     level (16.6 MB), so a level selection reads only its own shards.
constexpr SynthPreset kPresets[] = {
    {"era5-small",
     {32, 64, /*includes_poles=*/false},
     84,
     13,
     28,
     13,
     "5.625° grid (32x64, WeatherBench2's pole-less cell centres), 3 weeks: ~50 MB of float32"},
    {"era5-1deg",
     {181, 360, /*includes_poles=*/true},
     360,
     13,
     8,
     13,
     "1° grid (181x360), 90 days: ~6.9 GB of float32"},
    {"era5",
     {721, 1440, /*includes_poles=*/true},
     124,
     1,
     4,
     1,
     "0.25° grid (721x1440, ERA5's own), 31 days: ~38 GB of float32"},
};

constexpr std::string_view kLayoutNames[] = {"v3-zstd", "v3-sharded", "wb2"};

// WeatherBench2's compressor: numcodecs Blosc(cname="lz4", clevel=5, shuffle=SHUFFLE).
const json& Wb2Compressor() {
  static const json compressor = {
      {"id", "blosc"}, {"cname", "lz4"}, {"clevel", 5}, {"shuffle", 1}, {"blocksize", 0}};
  return compressor;
}

json VariableAttributes(const Era5VariableInfo& info) {
  return {
      {"units", info.units}, {"long_name", info.long_name}, {"standard_name", info.standard_name}};
}

// One data variable being written: where its stored objects go and how big they are.
struct DataArray {
  const Era5VariableInfo* info = nullptr;
  std::optional<Array> v3;
  std::optional<V2ArrayWriter> v2;
  uint64_t steps_per_object = 1;   // unused for static variables
  uint64_t levels_per_object = 1;  // pressure-level variables only
};

// One stored object (chunk or shard) of one data variable.
struct Task {
  size_t array = 0;
  uint64_t first_step = 0;
  uint64_t num_steps = 1;
  uint64_t first_level = 0;
  uint64_t num_levels = 1;
};

std::vector<uint64_t> DimsShape(const Era5VariableInfo& info, const Era5Grid& grid, uint64_t steps,
                                uint64_t levels) {
  switch (info.kind) {
    case Era5VariableKind::kSurface:
      return {steps, grid.num_latitudes, grid.num_longitudes};
    case Era5VariableKind::kPressureLevel:
      return {steps, levels, grid.num_latitudes, grid.num_longitudes};
    case Era5VariableKind::kStatic:
      break;
  }
  return {grid.num_latitudes, grid.num_longitudes};
}

std::vector<std::string> DimNames(const Era5VariableInfo& info) {
  switch (info.kind) {
    case Era5VariableKind::kSurface:
      return {"time", "latitude", "longitude"};
    case Era5VariableKind::kPressureLevel:
      return {"time", "level", "latitude", "longitude"};
    case Era5VariableKind::kStatic:
      break;
  }
  return {"latitude", "longitude"};
}

// Where a task's region starts in its array.
std::vector<uint64_t> TaskStart(const Era5VariableInfo& info, const Task& task) {
  switch (info.kind) {
    case Era5VariableKind::kSurface:
      return {task.first_step, 0, 0};
    case Era5VariableKind::kPressureLevel:
      return {task.first_step, task.first_level, 0, 0};
    case Era5VariableKind::kStatic:
      break;
  }
  return {0, 0};
}

// The coordinate arrays, as (name, dtype, values as bytes, attributes).
struct Coordinate {
  std::string name;
  DataType dtype;
  std::vector<std::byte> values;
  json attributes;
  uint64_t size() const { return values.size() / DataTypeSize(dtype); }
};

template <typename T>
std::vector<std::byte> AsBytes(const std::vector<T>& values) {
  const auto* begin = reinterpret_cast<const std::byte*>(values.data());
  return {begin, begin + values.size() * sizeof(T)};
}

std::vector<Coordinate> MakeCoordinates(const Era5Grid& grid, int64_t start_hours, uint64_t steps) {
  std::vector<int64_t> time(steps);
  for (uint64_t t = 0; t < steps; ++t) time[t] = start_hours + kStepHours * static_cast<int64_t>(t);
  const std::vector<int64_t> level(kEra5PressureLevelsHpa.begin(), kEra5PressureLevelsHpa.end());
  std::vector<float> latitude(grid.num_latitudes), longitude(grid.num_longitudes);
  for (size_t i = 0; i < latitude.size(); ++i) latitude[i] = static_cast<float>(grid.latitude(i));
  for (size_t j = 0; j < longitude.size(); ++j) {
    longitude[j] = static_cast<float>(grid.longitude(j));
  }
  return {
      {"time",
       DataType::kInt64,
       AsBytes(time),
       {{"units", "hours since 1900-01-01 00:00:00"},
        {"calendar", "proleptic_gregorian"},
        {"long_name", "time"},
        {"standard_name", "time"}}},
      {"level",
       DataType::kInt64,
       AsBytes(level),
       {{"units", "hPa"}, {"long_name", "pressure level"}, {"standard_name", "air_pressure"}}},
      {"latitude",
       DataType::kFloat32,
       AsBytes(latitude),
       {{"units", "degrees_north"}, {"long_name", "latitude"}, {"standard_name", "latitude"}}},
      {"longitude",
       DataType::kFloat32,
       AsBytes(longitude),
       {{"units", "degrees_east"}, {"long_name", "longitude"}, {"standard_name", "longitude"}}},
  };
}

// Floats get NaN, as WeatherBench2's; integers (coordinates) zero in v3 (which needs one) and
// null in v2, so that xarray masks nothing.
json FillValue(DataType dtype, SynthLayout layout) {
  if (IsFloatingPoint(dtype)) return "NaN";
  return layout == SynthLayout::kWb2 ? json(nullptr) : json(0);
}

// Creates the group, the coordinates (written) and the data variables (empty) for a v3 layout.
Result<std::vector<DataArray>> CreateV3(const SynthOptions& options, const SynthPreset& preset,
                                        const json& group_attributes,
                                        const std::vector<Coordinate>& coordinates,
                                        uint64_t steps) {
  // Tasks are the parallelism: each write runs inline on its task's thread.
  OpenOptions open;
  open.num_threads = 1;
  CreateOptions create;
  create.overwrite = options.overwrite;
  ZS_ASSIGN_OR_RETURN(Group group,
                      Group::Create(options.dest_url, group_attributes.dump(), create, open));
  for (const Coordinate& c : coordinates) {
    ArraySpec spec;
    spec.shape = {c.size()};
    spec.chunks = {c.size()};
    spec.dtype = c.dtype;
    spec.compressor = "zstd:3";
    spec.dims = {c.name};
    spec.fill_value_json = FillValue(c.dtype, options.layout).dump();
    spec.attributes_json = c.attributes.dump();
    ZS_ASSIGN_OR_RETURN(Array array, group.CreateArray(c.name, spec));
    const std::vector<uint64_t> start = {0}, shape = {c.size()};
    ZS_RETURN_IF_ERROR(array.Write(start, shape, c.values.data()));
  }
  const bool sharded = options.layout == SynthLayout::kV3Sharded;
  std::vector<DataArray> arrays;
  for (const Era5VariableInfo& info : Era5Variables()) {
    DataArray a;
    a.info = &info;
    a.steps_per_object = sharded ? std::min(preset.shard_steps, steps) : 1;
    a.levels_per_object = sharded ? preset.shard_levels : preset.levels_per_chunk;
    ArraySpec spec;
    spec.shape = DimsShape(info, preset.grid, steps, kNumLevels);
    spec.dtype = DataType::kFloat32;
    spec.compressor = "zstd:3";
    spec.dims = DimNames(info);
    spec.fill_value_json = FillValue(spec.dtype, options.layout).dump();
    spec.attributes_json = VariableAttributes(info).dump();
    if (sharded && info.kind != Era5VariableKind::kStatic) {
      spec.chunks = DimsShape(info, preset.grid, 1, 1);
      spec.shard_shape = DimsShape(info, preset.grid, a.steps_per_object, a.levels_per_object);
    } else {
      spec.chunks = DimsShape(info, preset.grid, 1, a.levels_per_object);
    }
    ZS_ASSIGN_OR_RETURN(Array array, group.CreateArray(info.name, spec));
    a.v3.emplace(std::move(array));
    arrays.push_back(std::move(a));
  }
  return arrays;
}

// The same for the wb2 layout (Zarr v2), written through the store.
Result<std::vector<DataArray>> CreateWb2(const std::shared_ptr<Store>& store,
                                         const SynthOptions& options, const SynthPreset& preset,
                                         const json& group_attributes,
                                         const std::vector<Coordinate>& coordinates,
                                         uint64_t steps) {
  if (options.overwrite) {
    ZS_ASSIGN_OR_RETURN(std::vector<KeyInfo> keys, store->List(""));
    for (const KeyInfo& key : keys) ZS_RETURN_IF_ERROR(store->Delete(key.key));
  }
  ZS_RETURN_IF_ERROR(WriteV2Group(*store, "", group_attributes));
  for (const Coordinate& c : coordinates) {
    V2ArraySpec spec;
    spec.shape = {c.size()};
    spec.chunks = {c.size()};
    spec.dtype = c.dtype;
    spec.compressor = Wb2Compressor();
    spec.fill_value = FillValue(c.dtype, options.layout);
    spec.dims = {c.name};
    spec.attributes = c.attributes;
    ZS_ASSIGN_OR_RETURN(V2ArrayWriter writer, V2ArrayWriter::Create(store, c.name, spec));
    const uint64_t origin[] = {0};
    ZS_RETURN_IF_ERROR(writer.WriteChunk(origin, c.values));
  }
  std::vector<DataArray> arrays;
  for (const Era5VariableInfo& info : Era5Variables()) {
    DataArray a;
    a.info = &info;
    a.levels_per_object = kNumLevels;
    V2ArraySpec spec;
    spec.shape = DimsShape(info, preset.grid, steps, kNumLevels);
    spec.chunks = DimsShape(info, preset.grid, 1, kNumLevels);
    spec.dtype = DataType::kFloat32;
    spec.compressor = Wb2Compressor();
    spec.fill_value = FillValue(spec.dtype, options.layout);
    spec.dims = DimNames(info);
    spec.attributes = VariableAttributes(info);
    ZS_ASSIGN_OR_RETURN(V2ArrayWriter writer,
                        V2ArrayWriter::Create(store, std::string(info.name), spec));
    a.v2.emplace(std::move(writer));
    arrays.push_back(std::move(a));
  }
  return arrays;
}

// A stored object per task, ordered by time so that an interrupted run has written a prefix of
// the time axis for every variable.
std::vector<Task> MakeTasks(const std::vector<DataArray>& arrays, uint64_t steps) {
  std::vector<Task> tasks;
  for (size_t a = 0; a < arrays.size(); ++a) {
    if (arrays[a].info->kind == Era5VariableKind::kStatic) tasks.push_back({a, 0, 1, 0, 1});
  }
  const uint64_t block =
      std::max_element(arrays.begin(), arrays.end(), [](const auto& x, const auto& y) {
        return x.steps_per_object < y.steps_per_object;
      })->steps_per_object;
  for (uint64_t first = 0; first < steps; first += block) {
    for (size_t a = 0; a < arrays.size(); ++a) {
      const DataArray& array = arrays[a];
      if (array.info->kind == Era5VariableKind::kStatic) continue;
      const uint64_t levels = array.info->kind == Era5VariableKind::kPressureLevel ? kNumLevels : 1;
      const uint64_t end = std::min(first + block, steps);
      for (uint64_t t = first; t < end; t += array.steps_per_object) {
        for (uint64_t l = 0; l < levels; l += array.levels_per_object) {
          tasks.push_back({a, t, std::min(array.steps_per_object, steps - t), l,
                           std::min(array.levels_per_object, levels - l)});
        }
      }
    }
  }
  return tasks;
}

// "1979-01-01T06:00:00" for messages.
std::string FormatHours(int64_t hours) {
  const int64_t epoch =
      ToCalendarSeconds(DateTime{1900, 1, 1, 0, 0, 0}, Calendar::kProlepticGregorian).value();
  return FormatDateTime(FromCalendarSeconds(epoch + hours * 3600, Calendar::kProlepticGregorian));
}

// One thread's buffers; handed from task to task.
struct WorkerBuffers {
  Era5FieldScratch scratch;
  std::vector<float> object;  // the stored object's values
};

class WorkerBufferPool {
 public:
  std::unique_ptr<WorkerBuffers> Acquire() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.empty()) return std::make_unique<WorkerBuffers>();
    std::unique_ptr<WorkerBuffers> buffers = std::move(free_.back());
    free_.pop_back();
    return buffers;
  }
  void Release(std::unique_ptr<WorkerBuffers> buffers) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(std::move(buffers));
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<WorkerBuffers>> free_;
};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Refuses to write over an existing Zarr node, whichever layout it has.
Status RefuseExistingNode(Store& store, const std::string& context) {
  for (const char* document : {"zarr.json", ".zgroup", ".zarray"}) {
    ZS_ASSIGN_OR_RETURN_CTX(std::optional<ByteBuffer> existing, store.ReadIfExists(document),
                            context);
    if (existing) {
      return InvalidArgumentError(context + ": a Zarr node is already there ('" + document +
                                  "'); pass overwrite (--overwrite) to replace it");
    }
  }
  return Status::Ok();
}

// The group's attributes: what made the dataset.
json GroupAttributes(const SynthPreset& preset, const SynthOptions& options) {
  std::string title = "Synthetic ERA5-like reanalysis: ";
  title += preset.description;
  return {
      {"title", title},
      {"source", "zarrstream synth"},
      {"preset", preset.name},
      {"seed", options.seed},
      {"layout", SynthLayoutName(options.layout)},
  };
}

// Generates the fields of `task` (its steps × levels of `info`'s variable, steps counted from
// `start_hours`) into `buffers->object`.
Status GenerateTaskFields(const Era5FieldGenerator& generator, const Era5VariableInfo& info,
                          const Task& task, int64_t start_hours, WorkerBuffers* buffers) {
  const size_t points = generator.grid().num_points();
  buffers->object.resize(task.num_steps * task.num_levels * points);
  for (uint64_t t = 0; t < task.num_steps; ++t) {
    const int64_t hours = start_hours + kStepHours * static_cast<int64_t>(task.first_step + t);
    for (uint64_t l = 0; l < task.num_levels; ++l) {
      std::span<float> field(buffers->object.data() + (t * task.num_levels + l) * points, points);
      Status status =
          generator.Generate(info.variable, hours, task.first_level + l, field, &buffers->scratch);
      if (!status.ok()) {
        std::string what = "generating '";
        what += info.name;
        what += "' at ";
        what += FormatHours(hours);
        return std::move(status).WithContext(what);
      }
    }
  }
  return Status::Ok();
}

// Writes `object` (the values of `task`) to its place in `array`.
Status WriteTaskObject(const DataArray& array, const Era5Grid& grid, const Task& task,
                       std::span<const float> object) {
  const Era5VariableInfo& info = *array.info;
  const std::vector<uint64_t> start = TaskStart(info, task);
  const std::vector<uint64_t> shape = DimsShape(info, grid, task.num_steps, task.num_levels);
  if (array.v3) return array.v3->Write(start, shape, object.data());
  // wb2 objects are single whole chunks.
  std::vector<uint64_t> chunk_index(start.size());
  const std::vector<uint64_t>& chunks = array.v2->metadata().chunk_shape;
  for (size_t d = 0; d < start.size(); ++d) chunk_index[d] = start[d] / chunks[d];
  return array.v2->WriteChunk(chunk_index, std::as_bytes(object));
}

// The bytes of all of `tasks`' objects and of the largest one, for fields of `field_bytes`.
std::pair<uint64_t, uint64_t> ObjectBytes(const std::vector<Task>& tasks, uint64_t field_bytes) {
  uint64_t total_bytes = 0, largest_object = 0;
  for (const Task& task : tasks) {
    const uint64_t bytes = task.num_steps * task.num_levels * field_bytes;
    total_bytes += bytes;
    largest_object = std::max(largest_object, bytes);
  }
  return {total_bytes, largest_object};
}

// Consolidates the written dataset's metadata (v2 for the wb2 layout, else v3).
Status ConsolidateDataset(Store& store, const SynthOptions& options) {
  if (options.layout == SynthLayout::kWb2) return ConsolidateV2Metadata(store, "");
  ZS_ASSIGN_OR_RETURN(Group group, Group::Open(options.dest_url));
  return group.ConsolidateMetadata();
}

// The group's data variables (and coordinates), in `options.layout`.
Result<std::vector<DataArray>> CreateArrays(const std::shared_ptr<Store>& store,
                                            const SynthOptions& options, const SynthPreset& preset,
                                            const std::vector<Coordinate>& coordinates,
                                            uint64_t steps) {
  const json group_attributes = GroupAttributes(preset, options);
  if (options.layout == SynthLayout::kWb2) {
    return CreateWb2(store, options, preset, group_attributes, coordinates, steps);
  }
  return CreateV3(options, preset, group_attributes, coordinates, steps);
}

// Generates and writes the object of every task on `options.threads` threads, reporting progress
// against report->data_bytes; sets the report's threads and their time generating and writing.
Status WriteObjects(const std::vector<DataArray>& arrays, const std::vector<Task>& tasks,
                    const Era5FieldGenerator& generator, const Era5Grid& grid, int64_t start_hours,
                    const SynthOptions& options, SynthReport* report) {
  ThreadPool pool(options.threads);
  WorkerBufferPool buffer_pool;
  std::atomic<int64_t> generate_ns{0}, write_ns{0};
  std::mutex progress_mutex;
  uint64_t done_bytes = 0;
  const uint64_t total_bytes = report->data_bytes;
  if (options.on_progress) options.on_progress(0, total_bytes);

  auto run_task = [&](const Task& task, WorkerBuffers& buffers) -> Status {
    const DataArray& array = arrays[task.array];
    const Clock::time_point generate_start = Clock::now();
    ZS_RETURN_IF_ERROR(GenerateTaskFields(generator, *array.info, task, start_hours, &buffers));
    const Clock::time_point write_start = Clock::now();
    ZS_RETURN_IF_ERROR(WriteTaskObject(array, grid, task, buffers.object));
    const Clock::time_point end = Clock::now();
    generate_ns += std::chrono::nanoseconds(write_start - generate_start).count();
    write_ns += std::chrono::nanoseconds(end - write_start).count();
    if (options.on_progress) {
      std::lock_guard<std::mutex> lock(progress_mutex);
      done_bytes += buffers.object.size() * sizeof(float);
      options.on_progress(done_bytes, total_bytes);
    }
    return Status::Ok();
  };
  ZS_RETURN_IF_ERROR(ParallelFor(&pool, tasks.size(), [&](size_t i) {
    std::unique_ptr<WorkerBuffers> buffers = buffer_pool.Acquire();
    Status status = run_task(tasks[i], *buffers);
    buffer_pool.Release(std::move(buffers));
    return status;
  }));
  report->threads = pool.num_threads();
  report->generate_seconds = static_cast<double>(generate_ns.load()) * 1e-9;
  report->write_seconds = static_cast<double>(write_ns.load()) * 1e-9;
  return Status::Ok();
}

}  // namespace

std::string_view SynthLayoutName(SynthLayout layout) {
  return kLayoutNames[static_cast<size_t>(layout)];
}

Result<SynthLayout> ParseSynthLayout(std::string_view name) {
  for (size_t i = 0; i < std::size(kLayoutNames); ++i) {
    if (kLayoutNames[i] == name) return static_cast<SynthLayout>(i);
  }
  std::string message = "unknown synth layout '";
  message += name;
  message += "' (expected v3-zstd, v3-sharded or wb2)";
  return InvalidArgumentError(std::move(message));
}

std::span<const SynthPreset> SynthPresets() { return kPresets; }

Result<SynthPreset> FindSynthPreset(std::string_view name) {
  for (const SynthPreset& preset : kPresets) {
    if (preset.name == name) return preset;
  }
  std::string message = "unknown synth preset '";
  message += name;
  message += "' (expected";
  for (const SynthPreset& preset : kPresets) {
    message += " ";
    message += preset.name;
  }
  message += ")";
  return InvalidArgumentError(std::move(message));
}

Result<int64_t> ParseStartHours(std::string_view date) {
  std::string context = "start date '";
  context += date;
  context += "'";
  ZS_ASSIGN_OR_RETURN_CTX(DateLabel label, ParseDateLabel(date), context);
  if (label.start.minute != 0 || label.start.second != 0) {
    return InvalidArgumentError(context + ": must be a whole hour");
  }
  ZS_ASSIGN_OR_RETURN_CTX(int64_t seconds,
                          ToCalendarSeconds(label.start, Calendar::kProlepticGregorian), context);
  ZS_ASSIGN_OR_RETURN(int64_t epoch, ToCalendarSeconds(DateTime{1900, 1, 1, 0, 0, 0},
                                                       Calendar::kProlepticGregorian));
  return (seconds - epoch) / 3600;
}

Result<SynthReport> WriteSynthDataset(const SynthOptions& options) {
  const Clock::time_point wall_start = Clock::now();
  std::string context = "writing a synthetic dataset to ";
  context += options.dest_url;
  ZS_ASSIGN_OR_RETURN_CTX(SynthPreset preset, FindSynthPreset(options.preset), context);
  ZS_ASSIGN_OR_RETURN_CTX(int64_t start_hours, ParseStartHours(options.start), context);
  const uint64_t steps = options.steps.value_or(preset.default_steps);
  if (steps == 0) return InvalidArgumentError(context + ": the number of steps must be positive");
  ZS_ASSIGN_OR_RETURN_CTX(Era5FieldGenerator generator,
                          Era5FieldGenerator::Make(preset.grid, options.seed), context);
  ZS_ASSIGN_OR_RETURN_CTX(std::shared_ptr<Store> store, OpenStore(options.dest_url), context);

  // Refuse to write over an existing Zarr node unless asked to, whichever layout it has.
  if (!options.overwrite) ZS_RETURN_IF_ERROR(RefuseExistingNode(*store, context));

  const std::vector<Coordinate> coordinates = MakeCoordinates(preset.grid, start_hours, steps);
  ZS_ASSIGN_OR_RETURN_CTX(std::vector<DataArray> arrays,
                          CreateArrays(store, options, preset, coordinates, steps), context);
  const std::vector<Task> tasks = MakeTasks(arrays, steps);
  const uint64_t field_bytes = preset.grid.num_points() * sizeof(float);
  const auto [total_bytes, largest_object] = ObjectBytes(tasks, field_bytes);

  SynthReport report;
  report.preset = preset.name;
  report.layout = options.layout;
  report.steps = steps;
  report.start_hours = start_hours;
  report.arrays = arrays.size() + coordinates.size();
  report.stored_objects = tasks.size();
  for (const Task& task : tasks) report.fields += task.num_steps * task.num_levels;
  report.data_bytes = total_bytes;
  ZS_RETURN_IF_ERROR_CTX(
      WriteObjects(arrays, tasks, generator, preset.grid, start_hours, options, &report), context);
  ZS_RETURN_IF_ERROR_CTX(ConsolidateDataset(*store, options), context);

  // Per task in flight: the object's values, its encoded form and the writer's chunk buffers
  // (about two objects), and the generator's scratch (about five fields).
  report.memory_bound_bytes = report.threads * (2 * largest_object + 5 * field_bytes);
  report.wall_seconds = Seconds(Clock::now() - wall_start);
  return report;
}

}  // namespace zarrstream::tools
