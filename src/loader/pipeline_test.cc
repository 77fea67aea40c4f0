// The pipeline's order, failed batches and epochs, driven by a producer that makes
// empty batches in memory (no store): what it delivers is what a training loop sees.
#include "loader/pipeline.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "util/status_test_util.h"

namespace zarrstream::internal {
namespace {

SamplePlan PlanOf(uint64_t samples, uint64_t batch_size) {
  SampledDim dim;
  dim.name = "time";
  dim.range = {0, samples};
  SamplePlanOptions options;
  options.shuffle = ShuffleMode::kNone;
  options.batch_size = batch_size;
  Result<SamplePlan> plan = SamplePlan::Create({dim}, options);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return std::move(plan).value();
}

// Makes a batch that says which (epoch, index) it is; batch `fail_index` of every epoch fails.
// With `hold_first`, batch 0 of epoch 0 is made only after batch 1 is: the two finish out of order.
class FakeProducer : public BatchProducer {
 public:
  Result<std::shared_ptr<Batch>> Produce(const SamplePlan& plan, uint64_t index,
                                         double cpu_share) override {
    std::unique_lock<std::mutex> lock(mutex_);
    shares_.insert(cpu_share);
    ++started_[{plan.epoch(), index}];
    if (hold_first && plan.epoch() == 0 && index == 0) {
      cv_.wait(lock, [&] { return produced_.count({0, 1}) > 0; });
    }
    cv_.wait(lock, [&] { return !held_; });
    produced_.insert({plan.epoch(), index});
    cv_.notify_all();
    if (index == throw_index) throw std::bad_alloc();
    if (index == fail_index) {
      return StorageError("batch " + std::to_string(index) + " of epoch " +
                          std::to_string(plan.epoch()) + " failed");
    }
    std::shared_ptr<Batch> batch = BatchAccess::Make();
    BatchAccess::epoch(*batch) = plan.epoch();
    BatchAccess::index(*batch) = index;
    return batch;
  }

  // Batches are made only after Release.
  void Hold() {
    std::lock_guard<std::mutex> lock(mutex_);
    held_ = true;
  }
  void Release() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      held_ = false;
    }
    cv_.notify_all();
  }

  std::set<double> shares() {
    std::lock_guard<std::mutex> lock(mutex_);
    return shares_;
  }
  // (epoch, index) -> how many times its production started.
  std::map<std::pair<uint64_t, uint64_t>, int> started() {
    std::lock_guard<std::mutex> lock(mutex_);
    return started_;
  }
  // Waits until `n` batches are made.
  void WaitProduced(size_t n) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return produced_.size() >= n; });
  }

  uint64_t fail_index = ~uint64_t{0};
  uint64_t throw_index = ~uint64_t{0};  // throws std::bad_alloc, as an allocation may
  bool hold_first = false;

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::set<std::pair<uint64_t, uint64_t>> produced_;
  std::set<double> shares_;
  std::map<std::pair<uint64_t, uint64_t>, int> started_;
  bool held_ = false;
};

PipelineOptions Options(size_t coordinators, uint64_t prefetch) {
  PipelineOptions options;
  options.coordinators = coordinators;
  options.prefetch = prefetch;
  return options;
}

std::unique_ptr<Pipeline> Start(BatchProducer& producer, const PipelineOptions& options,
                                const SamplePlan& plan, uint64_t first) {
  Result<std::unique_ptr<Pipeline>> pipeline = Pipeline::Start(producer, options, plan, first);
  EXPECT_TRUE(pipeline.ok()) << pipeline.status().ToString();
  return std::move(pipeline).value();
}

// The next batch must be batch `index` of `epoch`.
void ExpectNext(Pipeline& pipeline, uint64_t epoch, uint64_t index) {
  Result<std::shared_ptr<Batch>> batch = pipeline.Take();
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ((*batch)->epoch(), epoch);
  EXPECT_EQ((*batch)->index(), index);
}

TEST(PipelineTest, DeliversInOrderWhenBatchesFinishOutOfOrder) {
  FakeProducer producer;
  producer.hold_first = true;
  const SamplePlan plan = PlanOf(10, 2);
  std::unique_ptr<Pipeline> pipeline = Start(producer, Options(2, 2), plan, 0);
  for (uint64_t i = 0; i < plan.num_batches(); ++i) ExpectNext(*pipeline, 0, i);
}

TEST(PipelineTest, DeliversAFailedBatchAsItsErrorInItsPlace) {
  FakeProducer producer;
  producer.fail_index = 2;
  const SamplePlan plan = PlanOf(10, 2);
  std::unique_ptr<Pipeline> pipeline = Start(producer, Options(3, 3), plan, 0);
  ExpectNext(*pipeline, 0, 0);
  ExpectNext(*pipeline, 0, 1);
  ExpectErrorContains(pipeline->Take().status(), ErrorCode::kStorage, {"batch 2 of epoch 0"});
  ExpectNext(*pipeline, 0, 3);
  ExpectNext(*pipeline, 0, 4);
}

TEST(PipelineTest, AnAllocationThatThrowsIsTheBatchsError) {
  FakeProducer producer;
  producer.throw_index = 1;
  const SamplePlan plan = PlanOf(6, 2);
  std::unique_ptr<Pipeline> pipeline = Start(producer, Options(2, 2), plan, 0);
  ExpectNext(*pipeline, 0, 0);
  ExpectErrorContains(pipeline->Take().status(), ErrorCode::kOutOfMemory,
                      {"out of memory making batch 1 (epoch 0)"});
  ExpectNext(*pipeline, 0, 2);
}

TEST(PipelineTest, AnInterruptedTakeTakesNothing) {
  FakeProducer producer;
  producer.Hold();
  const SamplePlan plan = PlanOf(6, 2);
  std::unique_ptr<Pipeline> pipeline = Start(producer, Options(2, 2), plan, 0);
  int asked = 0;
  EXPECT_FALSE(pipeline->Take([&] { return ++asked == 2; }).has_value());
  EXPECT_EQ(asked, 2);  // asked while waiting, until it said so
  producer.Release();
  ExpectNext(*pipeline, 0, 0);
  std::optional<Result<std::shared_ptr<Batch>>> next = pipeline->Take([] { return false; });
  ASSERT_TRUE(next.has_value() && next->ok());
  EXPECT_EQ((**next)->index(), 1U);
  ExpectNext(*pipeline, 0, 2);
}

TEST(PipelineTest, StartsAtTheFirstBatchAskedFor) {
  FakeProducer producer;
  const SamplePlan plan = PlanOf(10, 2);
  std::unique_ptr<Pipeline> pipeline = Start(producer, Options(1, 1), plan, 3);
  ExpectNext(*pipeline, 0, 3);
  ExpectNext(*pipeline, 0, 4);
}

TEST(PipelineTest, GoesOnIntoTheNextEpochWhenItIsAdvancedTo) {
  FakeProducer producer;
  const SamplePlan plan = PlanOf(6, 2);  // 3 batches an epoch
  std::unique_ptr<Pipeline> pipeline = Start(producer, Options(2, 2), plan, 0);
  ExpectNext(*pipeline, 0, 0);
  EXPECT_FALSE(pipeline->AdvanceEpoch(1));  // the epoch is not delivered yet
  ExpectNext(*pipeline, 0, 1);
  ExpectNext(*pipeline, 0, 2);
  EXPECT_FALSE(pipeline->AdvanceEpoch(5));  // not the epoch produced ahead
  ASSERT_TRUE(pipeline->AdvanceEpoch(1));
  for (uint64_t i = 0; i < 3; ++i) ExpectNext(*pipeline, 1, i);
  ASSERT_TRUE(pipeline->AdvanceEpoch(2));
  ExpectNext(*pipeline, 2, 0);
}

TEST(PipelineTest, ALoweredPrefetchKeepsTheBatchesMadeAheadAndStartsNoneUntilThatClose) {
  FakeProducer producer;
  const SamplePlan plan = PlanOf(20, 2);  // 10 batches an epoch
  std::unique_ptr<Pipeline> pipeline = Start(producer, Options(3, 3), plan, 0);
  producer.WaitProduced(3);  // batches 0 to 2, made ahead
  producer.Hold();           // from here a batch started is counted but not made
  pipeline->LowerPrefetch(1);
  pipeline->LowerPrefetch(2);  // higher than the last: ignored
  ExpectNext(*pipeline, 0, 0);
  ExpectNext(*pipeline, 0, 1);
  // Two and one batches ahead after these: none started.
  EXPECT_EQ(producer.started().size(), 3U);
  producer.Release();
  for (uint64_t i = 2; i < plan.num_batches(); ++i) ExpectNext(*pipeline, 0, i);
  for (const auto& [batch, starts] : producer.started()) {
    EXPECT_EQ(starts, 1) << "batch " << batch.second << " of epoch " << batch.first;
  }
}

TEST(PipelineTest, ProducesWithTheFixedOrTheAdaptiveShare) {
  const SamplePlan plan = PlanOf(4, 1);
  {
    FakeProducer producer;
    PipelineOptions options = Options(1, 1);
    options.cpu_decode_share = 0.3;
    std::unique_ptr<Pipeline> pipeline = Start(producer, options, plan, 0);
    ExpectNext(*pipeline, 0, 0);
    EXPECT_EQ(producer.shares(), std::set<double>{0.3});
  }
  {
    FakeProducer producer;
    DecodeShareController adaptive(0.6);
    PipelineOptions options = Options(1, 1);
    options.cpu_decode_share = 0.3;
    options.adaptive = &adaptive;
    std::unique_ptr<Pipeline> pipeline = Start(producer, options, plan, 0);
    ExpectNext(*pipeline, 0, 0);
    EXPECT_EQ(producer.shares(), std::set<double>{0.6});
  }
}

}  // namespace
}  // namespace zarrstream::internal
