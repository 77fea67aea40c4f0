// Read planning: the chunks a batch touches, deduplicated, and the copies each one feeds.
#include "loader/read_plan.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <unordered_map>

namespace zarrstream {

namespace {

// For each array: its read chunks' linear indices → their positions in BatchReadPlan::chunks.
using ChunkIndex = std::vector<std::unordered_map<uint64_t, uint32_t>>;

// Per array dimension, the runs of store indices (or padding) one slab's box is made of.
using AxisPieces = std::array<std::vector<AxisPiece>, kLoaderMaxRank>;

// Adds to `plan` the chunks and copies that fill the box [lo, lo + extent) of array `array_slot`,
// at `slab_offset` in slab `slab_index` of `sample`; a chunk already in `index` gets one more copy.
void PlanBox(const LoaderGeometry& g, size_t array_slot, const DimArray& lo, const DimArray& extent,
             const DimArray& slab_offset, uint32_t sample, uint32_t slab_index, const Slab& slab,
             ChunkIndex* index, BatchReadPlan* plan) {
  const internal::ArrayState& array = *g.arrays[array_slot];
  const size_t array_rank = array.metadata.shape.size();
  const std::vector<uint64_t>& chunk = array.read_chunk_shape;
  const std::vector<uint64_t>& shape = array.metadata.shape;
  PlannedCopy copy;
  copy.sample = sample;
  copy.slab = slab_index;
  copy.target = slab.target;
  copy.base = slab.base;
  copy.rank = static_cast<uint8_t>(array_rank);
  if (const std::optional<ResidentBox>& box = g.resident[array_slot]) {
    for (size_t a = 0; a < array_rank; ++a) {
      copy.within_chunk[a] = lo[a] - box->start[a];
      copy.within_slab[a] = slab_offset[a];
      copy.shape[a] = extent[a];
    }
    auto found = std::find_if(plan->resident.begin(), plan->resident.end(),
                              [&](const PlannedChunk& p) { return p.array == array_slot; });
    if (found == plan->resident.end()) {
      PlannedChunk planned;
      planned.array = array_slot;
      planned.coords.assign(array_rank, 0);
      found = plan->resident.insert(plan->resident.end(), std::move(planned));
    }
    found->copies.push_back(copy);
    return;
  }
  DimArray first{}, count{};
  uint64_t cells = 1;
  for (size_t a = 0; a < array_rank; ++a) {
    first[a] = lo[a] / chunk[a];
    count[a] = (lo[a] + extent[a] - 1) / chunk[a] - first[a] + 1;
    cells *= count[a];
  }
  for (uint64_t cell = 0; cell < cells; ++cell) {
    DimArray coords{};
    uint64_t rest = cell;
    for (size_t a = array_rank; a-- > 0;) {
      coords[a] = first[a] + rest % count[a];
      rest /= count[a];
    }
    uint64_t linear = 0;
    uint64_t elements = 1;
    for (size_t a = 0; a < array_rank; ++a) {
      const uint64_t grid = (shape[a] + chunk[a] - 1) / chunk[a];
      linear = linear * grid + coords[a];
      const uint64_t chunk_lo = coords[a] * chunk[a];
      const uint64_t box_lo = std::max(chunk_lo, lo[a]);
      const uint64_t box_hi = std::min(chunk_lo + chunk[a], lo[a] + extent[a]);
      copy.within_chunk[a] = box_lo - chunk_lo;
      copy.within_slab[a] = box_lo - lo[a] + slab_offset[a];
      copy.shape[a] = box_hi - box_lo;
      elements *= copy.shape[a];
    }
    auto [it, inserted] =
        (*index)[array_slot].try_emplace(linear, static_cast<uint32_t>(plan->chunks.size()));
    if (inserted) {
      PlannedChunk planned;
      planned.array = array_slot;
      planned.coords.assign(coords.begin(), coords.begin() + array_rank);
      planned.linear = linear;
      plan->chunks.push_back(std::move(planned));
    }
    plan->chunks[it->second].copies.push_back(copy);
    ++plan->chunk_refs;
    plan->bytes_used += elements * DataTypeSize(array.metadata.data_type);
  }
}

// Calls visit(pieces chosen, one per dimension) for every combination of `pieces[0, rank)`.
template <typename Visit>
void ForEachCombination(const AxisPieces& pieces, size_t rank, Visit&& visit) {
  for (size_t a = 0; a < rank; ++a) {
    if (pieces[a].empty()) return;
  }
  std::array<size_t, kLoaderMaxRank> which{};
  std::array<const AxisPiece*, kLoaderMaxRank> chosen{};
  for (;;) {
    for (size_t a = 0; a < rank; ++a) chosen[a] = &pieces[a][which[a]];
    visit(chosen);
    size_t a = rank;
    while (a-- > 0) {
      if (++which[a] < pieces[a].size()) break;
      which[a] = 0;
    }
    if (a == static_cast<size_t>(-1)) return;
  }
}

// Adds to `plan` the chunks and copies that fill slab `slab_index` (`slab`) of `sample`, whose
// first index along each channel dimension is `start` (the loader's indices: a box that wraps
// around a periodic dimension or reaches into padding is several boxes of the store's, and
// padding with a value is no box at all: PlanBatchReads plans it for every channel at once).
void PlanSlab(const LoaderGeometry& g, const DimArray& start, uint32_t sample, uint32_t slab_index,
              const Slab& slab, AxisPieces* pieces, ChunkIndex* index, BatchReadPlan* plan) {
  const Channel& channel = g.channels[slab.channel];
  size_t array_slot = g.channel_array[slab.channel];
  for (std::vector<AxisPiece>& p : *pieces) p.clear();
  for (size_t d = 0; d < g.dims.size(); ++d) {
    const std::optional<size_t> a = ArrayDimOf(g, slab.channel, d);
    if (!a) continue;
    if (g.time_dim && *g.time_dim == d) {
      // A step of a combined dataset: the store, and its index, that hold it.
      const auto [slot, t] = TimeSource(g, slab.channel, start[d] + slab.step * g.time_step);
      array_slot = slot;
      (*pieces)[*a].push_back(AxisPiece{0, t, 1, false});
    } else {
      MapAxisRun(g, d, start[d], g.window[d], &(*pieces)[*a]);
    }
  }
  if (channel.level_dim) {
    (*pieces)[*channel.level_dim].push_back(AxisPiece{0, channel.level_index, 1, false});
  }
  if (channel.member_dim) {
    (*pieces)[*channel.member_dim].push_back(AxisPiece{0, channel.member_index, 1, false});
  }
  const size_t array_rank = g.arrays[array_slot]->metadata.shape.size();
  ForEachCombination(*pieces, array_rank, [&](const auto& chosen) {
    DimArray lo{}, extent{}, slab_offset{};
    for (size_t a = 0; a < array_rank; ++a) {
      if (chosen[a]->padding) return;
      lo[a] = chosen[a]->store;
      extent[a] = chosen[a]->length;
      slab_offset[a] = chosen[a]->offset;
    }
    PlanBox(g, array_slot, lo, extent, slab_offset, sample, slab_index, slab, index, plan);
  });
}

// The boxes of `sample`'s spatial dimensions that are padding with a value.
void PlanPadding(const LoaderGeometry& g, const DimArray& start, uint32_t sample,
                 AxisPieces* pieces, BatchReadPlan* plan) {
  const size_t rank = g.spatial_index.size();
  bool any = false;
  for (size_t k = 0; k < rank; ++k) {
    const size_t d = g.spatial_index[k];
    (*pieces)[k].clear();
    MapAxisRun(g, d, start[d], g.window[d], &(*pieces)[k]);
    for (const AxisPiece& piece : (*pieces)[k]) any = any || piece.padding;
  }
  if (!any) return;
  ForEachCombination(*pieces, rank, [&](const auto& chosen) {
    PlannedPadding box;
    box.sample = sample;
    bool padding = false;
    for (size_t k = 0; k < rank; ++k) {
      padding = padding || chosen[k]->padding;
      box.offset[k] = chosen[k]->offset;
      box.shape[k] = chosen[k]->length;
    }
    if (padding) plan->padding.push_back(box);
  });
}

}  // namespace

std::vector<SampledDim> PlanDims(const LoaderGeometry& g) {
  std::vector<SampledDim> out;
  // The chunks of the first channel read per batch (static fields are kept, not read).
  size_t first = 0;
  while (first + 1 < g.channels.size() && g.resident[g.channel_array[first]]) ++first;
  const std::vector<uint64_t> chunks = g.channels[first].array.chunks();
  for (size_t d : g.sampled_index) {
    SampledDim s;
    s.name = g.dims[d];
    s.range = g.ranges[d];
    s.window = g.window[d];
    s.stride = g.stride[d];
    s.reach =
        g.time_dim && *g.time_dim == d && !g.target_steps.empty()
            ? *std::max_element(g.target_steps.begin(), g.target_steps.end()) + 1 - g.time_window
            : 0;
    if (g.time_dim && *g.time_dim == d) {
      // The sample plan counts store indices: a window of steps `time_step` apart spans
      // (window - 1) × time_step + 1 of them.
      s.window = (s.window - 1) * g.time_step + 1;
      s.stride = *s.stride * g.time_step;
      s.reach *= g.time_step;
    }
    // A dimension the first channel lacks (the member dimension of a channel without members):
    // blocks of single indices along it.
    const std::optional<size_t> a = ArrayDimOf(g, first, d);
    s.chunk = a ? chunks[*a] : 1;
    if (g.time_dim && *g.time_dim == d && !g.missing_steps.empty()) {
      // The store indices a sample touches from its origin: its window's steps and its targets'.
      s.missing = g.missing_steps;
      for (uint64_t step = 0; step < g.time_window; ++step) s.touched.push_back(step * g.time_step);
      for (uint64_t step : g.target_steps) s.touched.push_back(step * g.time_step);
    }
    out.push_back(std::move(s));
  }
  return out;
}

BatchReadPlan PlanBatchReads(const LoaderGeometry& g, const SampleBatch& batch) {
  BatchReadPlan plan;
  ChunkIndex index(g.arrays.size());
  AxisPieces pieces;
  const bool padding = g.padding.mode == PatchPadding::Mode::kValue &&
                       std::any_of(g.axes.begin(), g.axes.end(),
                                   [](const AxisIndexing& axis) { return axis.padded; });
  DimArray start{};  // the sample's first index along each channel dimension
  for (size_t s = 0; s < batch.size(); ++s) {
    std::span<const uint64_t> origin = batch.origin(s);
    for (size_t d = 0; d < g.dims.size(); ++d) start[d] = g.ranges[d].start;
    for (size_t k = 0; k < g.sampled_index.size(); ++k) start[g.sampled_index[k]] = origin[k];
    const auto sample = static_cast<uint32_t>(s);
    for (size_t i = 0; i < g.input_slabs.size(); ++i) {
      PlanSlab(g, start, sample, static_cast<uint32_t>(i), g.input_slabs[i], &pieces, &index,
               &plan);
    }
    for (size_t i = 0; i < g.target_slabs.size(); ++i) {
      PlanSlab(g, start, sample, static_cast<uint32_t>(i), g.target_slabs[i], &pieces, &index,
               &plan);
    }
    for (size_t i = 0; i < g.base_slabs.size(); ++i) {
      PlanSlab(g, start, sample, static_cast<uint32_t>(i), g.base_slabs[i], &pieces, &index, &plan);
    }
    for (size_t i = 0; i < g.computed_slabs.size(); ++i) {
      PlannedForcing f;
      f.sample = sample;
      f.slab = static_cast<uint32_t>(i);
      if (!g.times.empty()) {
        f.seconds = g.times[start[*g.time_dim] + g.computed_slabs[i].step * g.time_step];
      }
      if (g.latitude_dim) f.latitude = start[*g.latitude_dim];
      if (g.longitude_dim) f.longitude = start[*g.longitude_dim];
      plan.computed.push_back(f);
    }
    if (padding) PlanPadding(g, start, sample, &pieces, &plan);
  }
  return plan;
}

uint64_t AutoBlockChunks(const LoaderGeometry& g, const std::vector<SampledDim>& dims,
                         const LoaderOptions& options, uint64_t cache_bytes) {
  constexpr uint64_t kMaxBlockChunks = 8;
  const uint64_t window = std::max<uint64_t>(options.block_window, 1);
  uint64_t chosen = 1;
  if (options.device == BatchDevice::kCuda) {
    for (uint64_t chunks = 2; chunks <= kMaxBlockChunks; ++chunks) {
      // A block spans at least one stride (SamplePlan), and holds one origin per stride.
      uint64_t group_samples = window;
      for (const SampledDim& dim : dims) {
        const uint64_t stride = std::max<uint64_t>(dim.stride.value_or(dim.window), 1);
        const uint64_t span = std::max(chunks, (stride + dim.chunk - 1) / dim.chunk) * dim.chunk;
        group_samples *= (span + stride - 1) / stride;
      }
      if (group_samples > options.batch_size) break;
      chosen = chunks;
    }
    return chosen;
  }
  // A block of S chunks along a dimension of chunk extent c spans S·c + footprint - 1 indices,
  // where footprint is the window plus the target reach; one sample's decoded bytes cover
  // `footprint` of them. One sample's distinct fields: (channel source, step) pairs of its inputs
  // and targets.
  std::set<std::tuple<const internal::ArrayState*, uint64_t, uint64_t, uint64_t>> fields;
  uint64_t sample_bytes = 0;
  for (const std::vector<Slab>* slabs : {&g.input_slabs, &g.target_slabs}) {
    for (const Slab& slab : *slabs) {
      const Channel& channel = g.channels[slab.channel];
      if (g.resident[g.channel_array[slab.channel]]) continue;  // kept, never read
      const internal::ArrayState* array = g.arrays[g.channel_array[slab.channel]];
      if (fields.emplace(array, channel.level_index, channel.member_index, slab.step).second) {
        sample_bytes += g.slab_elements * DataTypeSize(array->metadata.data_type);
      }
    }
  }
  const double budget = 0.75 * static_cast<double>(cache_bytes);
  for (uint64_t chunks = 2; chunks <= kMaxBlockChunks; ++chunks) {
    double block_bytes = static_cast<double>(sample_bytes);
    for (const SampledDim& dim : dims) {
      const uint64_t footprint = dim.window + dim.reach;
      block_bytes *=
          static_cast<double>(chunks * dim.chunk + footprint - 1) / static_cast<double>(footprint);
    }
    if (static_cast<double>(window) * block_bytes > budget) break;
    chosen = chunks;
  }
  return chosen;
}

}  // namespace zarrstream
