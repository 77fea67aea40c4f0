#include "loader/pipeline.h"

#include <algorithm>

namespace zarrstream::internal {

size_t NumCoordinators(const LoaderOptions& options) {
  return std::min<size_t>(std::max<size_t>(options.prefetch, 1), 4);
}

Pipeline::Pipeline(BatchProducer& producer, const PipelineOptions& options, const SamplePlan& plan,
                   uint64_t first)
    : producer_(producer), options_(options) {
  epochs_.push_back(std::make_unique<EpochBatches>(plan, first, 0));
  AddNextEpoch();
  for (size_t i = 0; i < options_.coordinators; ++i) {
    drivers_.emplace_back([this] { Drive(); });
  }
}

Pipeline::~Pipeline() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : drivers_) t.join();
}

bool Pipeline::AdvanceEpoch(uint64_t epoch) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (epochs_.size() < 2 || epochs_[1]->plan.epoch() != epoch ||
      next_deliver_ != epochs_.front()->end_slot()) {
    return false;
  }
  epochs_.pop_front();  // every batch of it was delivered: no driver uses its plan
  AddNextEpoch();
  cv_.notify_all();
  return true;
}

Result<std::shared_ptr<Batch>> Pipeline::Take() {
  const std::optional<Clock::time_point> asked =
      options_.adaptive ? std::optional(Clock::now()) : std::nullopt;
  std::unique_lock<std::mutex> lock(mutex_);
  const bool was_ready = ready_.count(next_deliver_) > 0;
  cv_.wait(lock, [&] { return ready_.count(next_deliver_) > 0; });
  auto node = ready_.extract(next_deliver_);
  ++next_deliver_;
  lock.unlock();
  cv_.notify_all();
  Produced& produced = node.mapped();
  // A pipeline's first batch is waited for while it fills, whatever the share: not counted.
  if (asked && produced.batch.ok() && previous_ask_) {
    const double waited = was_ready ? 0 : Seconds(Clock::now() - *asked);
    options_.adaptive->Observe(produced.share_generation, waited, Seconds(*asked - *previous_ask_));
  }
  previous_ask_ = asked;
  return std::move(produced.batch);
}

void Pipeline::AddNextEpoch() {
  const EpochBatches& last = *epochs_.back();
  auto next = std::make_unique<EpochBatches>(last.plan, 0, last.end_slot());
  next->plan.SetEpoch(last.plan.epoch() + 1);
  epochs_.push_back(std::move(next));
}

void Pipeline::Drive() {
  const uint64_t prefetch = std::max<uint64_t>(options_.prefetch, 1);
  for (;;) {
    const EpochBatches* epoch = nullptr;
    uint64_t slot = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // Never further than the epoch after the one being delivered.
      cv_.wait(lock, [&] {
        return stopping_ ||
               (next_claim_ < next_deliver_ + prefetch && next_claim_ < epochs_.back()->end_slot());
      });
      if (stopping_) return;
      slot = next_claim_++;
      for (const auto& e : epochs_) {
        if (slot < e->end_slot()) {
          epoch = e.get();
          break;
        }
      }
    }
    const uint64_t index = epoch->first + (slot - epoch->slot_begin);
    const DecodeShareController::Setting share =
        CurrentDecodeShare(options_.adaptive, options_.cpu_decode_share);
    Result<std::shared_ptr<Batch>> batch = producer_.Produce(epoch->plan, index, share.share);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ready_.emplace(slot, Produced{std::move(batch), share.generation});
    }
    cv_.notify_all();
  }
}

}  // namespace zarrstream::internal
