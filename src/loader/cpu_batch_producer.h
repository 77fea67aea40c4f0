// Batches made on the CPU (LoaderOptions::device kCpu): plan → read + decode → assemble, on the
// loader's thread pool. Apart from the GPU path because the two share only planning and layout:
// here decoded chunks go through the chunk cache and are copied into a host batch, there they are
// staged for nvCOMP and scattered by a kernel.
//
// A batch serves what it can from the chunk cache and reads the rest in waves: a wave's chunks are
// read and decoded by ReadChunks on the pool, then copied into the batch by pool tasks (one per
// chunk, all its copies), and the wave's buffers go to the cache. Waves bound the decoded bytes a
// batch holds at once (kWaveBytes, at least two chunks per worker), whatever the batch's size: an
// ERA5 0.25° batch of 16 samples needs ~9 GB of chunks, which never sit in memory together.
#pragma once

#include "loader/batch_producer.h"

namespace zarrstream::internal {

class CpuBatchProducer : public BatchProducerBase {
 public:
  // Decoded bytes one batch in flight reads at once (see the overview).
  static constexpr uint64_t kWaveBytes = uint64_t{256} << 20;

  explicit CpuBatchProducer(BatchContext& context) : BatchProducerBase(context) {}

  Result<std::shared_ptr<Batch>> Produce(const SamplePlan& epoch_plan, uint64_t index,
                                         double cpu_share) override;

 private:
  class Job;
};

}  // namespace zarrstream::internal
