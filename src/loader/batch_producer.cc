#include "loader/batch_producer.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace zarrstream::internal {
namespace {

std::string DescribeSample(const LoaderGeometry& g, std::span<const uint64_t> origin) {
  std::string out = "sample at";
  for (size_t k = 0; k < origin.size(); ++k) {
    out += k == 0 ? " " : ", ";
    out += g.sample_dims[k];
    out += "=";
    out += std::to_string(ReportedIndex(g, g.sampled_index[k], origin[k]));
  }
  return out;
}

}  // namespace

BatchProducerBase::CopyTarget BatchProducerBase::TargetOf(Batch& b, const PlannedCopy& copy) const {
  const LoaderGeometry& g = context_.geometry;
  const LoaderOptions& options = context_.options;
  const Slab& slab = copy.target ? g.target_slabs[copy.slab] : g.input_slabs[copy.slab];
  const uint64_t channels = copy.target ? g.target_slabs.size() : g.input_channels;
  const uint64_t slab_index = copy.sample * channels + slab.out_channel;
  const BatchTensor& out = copy.target ? BatchAccess::target(b) : BatchAccess::input(b);
  CopyTarget target;
  target.slab = out.data.data() + slab_index * g.slab_elements * BatchDTypeSize(options.dtype);
  if (options.fill_nan) {
    const BatchTensor& m = copy.target ? BatchAccess::target_mask(b) : BatchAccess::input_mask(b);
    target.mask = reinterpret_cast<uint8_t*>(m.data.data()) + slab_index * g.slab_elements;
  }
  target.transform = SlabTransform{g.mean[slab.channel], g.inv_std[slab.channel], options.fill_nan,
                                   options.nan_fill, &g.cf[slab.channel]};
  target.strides = &context_.slab_strides[slab.channel];
  return target;
}

namespace {

int SpatialAxisOf(const LoaderGeometry& g, const std::optional<size_t>& dim) {
  if (!dim) return -1;
  const auto it = std::find(g.spatial_index.begin(), g.spatial_index.end(), *dim);
  return it == g.spatial_index.end() ? -1 : static_cast<int>(it - g.spatial_index.begin());
}

}  // namespace

int BatchProducerBase::LatitudeAxis() const {
  return SpatialAxisOf(context_.geometry, context_.geometry.latitude_dim);
}

int BatchProducerBase::LongitudeAxis() const {
  return SpatialAxisOf(context_.geometry, context_.geometry.longitude_dim);
}

void BatchProducerBase::AssembleComputedForcing(Batch& b, const PlannedForcing& f) const {
  const LoaderGeometry& g = context_.geometry;
  const LoaderOptions& options = context_.options;
  const int latitude_axis = LatitudeAxis();
  const int longitude_axis = LongitudeAxis();
  const ComputedSlab& slab = g.computed_slabs[f.slab];
  const uint64_t slab_index = f.sample * g.input_channels + slab.out_channel;
  uint8_t* mask = nullptr;
  if (options.fill_nan) {
    mask = reinterpret_cast<uint8_t*>(BatchAccess::input_mask(b).data.data()) +
           slab_index * g.slab_elements;
  }
  AssembleComputed(slab.kind, f.seconds, g.spatial_shape, latitude_axis,
                   g.latitudes.data() + (latitude_axis >= 0 ? f.latitude : 0), longitude_axis,
                   g.longitudes.data() + (longitude_axis >= 0 ? f.longitude : 0),
                   BatchAccess::input(b).data.data() +
                       slab_index * g.slab_elements * BatchDTypeSize(options.dtype),
                   options.dtype, mask);
}

void BatchProducerBase::AssemblePadding(Batch& b, const PlannedPadding& box) const {
  const LoaderGeometry& g = context_.geometry;
  const LoaderOptions& options = context_.options;
  const SlabTransform transform{0, 1, options.fill_nan, options.nan_fill, nullptr};
  const size_t element_bytes = BatchDTypeSize(options.dtype);
  const auto fill = [&](const BatchTensor& out, const BatchTensor& mask, uint64_t channels) {
    for (uint64_t c = 0; c < channels; ++c) {
      const uint64_t slab = box.sample * channels + c;
      AssembleFill(
          g.padding.value, g.spatial_shape, box.offset, box.shape,
          out.data.data() + slab * g.slab_elements * element_bytes, options.dtype, transform,
          options.fill_nan ? reinterpret_cast<uint8_t*>(mask.data.data()) + slab * g.slab_elements
                           : nullptr);
    }
  };
  fill(BatchAccess::input(b), BatchAccess::input_mask(b), g.input_channels);
  if (!g.target_slabs.empty()) {
    fill(BatchAccess::target(b), BatchAccess::target_mask(b), g.target_slabs.size());
  }
}

void BatchProducerBase::LayOutTensors(Batch& b, std::byte* tensors, std::byte* origins,
                                      size_t samples) const {
  const BatchLayout& layout = context_.layout;
  auto tensor = [samples](std::byte* base, const BatchLayout::Tensor& t) {
    BatchTensor out;
    if (!t.present) return out;
    out.shape.push_back(static_cast<int64_t>(samples));
    out.shape.insert(out.shape.end(), t.sample_shape.begin(), t.sample_shape.end());
    out.data = std::span<std::byte>(base + t.offset, samples * t.sample_bytes);
    return out;
  };
  BatchAccess::dtype(b) = context_.options.dtype;
  BatchAccess::input(b) = tensor(tensors, layout.input);
  BatchAccess::target(b) = tensor(tensors, layout.target);
  BatchAccess::input_mask(b) = tensor(tensors, layout.input_mask);
  BatchAccess::target_mask(b) = tensor(tensors, layout.target_mask);
  BatchAccess::origins(b) = tensor(origins, layout.origins);
}

Result<std::shared_ptr<Batch>> BatchProducerBase::AllocateBatch(size_t samples) const {
  std::shared_ptr<Batch> batch = BatchAccess::Make();
  Batch& b = *batch;
  ZS_ASSIGN_OR_RETURN(BatchAccess::storage(b), context_.host_memory->Acquire());
  auto* base = static_cast<std::byte*>(BatchAccess::storage(b).get());
  LayOutTensors(b, base, base, samples);
  return batch;
}

void BatchProducerBase::FinishPlanning(Batch& b, uint64_t epoch, uint64_t index,
                                       const SampleBatch& samples, const BatchReadPlan& reads,
                                       StageSpan& plan_stage) const {
  BatchAccess::epoch(b) = epoch;
  BatchAccess::index(b) = index;
  BatchAccess::num_padding(b) = samples.num_padding;
  BatchAccess::sample_ids(b) = samples.sample_ids;
  const LoaderGeometry& g = context_.geometry;
  auto* origins = reinterpret_cast<int64_t*>(BatchAccess::origins(b).data.data());
  const size_t columns = g.sampled_index.size();
  for (size_t i = 0; i < samples.origins.size(); ++i) {
    origins[i] = ReportedIndex(g, g.sampled_index[i % columns], samples.origins[i]);
  }
  context_.counters.chunk_refs += reads.chunk_refs;
  context_.counters.bytes_used += reads.bytes_used;
  context_.counters.plan_ns += plan_stage.ElapsedNanoseconds();
}

Status BatchProducerBase::BatchError(Status error, const std::vector<uint8_t>& bad,
                                     const SampleBatch& samples, uint64_t epoch,
                                     uint64_t index) const {
  size_t s = 0;
  while (s < bad.size() && !bad[s]) ++s;
  return std::move(error).WithContext(DescribeSample(context_.geometry, samples.origin(s)) +
                                      " of batch " + std::to_string(index) + " (epoch " +
                                      std::to_string(epoch) + ")");
}

void CompactBatch(Batch& b, const std::vector<uint8_t>& bad,
                  const std::function<void(std::byte*, const std::byte*, size_t)>& move_on_device) {
  std::vector<BatchTensor*> tensors = {&BatchAccess::input(b), &BatchAccess::target(b),
                                       &BatchAccess::input_mask(b), &BatchAccess::target_mask(b),
                                       &BatchAccess::origins(b)};
  const size_t n = bad.size();
  std::vector<uint64_t>& ids = BatchAccess::sample_ids(b);
  size_t kept = 0;
  for (size_t s = 0; s < n; ++s) {
    if (bad[s]) continue;
    for (BatchTensor* t : tensors) {
      if (t->shape.empty()) continue;
      const size_t per_sample = t->data.size() / n;
      if (kept == s) continue;
      std::byte* to = t->data.data() + kept * per_sample;
      const std::byte* from = t->data.data() + s * per_sample;
      if (b.device() == BatchDevice::kCuda && t != &BatchAccess::origins(b)) {
        move_on_device(to, from, per_sample);
      } else {
        std::memmove(to, from, per_sample);
      }
    }
    ids[kept] = ids[s];
    ++kept;
  }
  for (BatchTensor* t : tensors) {
    if (t->shape.empty()) continue;
    const size_t per_sample = t->data.size() / n;
    t->shape[0] = static_cast<int64_t>(kept);
    t->data = t->data.first(kept * per_sample);
  }
  ids.resize(kept);
  BatchAccess::num_padding(b) = std::min<uint64_t>(BatchAccess::num_padding(b), kept);
  BatchAccess::num_skipped(b) = n - kept;
}

}  // namespace zarrstream::internal
