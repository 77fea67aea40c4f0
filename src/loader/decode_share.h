// The split of GPU batches' decoding between the worker threads and nvCOMP (DecodePlacement in
// zarrstream/loader.h, whose text parser lives in decode_share.cc): which chunks of a batch the
// threads decode under a CPU share (DecodePlacement::cpu_share), and the share that adapts
// (DecodePlacement::adaptive).
//
// The adaptive share is judged by what it costs the consumer: its time per batch (the interval
// between its takes: its step plus any wait for the batch). Both costs of a share show there: a
// share the CPU cannot carry makes the consumer wait, and nvCOMP decoding beside a training step
// slows the step (they share the SMs and memory bandwidth). Waits alone do not tell the two apart:
// on a host whose cores fall a little short, waiting a few per cent can cost less than decoding on
// the GPU, or more, depending on the model.
//
// The shares tried lie on a grid of tenths. A search measures the current share and the shares a
// span above and below it (the first span reaches both ends), moves to the fastest, halves the
// span (5, 2, 1 tenths) and goes on until the fastest is the centre of a span of one: about six
// windows. Shares within kTie of the fastest count as equally fast, and the highest of them is
// kept (the same time for less GPU work). Settled, the share holds and every window measures it
// again; after a number of windows a neighbour is tried: one that is as fast takes over (and the
// search goes on from there), otherwise the share returns and the next probe waits twice as long
// (up to kMaxHoldWindows). A settled share that turns kChanged slower (the page cache went cold,
// the model or the host's load changed) starts a search again.
//
// Every chunk on the CPU (share 1) with a consumer that waited for no batch (its waits under kTie
// of its time) cannot be beaten: no other share takes less from the step, and the CPU cost the
// consumer nothing. A window that shows this ends the search at once (a search pays for the slower
// shares it measures: a 200-step run lost 3 % to one), and while the windows go on showing it no
// neighbour is probed (a probe of 0.9 cost the consumer 13–165 ms of waiting each time on one H100
// with 16 cores, and auto ran 1–2 % behind every chunk on the CPU); windows in which the consumer
// waited count towards a probe, kMaxHoldWindows of them at first, and a consumer kChanged slower
// starts a search as from any settled share. Where the share starts at 1 ("auto",
// DecodePlacement::kAutoStart), a host whose cores carry the decoding never measures another
// share.
//
// A share is judged by the batches produced under it (its `generation`): batches in flight when it
// changed reflect the old share, and the first batch after the change was preceded by a step that
// ran beside the old share's decoding, so neither counts. The mean of a window of kWindow batches
// judges it, leaving out spikes (a checkpoint or a validation pass); one batch the consumer waited
// for a large part of its interval ends the window at once.
//
// The ranks of a data-parallel job (LoaderOptions::world_size > 1) step together: the gradients'
// all-reduce makes every rank's step wait for the slowest, so a rank's time per batch is the same
// on every rank and holds the other ranks' waits as much as its own. Controllers searching on their
// own judge their shares by each other's, and the steps of a job whose ranks wait in turn are
// noisy: on two H200s with 16 cores each, rank 0's share moved between 0.1 and 0.7 for a whole
// 100-step run, 7 % slower than nvCOMP decoding every chunk. A controller of a rank
// (Steps::kSharedWithRanks) therefore uses only what every rank sees alike, the time per batch
// (no wait of its own ends a window or a search), and measures only the two ends, whose times
// differ by far more than two ranks' measurements of one share: every rank settles at the same
// end, the faster (within kTie, the CPU end). No neighbour is probed; a settled end that turns
// kChanged slower measures both ends again. What it gives up is a mix between the ends: in that
// run a share of 0.3 stepped about 1 % faster than nvCOMP alone.
//
// Thread-safe: the coordinating threads read the share, the consumer's thread reports each batch.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
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

  // The shares tried: 0, 1/kLevels, ..., 1.
  static constexpr int kLevels = 10;
  // Batches of one generation whose mean interval judges its share (after the first, which is not
  // counted); an interval over kSpike times the window's median is left out.
  static constexpr int kWindow = 4;
  static constexpr double kSpike = 2;
  // Shares whose time per batch is within this fraction of the fastest's are as fast.
  static constexpr double kTie = 0.01;
  // A single wait of at least this share of its interval ends the window at once: the CPU is far
  // behind, and a median would only make the consumer wait longer.
  static constexpr double kOverload = 0.25;
  // A settled share that measures this much slower than before starts a new search.
  static constexpr double kChanged = 0.10;
  // Windows a settled share holds before a neighbour is tried, doubling up to this each time the
  // neighbour was slower.
  static constexpr int kMaxHoldWindows = 16;
  // The batches a loader's first pipeline delivers first pay for its memory (device blocks, the
  // decode workspaces' pinned staging: about 0.3 s per GB), which makes the consumer wait whatever
  // the share: on one H100 with 16 cores the fifth to seventh batches were waited for 17–60 ms
  // with every chunk on the CPU, and never after. The loader's controller judges none of them.
  static constexpr int kStartupBatches = 8;

  // Whose time per batch the consumer's is: its own, or that of every rank of a data-parallel job
  // (the header comment).
  enum class Steps { kOwn, kSharedWithRanks };

  // Starts a search at `initial_share`, rounded to the grid and clamped to 0..1, whose first round
  // measures both ends (every chunk on nvCOMP, every chunk on the CPU), where the fastest share
  // often is (a share in between makes each wave wait for both decoders). The first
  // `startup_batches` batches observed judge nothing (the loader's: kStartupBatches).
  explicit DecodeShareController(double initial_share, int startup_batches = 0,
                                 Steps steps = Steps::kOwn);

  // For a batch whose production starts now.
  Setting Current() const;

  // nvCOMP could not have the GPU memory it decodes in: every chunk on the CPU (share 1) from the
  // next batch on, for good (no more searches or probes).
  void StayAtCpuEnd();
  // The next `batches` batches judge nothing, and the window so far is dropped: the pipeline
  // starts again (Loader::SetPrefetch) and pays for its memory again.
  void PassOver(int batches);

  // The consumer took a batch produced under `generation`: it waited `waited_seconds` for it (0 if
  // it was ready), `interval_seconds` after it asked for the previous one (> 0).
  void Observe(uint64_t generation, double waited_seconds, double interval_seconds);

 private:
  static constexpr double kUnmeasured = -1;

  // Under mutex_. A window at level_ measured `seconds` per batch, the consumer waiting
  // `waited_share` of that time: record it and choose the next.
  void Judge(double seconds, double waited_share);
  // Steps::kSharedWithRanks: the next end to measure, or, both measured, settles at the faster.
  void SearchEnds();
  // The next level to measure in the search, or, when the round is measured, its fastest level
  // as the next round's centre; settles when that round's span is one and its centre is fastest.
  void Search();
  // Of `levels` (measured ones; others ignored), the highest within kTie of the fastest.
  int Fastest(std::initializer_list<int> levels) const;
  // A new search from level_ with span `span`, forgetting every measurement but level_'s.
  void StartSearch(int span);
  // Ends the search at centre_: the share holds, a neighbour tried after `hold_windows` windows.
  void Settle(int hold_windows);
  // Produces at `level` from the next batch on (a new generation where the share changes).
  void MoveTo(int level);

  const Steps steps_;
  mutable std::mutex mutex_;
  Setting setting_;
  // The level batches are produced at now (setting_.share = level_ / kLevels).
  int level_ = 0;
  // The seconds per batch last measured at each level during this search or hold; kUnmeasured.
  std::array<double, kLevels + 1> measured_{};
  // Searching: the round's centre and span. Settled (searching_ false): the settled level; level_
  // differs from it while a neighbour is probed.
  bool searching_ = true;
  int centre_ = 0;
  int span_ = 1;
  // Settled: windows held since the last probe, the windows the next probe waits for, and the
  // direction of the next probe.
  int held_ = 0;
  int hold_windows_ = 1;
  bool probe_up_ = true;
  // The current generation's intervals and waits so far; whether its first batch has been passed
  // over.
  std::vector<double> window_, window_waits_;
  bool first_passed_ = false;
  // Batches still to be passed over at the start (startup_batches).
  int startup_left_ = 0;
  bool stay_at_cpu_end_ = false;  // StayAtCpuEnd
};

// The placement rule: of a batch's chunks that nvCOMP could decode (`decodable`, one flag per
// chunk in the batch's order), the worker threads decode `cpu_share` (0 to 1), spread evenly over
// the batch so that each wave gets its part, and nvCOMP the rest. Returns one flag per chunk: 1
// where nvCOMP decodes it.
//
// `objects` (empty, or one per chunk) names each chunk's stored object: neighbours in the same
// object (inner chunks of one shard) go to the same side, so that a shard nvCOMP decodes is read
// straight into its staging (ChunkRead::encoded_memory asks that of every member). Such a run of
// g chunks goes to the worker threads when they are owed at least half of it by then (rounded
// down, as single chunks are); the share is then kept to within half a shard.
std::vector<uint8_t> ChunksDecodedOnGpu(std::span<const uint8_t> decodable, double cpu_share,
                                        std::span<const uint64_t> objects = {});

// The share a batch whose production starts now is made with: `adaptive`'s where the share
// adapts (non-null), else the fixed `cpu_share` (generation 0).
DecodeShareController::Setting CurrentDecodeShare(const DecodeShareController* adaptive,
                                                  double cpu_share);

}  // namespace zarrstream
