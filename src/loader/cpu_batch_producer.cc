#include "loader/cpu_batch_producer.h"

#include <new>
#include <numeric>
#include <utility>

#include "util/checked_size.h"
#include "util/format.h"

namespace zarrstream::internal {

using DecodedChunks = std::vector<std::pair<size_t, std::shared_ptr<const ChunkCache::Entry>>>;

// The reading, decoding and assembly of one planned batch: chunk k is reads.chunks[k].
class CpuBatchProducer::Job {
 public:
  Job(CpuBatchProducer& producer, Batch& b, uint64_t epoch, uint64_t index,
      const BatchReadPlan& reads, size_t samples)
      : producer_(producer),
        context_(producer.context_),
        b_(b),
        epoch_(epoch),
        index_(index),
        reads_(reads) {
    bad.assign(samples, 0);
  }

  // The buffers tendency targets and their bases are decoded into (LoaderGeometry::base_slabs):
  // two float64 values per target element of the batch.
  Status AllocateTendencies() {
    const LoaderGeometry& g = context_.geometry;
    if (g.base_slabs.empty()) return Status::Ok();
    const uint64_t elements = bad.size() * g.target_slabs.size() * g.slab_elements;
    try {
      tendency_targets_.assign(elements, 0.0);
      tendency_bases_.assign(elements, 0.0);
    } catch (const std::bad_alloc&) {
      return OutOfMemoryFor(
          "the tendency targets of a batch (their values and their bases, in "
          "float64)",
          2 * elements * sizeof(double));
    }
    return Status::Ok();
  }

  // Cache hits first, then the misses this batch claimed, in waves, then the chunks other batches
  // in flight were decoding (a chunk whose decode failed there is decoded here, unclaimed, so that
  // its error is this batch's too).
  void Run() {
    AssembleResident();
    AssembleComputedForcings();
    DecodedChunks hits;
    std::vector<size_t> misses;
    std::vector<std::pair<size_t, std::shared_ptr<ChunkCache::Decode>>> elsewhere;
    for (size_t k = 0; k < reads_.chunks.size(); ++k) {
      ChunkCache::Lookup found =
          context_.cache.FindOrClaim(reads_.chunks[k].array, reads_.chunks[k].linear);
      if (found.entry) {
        hits.emplace_back(k, std::move(found.entry));
      } else if (found.claimed) {
        misses.push_back(k);
      } else {
        elsewhere.emplace_back(k, std::move(found.decode));
      }
    }
    context_.counters.cache_hits += hits.size();
    AssembleAll(hits);
    hits.clear();
    ReadInWaves(misses, /*claimed=*/true);
    std::vector<size_t> failed_elsewhere;
    for (auto& [k, decode] : elsewhere) {
      std::shared_ptr<const ChunkCache::Entry> entry = ChunkCache::WaitFor(decode);
      if (entry) {
        hits.emplace_back(k, std::move(entry));
      } else {
        failed_elsewhere.push_back(k);
      }
    }
    context_.counters.cache_hits += hits.size();
    AssembleAll(hits);
    ReadInWaves(failed_elsewhere, /*claimed=*/false);
    AssembleTendencies();
    // Patch padding with a value: last, over the forcings and tendencies, which fill whole slabs
    // (the chunks' copies never reach it).
    for (const PlannedPadding& box : reads_.padding) producer_.AssemblePadding(b_, box);
  }

  // Per sample: 1 where one of its chunks failed; the first failure.
  std::vector<uint8_t> bad;
  Status first_error;

 private:
  // Copies every planned box of `chunk` (decoded in `bytes`) into the batch.
  void Assemble(const PlannedChunk& chunk, const std::byte* bytes) {
    const internal::ArrayState& array = *context_.geometry.arrays[chunk.array];
    for (const PlannedCopy& copy : chunk.copies) {
      if (copy.target && !tendency_targets_.empty()) {
        // A tendency target or its base: decoded aside, differenced once the batch is read.
        const LoaderGeometry& g = context_.geometry;
        const size_t channel = g.target_slabs[copy.slab].channel;
        std::vector<double>& aside = copy.base ? tendency_bases_ : tendency_targets_;
        AssembleDecoded(
            bytes, array.metadata.data_type, context_.chunk_shapes[chunk.array], copy,
            aside.data() + (copy.sample * g.target_slabs.size() + copy.slab) * g.slab_elements,
            context_.slab_strides[channel], &g.cf[channel]);
        continue;
      }
      const CopyTarget to = producer_.TargetOf(b_, copy);
      AssembleCopy(bytes, array.metadata.data_type, context_.chunk_shapes[chunk.array], copy,
                   to.slab, context_.options.dtype, *to.strides, to.transform, to.mask);
    }
  }

  // On the pool only: this coordinating thread waits and does not add to the thread budget.
  void AssembleAll(const DecodedChunks& ready) {
    if (ready.empty()) return;
    StageSpan stage(context_.timeline, "assemble", epoch_, index_);
    std::vector<size_t> indices(ready.size());
    std::iota(indices.begin(), indices.end(), size_t{0});
    {
      TaskGroup group(context_.pool.get(), ready.size(), [&](size_t i) {
        Assemble(reads_.chunks[ready[i].first], ready[i].second->bytes.data());
      });
      group.Schedule(indices);
    }  // waits for every copy
    context_.counters.assemble_ns += stage.ElapsedNanoseconds();
  }

  // The target slabs of LoaderGeometry::base_slabs: each target's tendency from its base,
  // normalised with the tendency's statistics, into the batch.
  void AssembleTendencies() {
    if (tendency_targets_.empty()) return;
    StageSpan stage(context_.timeline, "assemble", epoch_, index_);
    const LoaderGeometry& g = context_.geometry;
    const size_t slabs = bad.size() * g.target_slabs.size();
    std::vector<size_t> indices(slabs);
    std::iota(indices.begin(), indices.end(), size_t{0});
    {
      TaskGroup group(context_.pool.get(), slabs, [&](size_t i) {
        PlannedCopy copy;
        copy.sample = static_cast<uint32_t>(i / g.target_slabs.size());
        copy.slab = static_cast<uint32_t>(i % g.target_slabs.size());
        copy.target = true;
        CopyTarget to = producer_.TargetOf(b_, copy);
        to.transform.mean = g.target_mean[copy.slab];
        to.transform.inv_std = g.target_inv_std[copy.slab];
        const uint64_t offset = i * g.slab_elements;
        AssembleTendency(tendency_targets_.data() + offset, tendency_bases_.data() + offset,
                         g.slab_elements, to.transform, to.slab, context_.options.dtype, to.mask);
      });
      group.Schedule(indices);
    }  // waits for every slab
    context_.counters.assemble_ns += stage.ElapsedNanoseconds();
  }

  // The static fields' slabs, from the boxes the loader keeps.
  void AssembleResident() {
    if (reads_.resident.empty()) return;
    StageSpan stage(context_.timeline, "assemble", epoch_, index_);
    std::vector<size_t> indices(reads_.resident.size());
    std::iota(indices.begin(), indices.end(), size_t{0});
    {
      TaskGroup group(context_.pool.get(), indices.size(), [&](size_t i) {
        const PlannedChunk& chunk = reads_.resident[i];
        Assemble(chunk, context_.resident[chunk.array]->bytes.data());
      });
      group.Schedule(indices);
    }  // waits for every copy
    context_.counters.assemble_ns += stage.ElapsedNanoseconds();
  }

  // The computed forcings' slabs, one task each.
  void AssembleComputedForcings() {
    if (reads_.computed.empty()) return;
    StageSpan stage(context_.timeline, "assemble", epoch_, index_);
    std::vector<size_t> indices(reads_.computed.size());
    std::iota(indices.begin(), indices.end(), size_t{0});
    {
      TaskGroup group(context_.pool.get(), indices.size(),
                      [&](size_t i) { producer_.AssembleComputedForcing(b_, reads_.computed[i]); });
      group.Schedule(indices);
    }  // waits for every slab
    context_.counters.assemble_ns += stage.ElapsedNanoseconds();
  }

  void Fail(size_t k, Status status) {
    for (const PlannedCopy& copy : reads_.chunks[k].copies) bad[copy.sample] = 1;
    if (first_error.ok()) first_error = std::move(status);
  }

  // Reads and decodes chunks `keys` in waves and assembles them; `claimed`: this batch claimed
  // them in the cache, and publishes (or abandons) each.
  void ReadInWaves(const std::vector<size_t>& keys, bool claimed) {
    for (size_t begin = 0; begin < keys.size();) {
      std::vector<ChunkRead> wave;
      std::vector<std::shared_ptr<ChunkCache::Entry>> entries;
      std::vector<size_t> wave_keys;
      const size_t end = PlanWave(keys, begin, claimed, wave, entries, wave_keys);
      StageSpan stage(context_.timeline, "read+decode", epoch_, index_);
      ReadChunks(wave, context_.pool.get(), 0, &context_.index_cache, &context_.read_counters);
      context_.counters.read_decode_ns += stage.ElapsedNanoseconds();
      DecodedChunks decoded;
      for (size_t i = 0; i < wave.size(); ++i) {
        const size_t k = wave_keys[i];
        const PlannedChunk& chunk = reads_.chunks[k];
        if (!wave[i].status.ok()) {
          if (claimed) context_.cache.Abandon(chunk.array, chunk.linear);
          Fail(k, std::move(wave[i].status));
          continue;
        }
        entries[i]->missing = wave[i].missing;
        context_.counters.bytes_decoded += entries[i]->bytes.size();
        decoded.emplace_back(k, entries[i]);
        if (claimed) context_.cache.Insert(chunk.array, chunk.linear, std::move(entries[i]));
      }
      AssembleAll(decoded);
      begin = end;
    }
  }

  // The wave of `keys` from `begin`: its reads, their buffers and their keys; returns where it
  // ends. A chunk whose buffer cannot be allocated fails (and is abandoned where `claimed`).
  size_t PlanWave(const std::vector<size_t>& keys, size_t begin, bool claimed,
                  std::vector<ChunkRead>& wave,
                  std::vector<std::shared_ptr<ChunkCache::Entry>>& entries,
                  std::vector<size_t>& wave_keys) {
    const uint64_t min_wave_chunks = 2 * context_.pool->num_threads();
    uint64_t wave_bytes = 0;
    size_t end = begin;
    for (; end < keys.size() && (wave.size() < min_wave_chunks || wave_bytes < kWaveBytes); ++end) {
      const PlannedChunk& chunk = reads_.chunks[keys[end]];
      const internal::ArrayState* array = context_.geometry.arrays[chunk.array];
      const uint64_t bytes = ReadChunkBytes(*array);
      std::shared_ptr<ChunkCache::Entry> entry;
      try {
        entry = context_.cache.Allocate(bytes);
      } catch (const std::bad_alloc&) {
        if (claimed) context_.cache.Abandon(chunk.array, chunk.linear);
        Fail(keys[end],
             OutOfMemoryFor("a chunk cache entry for a read chunk of shape " +
                                FormatIndex(array->read_chunk_shape) + " of " + array->Describe(),
                            bytes));
        continue;
      }
      ChunkRead read;
      read.array = array;
      read.coords = chunk.coords;
      read.out = entry->bytes.span();
      wave.push_back(std::move(read));
      entries.push_back(std::move(entry));
      wave_keys.push_back(keys[end]);
      wave_bytes += bytes;
    }
    return end;
  }

  CpuBatchProducer& producer_;
  BatchContext& context_;
  Batch& b_;
  const uint64_t epoch_, index_;
  const BatchReadPlan& reads_;
  // LoaderGeometry::base_slabs: per sample and target slab, its values and its base's, decoded
  // (float64, slab layout); empty without tendency targets.
  std::vector<double> tendency_targets_, tendency_bases_;
};

Result<std::shared_ptr<Batch>> CpuBatchProducer::Produce(const SamplePlan& epoch_plan,
                                                         uint64_t index, double /*cpu_share*/) {
  const uint64_t epoch = epoch_plan.epoch();
  StageSpan plan_stage(context_.timeline, "plan", epoch, index);
  ZS_ASSIGN_OR_RETURN(SampleBatch samples, epoch_plan.Batch(index));
  BatchReadPlan reads = PlanBatchReads(context_.geometry, samples);
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<Batch> batch, AllocateBatch(samples.size()));
  Batch& b = *batch;
  FinishPlanning(b, epoch, index, samples, reads, plan_stage);

  Job job(*this, b, epoch, index, reads, samples.size());
  ZS_RETURN_IF_ERROR(job.AllocateTendencies());
  job.Run();
  if (!job.first_error.ok()) {
    if (!context_.options.skip_bad_samples) {
      return BatchError(std::move(job.first_error), job.bad, samples, epoch, index);
    }
    CompactBatch(b, job.bad);
  }
  return batch;
}

}  // namespace zarrstream::internal
