// The adaptive split of GPU batches' decoding between the worker threads and nvCOMP
// (LoaderOptions::adapt_cpu_decode_share): the share of nvCOMP-decodable chunks the threads take
// rises while batches are ready early and falls when the consumer has to wait for one, so that it
// settles at about as much as the CPU can carry without making the training step wait. Every chunk
// the CPU takes is GPU time the training step keeps; a batch it cannot finish in time is GPU time
// lost outright.
//
// Only batches produced under the current share (its `generation`) move it: those in flight when
// it changed reflect the old one, and counting them would move it again for the same cause.
//
// Thread-safe: the coordinating threads read the share, the consumer's thread reports each batch.
#pragma once

#include <cstdint>
#include <mutex>

namespace zarrstream {

class DecodeShareController {
 public:
  struct Setting {
    double share = 0;         // of the chunks nvCOMP could decode, the worker threads' share
    uint64_t generation = 0;  // changes with the share
  };

  // The share moves by these steps, between 0 and 1.
  static constexpr double kStepUp = 0.1;
  static constexpr double kStepDown = 0.2;
  // A batch ready at least this share of the interval between the consumer's takes before it was
  // taken leaves room for more CPU decoding.
  static constexpr double kEarlyMargin = 0.25;

  explicit DecodeShareController(double initial_share);

  // For a batch whose production starts now.
  Setting Current() const;

  // The consumer took a batch produced under `generation`: it waited `waited_seconds` for it (0 if
  // it was ready), which had been ready `early_seconds` before (0 if it waited), `interval_seconds`
  // after taking the previous one (0 if there was none to compare with).
  void Observe(uint64_t generation, double waited_seconds, double early_seconds,
               double interval_seconds);

 private:
  mutable std::mutex mutex_;
  Setting setting_;
};

}  // namespace zarrstream
