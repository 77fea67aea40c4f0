// The loader's pipeline (docs/architecture.md, "The life of a batch"): the order batches are
// produced and delivered in, how far ahead production runs, and the epochs it spans. It knows
// nothing of how a batch is made (a BatchProducer does that), so it can be driven without I/O.
//
// Coordinating threads (one per batch in flight, at most `prefetch`, which may be lowered while
// they run) each take the next batch slot and produce it; batches are delivered in order, and a
// failed batch is delivered as its error in its place. Past an epoch's last batch the coordinators
// go on with the next epoch's first batches (its order, seed and epoch + 1, is known), which
// AdvanceEpoch keeps: a training loop's next epoch does not start with an empty pipeline. Anything
// else (another epoch, a restored state) discards the pipeline. Batches are numbered by slot: the
// epoch's from `first`, then the next epoch's from 0.
//
// With an adaptive decode share each batch is produced under the share current when its
// production starts, and delivered with that share's generation, so that the share is judged only
// by batches made under it (decode_share.h).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "loader/batch_producer.h"
#include "loader/decode_share.h"
#include "loader/stage_timeline.h"

namespace zarrstream::internal {

// Coordinating threads for `prefetch` batches ahead: one per batch in flight, at most 4 (more add
// memory, not speed).
size_t NumCoordinators(size_t prefetch);

struct PipelineOptions {
  size_t coordinators = 1;  // threads producing batches
  uint64_t prefetch = 1;    // batches produced ahead of delivery, at least 1
  // The share GPU batches are produced with: `adaptive`'s where not null, else cpu_decode_share.
  double cpu_decode_share = 0;
  DecodeShareController* adaptive = nullptr;
};

class Pipeline {
 public:
  // Starts producing `plan`'s epoch from batch `first` with `producer` (which must outlive it);
  // a ConfigError where a coordinating thread cannot start.
  static Result<std::unique_ptr<Pipeline>> Start(BatchProducer& producer,
                                                 const PipelineOptions& options,
                                                 const SamplePlan& plan, uint64_t first);
  // Waits for the batches in production; drops those not delivered.
  ~Pipeline();

  // After the current epoch's last batch: delivery goes on with epoch `epoch` if it is the one
  // produced ahead (true), and production with the epoch after it.
  bool AdvanceEpoch(uint64_t epoch);

  // From now on at most `prefetch` (at least 1) batches ahead, fewer than the options' or the last
  // call's (a larger one is ignored: it needs more coordinating threads). The batches already
  // claimed are made and delivered; no new one is claimed until delivery is that close.
  void LowerPrefetch(uint64_t prefetch);

  // The next batch in order; waits for it. One consumer at a time (the loader serialises them).
  // With an adaptive decode share, tells it how long the consumer waited and how long since it
  // last asked.
  Result<std::shared_ptr<Batch>> Take();
  // Take, asking `interrupted` (when not empty) every kInterruptPoll while the batch is not ready,
  // without the pipeline's lock: once it says true, nullopt and nothing is taken.
  std::optional<Result<std::shared_ptr<Batch>>> Take(const std::function<bool()>& interrupted);
  static constexpr std::chrono::milliseconds kInterruptPoll{50};

 private:
  // One epoch's batches [first, plan.num_batches()) at slots [slot_begin, end_slot()).
  struct EpochBatches {
    EpochBatches(const SamplePlan& p, uint64_t f, uint64_t s) : plan(p), first(f), slot_begin(s) {}
    uint64_t end_slot() const { return slot_begin + plan.num_batches() - first; }
    SamplePlan plan;  // a copy: the loader's own may move to another epoch meanwhile
    uint64_t first;
    uint64_t slot_begin;
  };
  struct Produced {
    Result<std::shared_ptr<Batch>> batch;
    uint64_t share_generation;  // of the decode share it was produced with
  };

  // Under mutex_ (or before the drivers start).
  void AddNextEpoch();
  Pipeline(BatchProducer& producer, const PipelineOptions& options, const SamplePlan& plan,
           uint64_t first);
  // A coordinating thread.
  void Drive();
  // Produce, with an allocation that failed where no error was returned as the batch's error.
  Result<std::shared_ptr<Batch>> ProduceBatch(const SamplePlan& plan, uint64_t index,
                                              double cpu_share);

  BatchProducer& producer_;
  const PipelineOptions options_;
  std::mutex mutex_;
  std::condition_variable cv_;
  // The epoch being delivered, then the one produced ahead. Elements never move (pointers), and
  // one is dropped only once all its batches are delivered.
  std::deque<std::unique_ptr<EpochBatches>> epochs_;
  uint64_t prefetch_;  // options_.prefetch (at least 1), or lower (LowerPrefetch)
  uint64_t next_claim_ = 0;
  uint64_t next_deliver_ = 0;
  bool stopping_ = false;
  std::map<uint64_t, Produced> ready_;
  std::vector<std::thread> drivers_;
  std::optional<Clock::time_point> previous_ask_;  // the consumer's previous Take
};

}  // namespace zarrstream::internal
