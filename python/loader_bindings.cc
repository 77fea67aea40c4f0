#include "loader_bindings.h"

#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "errors.h"
#include "gil.h"
#include "zarrstream/loader.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace zarrstream::python {
namespace {

// Capsule payload: keeps a batch (and so its buffers) alive while any tensor made from it lives.
using BatchRef = std::shared_ptr<const Batch>;

nb::dlpack::dtype DLDType(BatchDType dtype) {
  switch (dtype) {
    case BatchDType::kFloat32:
      return nb::dtype<float>();
    case BatchDType::kBFloat16:
      return nb::dlpack::dtype{static_cast<uint8_t>(nb::dlpack::dtype_code::Bfloat), 16, 1};
    case BatchDType::kFloat16:
      return nb::dlpack::dtype{static_cast<uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
  }
  return nb::dtype<float>();
}

// A DLPack producer (an object with __dlpack__ and __dlpack_device__) over `tensor`, owned by
// `owner` (no copy), in host memory or on CUDA device `cuda_device`.
nb::object Export(const BatchTensor& tensor, nb::dlpack::dtype dtype, nb::handle owner,
                  BatchDevice device = BatchDevice::kCpu, int cuda_device = 0) {
  std::vector<size_t> shape(tensor.shape.begin(), tensor.shape.end());
  const int32_t device_type =
      device == BatchDevice::kCuda ? nb::device::cuda::value : nb::device::cpu::value;
  nb::ndarray<nb::array_api> array(tensor.data.data(), shape.size(), shape.data(), owner, nullptr,
                                   dtype, device_type,
                                   device == BatchDevice::kCuda ? cuda_device : 0);
  return nb::cast(array, nb::rv_policy::reference);
}

// A DLPack producer over a copy of host `tensor`, which owns it: for a batch's origins (a few bytes
// a sample), so that a consumer keeping them (to log which samples it trained on) does not keep
// the batch's memory, a GPU batch's device block included, from going back to the loader.
nb::object ExportCopy(const BatchTensor& tensor, nb::dlpack::dtype dtype) {
  auto* copy = new std::vector<std::byte>(tensor.data.begin(), tensor.data.end());
  nb::capsule owner(copy, [](void* p) noexcept { delete static_cast<std::vector<std::byte>*>(p); });
  return Export(BatchTensor{tensor.shape, std::span<std::byte>(*copy)}, dtype, owner);
}

// The next batch as a dict of DLPack arrays, or None at the end of the epoch. The batch's owner
// (a capsule) is appended to `taken` last, with nothing that could raise after it, so that a
// caller interrupted before it passes the batch on can put it back (Loader.put_back). Ctrl-C while
// waiting raises KeyboardInterrupt with nothing taken.
nb::object NextBatch(Loader& loader, nb::list taken) {
  std::optional<Result<std::optional<BatchRef>>> next;
  bool interrupted = false;
  {
    GilRelease release;
    next.emplace(loader.Next([&] { return interrupted = release.SignalRaised(); }));
  }
  if (interrupted) throw nb::python_error();
  std::optional<BatchRef> batch = ValueOrThrow(std::move(*next));
  if (!batch) return nb::none();
  const Batch& b = **batch;
  nb::capsule owner(new BatchRef(std::move(*batch)),
                    [](void* p) noexcept { delete static_cast<BatchRef*>(p); });
  nb::dict out;
  const nb::dlpack::dtype dtype = DLDType(b.dtype());
  const BatchDevice device = b.device();
  const int gpu = b.cuda_device();
  out["input"] = Export(b.input(), dtype, owner, device, gpu);
  if (!b.target().shape.empty()) out["target"] = Export(b.target(), dtype, owner, device, gpu);
  if (!b.input_mask().shape.empty()) {
    out["input_mask"] = Export(b.input_mask(), nb::dtype<bool>(), owner, device, gpu);
  }
  if (!b.target_mask().shape.empty()) {
    out["target_mask"] = Export(b.target_mask(), nb::dtype<bool>(), owner, device, gpu);
  }
  out["origin"] = ExportCopy(b.origins(), nb::dtype<int64_t>());
  nb::dict shapes;  // the arrays' shapes (a DLPack object does not say them)
  for (const auto& [key, tensor] : {std::pair{"input", &b.input()},
                                    {"target", &b.target()},
                                    {"input_mask", &b.input_mask()},
                                    {"target_mask", &b.target_mask()},
                                    {"origin", &b.origins()}}) {
    if (out.contains(key)) shapes[key] = nb::tuple(nb::cast(tensor->shape));
  }
  out["shapes"] = shapes;
  out["epoch"] = b.epoch();
  out["index"] = b.index();
  out["num_padding"] = b.num_padding();
  out["num_skipped"] = b.num_skipped();
  taken.append(owner);
  return out;
}

bool PutBack(Loader& loader, nb::capsule owner) {
  BatchRef batch = *static_cast<const BatchRef*>(owner.data());
  return WithoutGil([&] { return loader.PutBack(std::move(batch)); });
}

nb::dict StatsDict(const LoaderStats& s) {
  nb::dict d;
  d["batches"] = s.batches;
  d["samples"] = s.samples;
  d["skipped_samples"] = s.skipped_samples;
  d["missing_date_samples"] = s.missing_date_samples;
  d["chunk_refs"] = s.chunk_refs;
  d["chunks_decoded"] = s.chunks_decoded;
  d["cache_hits"] = s.cache_hits;
  d["missing_chunks"] = s.missing_chunks;
  d["requests"] = s.requests;
  d["retries"] = s.retries;
  d["failed_requests"] = s.failed_requests;
  d["request_latency_us_log2"] = s.request_latency_histogram;
  d["bytes_read"] = s.bytes_read;
  d["bytes_decoded"] = s.bytes_decoded;
  d["bytes_used"] = s.bytes_used;
  d["bytes_delivered"] = s.bytes_delivered;
  d["batch_blocks"] = s.batch_blocks;
  d["plan_seconds"] = s.plan_seconds;
  d["read_decode_seconds"] = s.read_decode_seconds;
  d["assemble_seconds"] = s.assemble_seconds;
  d["gpu_decoded_chunks"] = s.gpu_decoded_chunks;
  d["cpu_decode_share"] = s.cpu_decode_share;
  d["gpu_rejected_chunks"] = s.gpu_rejected_chunks;
  d["bytes_to_gpu"] = s.bytes_to_gpu;
  d["bytes_staged_without_copy"] = s.bytes_staged_without_copy;
  d["gpu_seconds"] = s.gpu_seconds;
  d["gpu_read_seconds"] = s.gpu_read_seconds;
  d["gpu_decode_seconds"] = s.gpu_decode_seconds;
  d["gpu_scatter_seconds"] = s.gpu_scatter_seconds;
  d["wait_seconds"] = s.wait_seconds;
  d["wait_histogram_us_log2"] = s.wait_histogram;
  d["estimated_read_amplification"] = s.estimated_read_amplification;
  d["estimated_read_amplification_exact"] = s.estimated_read_amplification_exact;
  d["block_chunks"] = s.block_chunks;
  return d;
}

}  // namespace

void RegisterLoaderBindings(nb::module_& m) {
  m.def("gpu_batches_unavailable_reason", &GpuBatchesUnavailableReason, "cuda_device"_a = 0);

  nb::class_<BatchPlacement>(m, "BatchPlacement")
      .def_prop_ro("device",
                   [](const BatchPlacement& p) { return std::string(BatchDeviceName(p.device)); })
      .def_ro("consumer_copies", &BatchPlacement::consumer_copies)
      .def_ro("reason", &BatchPlacement::reason);
  // gpu_batches: None (where possible), True (required) or False (never).
  m.def(
      "plan_batch_placement",
      [](const std::string& device, int cuda_device, std::optional<bool> gpu_batches,
         bool consumer_can_copy) {
        const GpuBatches mode = !gpu_batches   ? GpuBatches::kAuto
                                : *gpu_batches ? GpuBatches::kOn
                                               : GpuBatches::kOff;
        const BatchDevice requested = device == "cuda" ? BatchDevice::kCuda : BatchDevice::kCpu;
        // Without the GIL: this may make the CUDA device's context.
        return ValueOrThrow(WithoutGil(
            [&] { return PlanBatchPlacement(requested, cuda_device, mode, consumer_can_copy); }));
      },
      "device"_a, "cuda_device"_a, "gpu_batches"_a.none(), "consumer_can_copy"_a);

  nb::class_<LabelSelection>(m, "LabelSelection")
      .def(nb::init<>())
      .def_rw("dim", &LabelSelection::dim)
      .def_rw("values", &LabelSelection::values)
      .def_prop_rw(
          "start", [](const LabelSelection& s) { return s.start; },
          [](LabelSelection& s, std::optional<std::string> start) { s.start = std::move(start); },
          nb::arg("start").none())
      .def_prop_rw(
          "stop", [](const LabelSelection& s) { return s.stop; },
          [](LabelSelection& s, std::optional<std::string> stop) { s.stop = std::move(stop); },
          nb::arg("stop").none())
      .def("__repr__", &LabelSelection::ToString);

  nb::class_<DecodePlacement>(m, "DecodePlacement")
      .def(nb::init<>())
      .def_rw("gpu", &DecodePlacement::gpu)
      .def_rw("cpu_share", &DecodePlacement::cpu_share)
      .def_rw("adaptive", &DecodePlacement::adaptive);
  // The text forms of Python's cpu_decode_share ("auto", a share), as the CLI parses them.
  m.def("parse_cpu_decode_share", [](std::string_view text) {
    Result<DecodePlacement> placement = ParseCpuDecodeShare(text);
    if (!placement.ok()) {
      throw StatusError(ConfigError("cpu_decode_share is " + placement.status().message()));
    }
    return *placement;
  });

  nb::class_<LoaderOptions>(m, "LoaderOptions")
      .def(nb::init<>())
      .def_rw("variables", &LoaderOptions::variables)
      .def_rw("forcings", &LoaderOptions::forcings)
      .def_rw("target_variables", &LoaderOptions::target_variables)
      .def_rw("sample", &LoaderOptions::sample)
      .def_rw("stride", &LoaderOptions::stride)
      .def_rw("target_dim", &LoaderOptions::target_dim)
      .def_rw("target_offsets", &LoaderOptions::target_offsets)
      .def_rw("frequency", &LoaderOptions::frequency)
      .def_rw("missing_dates", &LoaderOptions::missing_dates)
      .def_rw("detect_missing_dates", &LoaderOptions::detect_missing_dates)
      .def_rw("select", &LoaderOptions::select)
      .def_rw("periodic", &LoaderOptions::periodic, nb::arg("periodic").none())
      .def_prop_rw(
          "patch_padding",
          [](const LoaderOptions& o) -> nb::object {
            switch (o.patch_padding.mode) {
              case PatchPadding::Mode::kNone:
                return nb::str("none");
              case PatchPadding::Mode::kReflect:
                return nb::str("reflect");
              case PatchPadding::Mode::kValue:
                break;
            }
            return nb::float_(o.patch_padding.value);
          },
          [](LoaderOptions& o, std::string_view text) {
            Result<PatchPadding> padding = ParsePatchPadding(text);
            if (!padding.ok()) throw StatusError(ConfigError(padding.status().message()));
            o.patch_padding = *padding;
          })
      .def_prop_rw(
          "ensemble",
          [](const LoaderOptions& o) { return std::string(EnsembleModeName(o.ensemble)); },
          [](LoaderOptions& o, std::string_view name) {
            Result<EnsembleMode> mode = ParseEnsembleMode(name);
            if (!mode.ok()) throw StatusError(ConfigError(mode.status().message()));
            o.ensemble = *mode;
          })
      .def_rw("ensemble_dim", &LoaderOptions::ensemble_dim)
      .def_prop_rw(
          "shuffle", [](const LoaderOptions& o) { return std::string(ShuffleModeName(o.shuffle)); },
          [](LoaderOptions& o, const std::string& name) {
            o.shuffle = ValueOrThrow(ParseShuffleMode(name));
          })
      .def_rw("seed", &LoaderOptions::seed)
      .def_rw("block_chunks", &LoaderOptions::block_chunks)
      .def_rw("cuda_device", &LoaderOptions::cuda_device)
      .def_rw("block_window", &LoaderOptions::block_window)
      .def_rw("batch_size", &LoaderOptions::batch_size)
      .def_rw("world_size", &LoaderOptions::world_size)
      .def_rw("rank", &LoaderOptions::rank)
      .def_rw("drop_last", &LoaderOptions::drop_last)
      .def_prop_rw(
          "pin_memory",
          [](const LoaderOptions& o) -> std::optional<bool> {
            if (o.pin_memory == PinMemory::kAuto) return std::nullopt;
            return o.pin_memory == PinMemory::kOn;
          },
          [](LoaderOptions& o, std::optional<bool> pin) {
            o.pin_memory = !pin ? PinMemory::kAuto : *pin ? PinMemory::kOn : PinMemory::kOff;
          },
          nb::arg("pin").none())
      .def_prop_rw(
          "dtype", [](const LoaderOptions& o) { return std::string(BatchDTypeName(o.dtype)); },
          [](LoaderOptions& o, const std::string& name) {
            o.dtype = ValueOrThrow(ParseBatchDType(name));
          })
      .def_prop_rw(
          "device", [](const LoaderOptions& o) { return std::string(BatchDeviceName(o.device)); },
          [](LoaderOptions& o, const std::string& name) {
            if (name != "cpu" && name != "cuda") {
              throw nb::value_error(("device " + name + ": expected cpu or cuda").c_str());
            }
            o.device = name == "cuda" ? BatchDevice::kCuda : BatchDevice::kCpu;
          })
      .def_rw("gpu_wave_bytes", &LoaderOptions::gpu_wave_bytes)
      .def_rw("decode", &LoaderOptions::decode)
      .def_rw("normalize", &LoaderOptions::normalize)
      .def_rw("target_tendencies", &LoaderOptions::target_tendencies)
      .def_rw("decode_cf", &LoaderOptions::decode_cf)
      .def_rw("fill_nan", &LoaderOptions::fill_nan)
      .def_rw("nan_fill", &LoaderOptions::nan_fill)
      .def_rw("skip_bad_samples", &LoaderOptions::skip_bad_samples)
      .def_rw("prefetch", &LoaderOptions::prefetch)
      .def_rw("num_threads", &LoaderOptions::num_threads)
      .def_rw("cache_bytes", &LoaderOptions::cache_bytes)
      .def_rw("missing_chunks_are_errors", &LoaderOptions::missing_chunks_are_errors)
      .def_rw("ref", &LoaderOptions::ref)
      .def_rw("record_timeline", &LoaderOptions::record_timeline);

  m.def(
      "detect_missing_dates",
      [](const std::string& url, const LoaderOptions& options) {
        return ValueOrThrow(WithoutGil([&] { return DetectMissingDates(url, options); }));
      },
      "url"_a, "options"_a);

  nb::class_<Loader>(m, "Loader")
      .def(
          "__init__",
          [](Loader* self, const std::string& url, const LoaderOptions& options) {
            new (self) Loader(ValueOrThrow(WithoutGil([&] { return Loader::Open(url, options); })));
          },
          "url"_a, "options"_a)
      .def("check_process", [](const Loader& l) { ThrowIfError(l.CheckProcess()); })
      .def("missing_dates", [](const Loader& l) { return ValueOrThrow(l.missing_dates()); })
      .def("next", &NextBatch, "taken"_a)
      .def("put_back", &PutBack, "owner"_a)
      .def("set_epoch", [](Loader& l, uint64_t epoch) { WithoutGil([&] { l.SetEpoch(epoch); }); })
      .def_prop_rw(
          "prefetch", [](const Loader& l) { return l.prefetch(); },
          [](Loader& l, size_t prefetch) { WithoutGil([&] { l.SetPrefetch(prefetch); }); })
      .def_prop_ro("epoch", &Loader::epoch)
      .def_prop_ro("next_batch", &Loader::next_batch)
      .def_prop_ro("num_batches", &Loader::num_batches)
      .def_prop_ro("num_samples", &Loader::num_samples)
      .def("state_json", &Loader::StateJson)
      .def_prop_ro("dataset_identity",
                   [](const Loader& l) {
                     nb::list out;
                     for (const StoreIdentity& store : l.dataset_identity()) {
                       nb::dict entry;
                       entry["url"] = store.url;
                       entry["kind"] = store.kind;
                       entry["id"] = store.id;
                       out.append(entry);
                     }
                     return out;
                   })
      .def("restore_state_json",
           [](Loader& l, const std::string& json) {
             ThrowIfError(WithoutGil([&] { return l.RestoreStateJson(json); }));
           })
      .def_prop_ro("input_channels", &Loader::input_channels)
      .def_prop_ro("target_channels", &Loader::target_channels)
      .def_prop_ro("sample_dims", &Loader::sample_dims)
      .def_prop_ro("spatial_dims", &Loader::spatial_dims)
      .def_prop_ro("pinned", &Loader::pinned)
      .def_prop_ro("num_threads", &Loader::num_threads)
      .def(
          "set_consumer_stream",
          [](Loader& l, uintptr_t stream) {
            // Python names a stream by an integer (torch.cuda.Stream.cuda_stream, DLPack's stream
            // numbers): the one place a stream handle is made from one.
            // NOLINTNEXTLINE(performance-no-int-to-ptr): the handle arrives as an integer.
            l.SetConsumerStream(reinterpret_cast<void*>(stream));
          },
          "stream"_a)
      .def_prop_ro("gpu_decode_status", &Loader::gpu_decode_status)
      .def_prop_ro("input_shape", &Loader::input_shape)
      .def_prop_ro("target_shape", &Loader::target_shape)
      .def("stats", [](const Loader& l) { return StatsDict(l.stats()); })
      .def("timeline", [](const Loader& l) {
        nb::list spans;
        for (const TimelineSpan& span : l.Timeline()) {
          nb::dict d;
          d["stage"] = span.stage;
          d["epoch"] = span.epoch;
          d["batch"] = span.batch;
          d["thread"] = span.thread;
          d["start"] = span.start_seconds;
          d["end"] = span.end_seconds;
          spans.append(d);
        }
        return spans;
      });
}

}  // namespace zarrstream::python
