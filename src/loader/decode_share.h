// The split of GPU batches' decoding between the worker threads and nvCOMP (DecodePlacement in
// zarrstream/loader.h, whose text parser lives in decode_share.cc): which chunks of a batch the
// threads decode under a CPU share (DecodePlacement::cpu_share), and the share that adapts
// (DecodePlacement::adaptive).
//
// The adaptive share: nvCOMP decoding beside a training step slows the step
// (they share the SMs and memory bandwidth), so every chunk the CPU takes over is GPU time the
// step gets back; a batch the CPU cannot finish in time is GPU time lost outright. The share of
// nvCOMP-decodable chunks the threads take therefore rises while the consumer hardly waits, and
// falls when it waits more than a small budget of its time: it settles about the most the CPU
// carries, where waiting is still cheaper than decoding on the GPU.
//
// It judges each share by a window of batches produced under it (its `generation`): batches in
// flight when it changed reflect the old share, and counting them would move it again for the
// same cause. One batch the consumer waited for a large part of its interval lowers it at once.
// Probing for more costs waiting when the CPU is at its limit: each time a raised share has to
// fall back, the next rise needs twice as many good windows (up to kMaxRiseWindows), so that the
// probes' waiting stays a small part of the time.
//
// Thread-safe: the coordinating threads read the share, the consumer's thread reports each batch.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

namespace zarrstream {

class DecodeShareController {
 public:
  struct Setting {
    double share = 0;         // of the chunks nvCOMP could decode, the worker threads' share
    uint64_t generation = 0;  // changes with the share
  };

  // Batches of one generation that judge its share.
  static constexpr int kWindow = 3;
  // The consumer may wait up to this share of its time at a share before it falls: the GPU's
  // decoding typically costs a step more than that (the training step's own target, GPU idle
  // at most 2 %).
  static constexpr double kWaitBudget = 0.02;
  // A window that waited at most this share of its time raises the share.
  static constexpr double kRiseBelow = 0.005;
  // A single wait of at least this share of its interval is an overload: the share falls at once
  // by the larger step.
  static constexpr double kOverload = 0.25;
  // Good windows a rise needs after raised shares had to fall back again and again.
  static constexpr int kMaxRiseWindows = 16;
  // The share moves by these steps, between 0 and 1.
  static constexpr double kStep = 0.1;
  static constexpr double kOverloadStep = 0.2;

  explicit DecodeShareController(double initial_share);

  // For a batch whose production starts now.
  Setting Current() const;

  // The consumer took a batch produced under `generation`: it waited `waited_seconds` for it (0 if
  // it was ready), `interval_seconds` after it asked for the previous one (> 0).
  void Observe(uint64_t generation, double waited_seconds, double interval_seconds);

 private:
  // Under mutex_. Moves to `share` (clamped) and starts a new window.
  void MoveTo(double share);
  void Lower(double step);
  void Raise();

  mutable std::mutex mutex_;
  Setting setting_;
  // The current generation's batches observed so far, and their waits and intervals.
  int window_batches_ = 0;
  double window_waited_ = 0;
  double window_seconds_ = 0;
  // Good windows in a row at this share, the number a rise needs, and whether the last move was
  // a rise (a probe: if it falls back, the next rise waits longer).
  int good_windows_ = 0;
  int rise_windows_ = 1;
  bool probing_ = false;
};

// The placement rule: of a batch's chunks that nvCOMP could decode (`decodable`, one flag per
// chunk in the batch's order), the worker threads decode `cpu_share` (0 to 1), spread evenly over
// the batch so that each wave gets its part, and nvCOMP the rest. Returns one flag per chunk: 1
// where nvCOMP decodes it.
std::vector<uint8_t> ChunksDecodedOnGpu(std::span<const uint8_t> decodable, double cpu_share);

// The share a batch whose production starts now is made with: `adaptive`'s where the share
// adapts (non-null), else the fixed `cpu_share` (generation 0).
DecodeShareController::Setting CurrentDecodeShare(const DecodeShareController* adaptive,
                                                  double cpu_share);

}  // namespace zarrstream
