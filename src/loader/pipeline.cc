#include "loader/pipeline.h"

#include <algorithm>
#include <new>
#include <string>
#include <system_error>

namespace zarrstream::internal {

size_t NumCoordinators(size_t prefetch) {
  return std::min<size_t>(std::max<size_t>(prefetch, 1), 4);
}

Pipeline::Pipeline(BatchProducer& producer, const PipelineOptions& options, const SamplePlan& plan,
                   uint64_t first)
    : producer_(producer), options_(options), prefetch_(std::max<uint64_t>(options.prefetch, 1)) {
  epochs_.push_back(std::make_unique<EpochBatches>(plan, first, 0));
  AddNextEpoch();
}

Result<std::unique_ptr<Pipeline>> Pipeline::Start(BatchProducer& producer,
                                                  const PipelineOptions& options,
                                                  const SamplePlan& plan, uint64_t first) {
  std::unique_ptr<Pipeline> pipeline(new Pipeline(producer, options, plan, first));
  pipeline->drivers_.reserve(options.coordinators);
  for (size_t i = 0; i < options.coordinators; ++i) {
    try {
      pipeline->drivers_.emplace_back([p = pipeline.get()] { p->Drive(); });
    } catch (const std::system_error& e) {
      // The destructor stops and joins the threads already started.
      return ConfigError("cannot start the loader's coordinating thread " + std::to_string(i + 1) +
                         " of " + std::to_string(options.coordinators) + ": " + e.what() +
                         "; a smaller prefetch starts fewer");
    }
  }
  return pipeline;
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

void Pipeline::LowerPrefetch(uint64_t prefetch) {
  std::lock_guard<std::mutex> lock(mutex_);
  prefetch_ = std::min(prefetch_, std::max<uint64_t>(prefetch, 1));
}

Result<std::shared_ptr<Batch>> Pipeline::Take() { return *Take(std::function<bool()>()); }

std::optional<Result<std::shared_ptr<Batch>>> Pipeline::Take(
    const std::function<bool()>& interrupted) {
  const std::optional<Clock::time_point> asked =
      options_.adaptive ? std::optional(Clock::now()) : std::nullopt;
  std::unique_lock<std::mutex> lock(mutex_);
  const auto ready = [&] { return ready_.count(next_deliver_) > 0; };
  const bool was_ready = ready();
  while (!ready()) {
    if (!interrupted) {
      cv_.wait(lock, ready);
    } else if (!cv_.wait_for(lock, kInterruptPoll, ready)) {
      lock.unlock();
      const bool stop = interrupted();
      lock.lock();
      if (stop) return std::nullopt;
    }
  }
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

Result<std::shared_ptr<Batch>> Pipeline::ProduceBatch(const SamplePlan& plan, uint64_t index,
                                                      double cpu_share) {
  try {
    return producer_.Produce(plan, index, cpu_share);
  } catch (const std::bad_alloc&) {
    // Sized allocations (batch blocks, decode buffers) return their own error; this is the rest.
    return OutOfMemoryError("out of memory making batch " + std::to_string(index) + " (epoch " +
                            std::to_string(plan.epoch()) + ")");
  }
}

void Pipeline::AddNextEpoch() {
  const EpochBatches& last = *epochs_.back();
  auto next = std::make_unique<EpochBatches>(last.plan, 0, last.end_slot());
  next->plan.SetEpoch(last.plan.epoch() + 1);
  epochs_.push_back(std::move(next));
}

void Pipeline::Drive() {
  for (;;) {
    const EpochBatches* epoch = nullptr;
    uint64_t slot = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // Never further than the epoch after the one being delivered (slots are claimed before they
      // are delivered: the difference does not wrap, whatever the prefetch).
      cv_.wait(lock, [&] {
        return stopping_ || (next_claim_ - next_deliver_ < prefetch_ &&
                             next_claim_ < epochs_.back()->end_slot());
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
    Result<std::shared_ptr<Batch>> batch = ProduceBatch(epoch->plan, index, share.share);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ready_.emplace(slot, Produced{std::move(batch), share.generation});
    }
    cv_.notify_all();
  }
}

}  // namespace zarrstream::internal
