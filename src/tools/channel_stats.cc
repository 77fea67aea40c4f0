// The streaming statistics pass.
#include "tools/channel_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "dataset/cf_decoding.h"
#include "util/format.h"
#include "util/thread_pool.h"

namespace zarrstream {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A channel's values inside a block: `runs` runs of `run_length` contiguous elements, the first at
// element `first`, each `run_stride` elements after the previous.
struct Strided {
  uint64_t first = 0;
  uint64_t runs = 1;
  uint64_t run_length = 0;
  uint64_t run_stride = 0;
};

// One element as a double, CF-decoded (`Compute`: the decoding's arithmetic type) when kDecode.
template <typename T, typename Compute, bool kDecode>
double Value(const std::byte* p, const CfDecoder<Compute>& decode) {
  if constexpr (kDecode) {
    return static_cast<double>(decode(LoadStoredElement<T>(p)));
  } else {
    return static_cast<double>(LoadStoredElement<T>(p));
  }
}

// Corrected two-pass statistics of the strided values in `data` (elements of type T).
template <typename T, typename Compute, bool kDecode>
ChannelAccumulator ReduceStrided(const std::byte* data, const Strided& where,
                                 const CfDecoding& cf) {
  const CfDecoder<Compute> decode(cf);
  ChannelAccumulator s;
  double sum = 0;
  uint64_t count = 0;
  for (uint64_t r = 0; r < where.runs; ++r) {
    const std::byte* run = data + (where.first + r * where.run_stride) * sizeof(T);
    for (uint64_t i = 0; i < where.run_length; ++i) {
      const double x = Value<T, Compute, kDecode>(run + i * sizeof(T), decode);
      if (std::isnan(x)) {
        ++s.nan_count;
        continue;
      }
      sum += x;
      ++count;
      s.min = std::min(s.min, x);
      s.max = std::max(s.max, x);
    }
  }
  if (count == 0) return s;
  const double mean = sum / static_cast<double>(count);
  // Σd² less (Σd)²/n: the second term removes the rounding error of `mean` (Björck's correction).
  double deviations = 0, squares = 0;
  for (uint64_t r = 0; r < where.runs; ++r) {
    const std::byte* run = data + (where.first + r * where.run_stride) * sizeof(T);
    for (uint64_t i = 0; i < where.run_length; ++i) {
      const double x = Value<T, Compute, kDecode>(run + i * sizeof(T), decode);
      if (std::isnan(x)) continue;
      const double d = x - mean;
      deviations += d;
      squares += d * d;
    }
  }
  s.moments.count = count;
  s.moments.mean = mean + deviations / static_cast<double>(count);
  s.moments.m2 = std::max(0.0, squares - deviations * deviations / static_cast<double>(count));
  return s;
}

// `n` elements of type T as doubles, CF-decoded when kDecode (a tendency's two ends).
template <typename T, typename Compute, bool kDecode>
void ToDoubles(const std::byte* data, uint64_t n, const CfDecoding& cf, double* out) {
  const CfDecoder<Compute> decode(cf);
  for (uint64_t i = 0; i < n; ++i)
    out[i] = Value<T, Compute, kDecode>(data + i * sizeof(T), decode);
}

// The reduction of one array: its element type and CF decoding (a struct: Result<> of a bare
// function pointer trips GCC 12's -Wshadow).
struct Reducer {
  ChannelAccumulator (*reduce)(const std::byte*, const Strided&, const CfDecoding&) = nullptr;
  void (*to_doubles)(const std::byte*, uint64_t, const CfDecoding&, double*) = nullptr;
  CfDecoding cf;

  ChannelAccumulator Reduce(const std::byte* data, const Strided& where) const {
    return reduce(data, where, cf);
  }
};

template <typename T, typename Compute, bool kDecode>
Reducer MakeReducer(const CfDecoding& cf) {
  return Reducer{&ReduceStrided<T, Compute, kDecode>, &ToDoubles<T, Compute, kDecode>, cf};
}

template <typename T>
Reducer ReducerOf(const CfDecoding& cf) {
  if (!cf.decode) return MakeReducer<T, double, false>(cf);
  if (cf.wide()) return MakeReducer<T, double, true>(cf);
  return MakeReducer<T, float, true>(cf);
}

Result<Reducer> ReducerFor(DataType dtype, const CfDecoding& cf) {
  switch (cf.source) {
    case DataType::kInt8:
      return ReducerOf<int8_t>(cf);
    case DataType::kInt16:
      return ReducerOf<int16_t>(cf);
    case DataType::kInt32:
      return ReducerOf<int32_t>(cf);
    case DataType::kInt64:
      return ReducerOf<int64_t>(cf);
    case DataType::kUInt8:
      return ReducerOf<uint8_t>(cf);
    case DataType::kUInt16:
      return ReducerOf<uint16_t>(cf);
    case DataType::kUInt32:
      return ReducerOf<uint32_t>(cf);
    case DataType::kUInt64:
      return ReducerOf<uint64_t>(cf);
    case DataType::kFloat16:
      return ReducerOf<Float16Bits>(cf);
    case DataType::kFloat32:
      return ReducerOf<float>(cf);
    case DataType::kFloat64:
      return ReducerOf<double>(cf);
    default: {
      std::string s = "statistics of ";
      s += DataTypeName(dtype);
      s += " data are not supported (numbers only)";
      return UnsupportedError(std::move(s));
    }
  }
}

// Distinct sorted indices → maximal runs of consecutive indices.
std::vector<IndexRange> Runs(std::vector<uint64_t> indices) {
  std::sort(indices.begin(), indices.end());
  indices.erase(std::unique(indices.begin(), indices.end()), indices.end());
  std::vector<IndexRange> runs;
  for (uint64_t i : indices) {
    if (!runs.empty() && runs.back().stop == i) {
      ++runs.back().stop;
    } else {
      runs.push_back({i, i + 1});
    }
  }
  return runs;
}

// `runs` cut at multiples of `chunk`, so each piece lies in one chunk.
std::vector<IndexRange> SplitAtChunks(const std::vector<IndexRange>& runs, uint64_t chunk) {
  std::vector<IndexRange> pieces;
  for (const IndexRange& run : runs) {
    for (uint64_t start = run.start; start < run.stop;) {
      const uint64_t stop = std::min(run.stop, (start / chunk + 1) * chunk);
      pieces.push_back({start, stop});
      start = stop;
    }
  }
  return pieces;
}

// One level-dimension piece of an array's blocks: the span of levels read, and which of the
// array's channels it serves (slot in the array's channel list, level index).
struct LevelPiece {
  IndexRange span;
  std::vector<std::pair<size_t, uint64_t>> channels;
};

// The channels of one array and the blocks that cover them: the cartesian product of per-dim
// pieces (every non-level dim's selection cut at chunk boundaries; levels grouped by chunk).
struct ArrayPass {
  Array array;
  std::vector<size_t> channel_slots;  // positions in the caller's channel list
  std::optional<size_t> level_dim;
  std::vector<std::vector<IndexRange>> pieces;  // per dim; level dim: LevelPiece spans
  std::vector<LevelPiece> level_pieces;
  Reducer reducer;
  // A run of a combined dataset's time dimension that this array holds (Channel::time_segments):
  // the dataset's time indices [time_run.start, time_run.stop) are the array's from time_first
  // on. nullopt: the array holds the dataset's indices as they are.
  std::optional<IndexRange> time_run;
  uint64_t time_first = 0;
  uint64_t num_blocks = 1;
  uint64_t num_bytes = 0;  // of all blocks
  // A tendency pass: the distance in time steps (0: a pass over the values), the table of
  // accumulators it adds to (0: the values'; 1 + i: tendency i's) and the array's time dimension.
  uint64_t tendency_steps = 0;
  size_t table = 0;
  std::optional<size_t> time_dim;
  // A tendency pass over a combined dataset's channel: every array holding a run of its time
  // dimension, each with its own decoding, so that a pair's later step may come from the next
  // store. Empty: the later steps are the pass's array's.
  std::vector<TimeSegment> segments;
  std::vector<Reducer> segment_reducers;

  // The decoded bytes of blocks [begin, end).
  uint64_t BlocksBytes(uint64_t begin, uint64_t end) const {
    if (begin == 0 && end == num_blocks) return num_bytes;
    uint64_t elements = 0;
    for (uint64_t b = begin; b < end; ++b) {
      const std::vector<size_t> which = PieceIndices(b);
      uint64_t block_elements = 1;
      for (size_t d = 0; d < pieces.size(); ++d) block_elements *= pieces[d][which[d]].size();
      elements += block_elements;
    }
    return elements * DataTypeSize(array.dtype());
  }

  // Block `b` (C order over the per-dim pieces): its per-dim piece index.
  std::vector<size_t> PieceIndices(uint64_t b) const {
    std::vector<size_t> out(pieces.size());
    for (size_t d = pieces.size(); d-- > 0;) {
      out[d] = static_cast<size_t>(b % pieces[d].size());
      b /= pieces[d].size();
    }
    return out;
  }
};

// A thread's block buffers: the block as stored, and for a tendency pass the block n steps later
// and both as doubles (the difference overwriting the first).
struct BlockBuffers {
  std::vector<std::byte> block, later;
  std::vector<double> differences, later_values, piece_values;
};

// The box `shape` at `start` of `pass`'s array, `pass.tendency_steps` later along time, as
// decoded doubles in `later_values`: from the pass's array, or (pass.segments) from the arrays
// holding those steps of the combined dataset, each piece decoded as its array's values are.
Status ReadLater(const ArrayPass& pass, const std::vector<uint64_t>& start,
                 const std::vector<uint64_t>& shape, uint64_t elements, BlockBuffers* buffers) {
  const size_t time = *pass.time_dim;
  buffers->later_values.resize(elements);
  if (pass.segments.empty()) {
    std::vector<uint64_t> later_start = start;
    later_start[time] += pass.tendency_steps;
    buffers->later.resize(elements * DataTypeSize(pass.array.dtype()));
    ZS_RETURN_IF_ERROR(pass.array.Read(later_start, shape, buffers->later.data()));
    pass.reducer.to_doubles(buffers->later.data(), elements, pass.reducer.cf,
                            buffers->later_values.data());
    return Status::Ok();
  }
  // The block's steps as the dataset numbers them, then the later ones.
  const uint64_t from = start[time] - pass.time_first + pass.time_run->start + pass.tendency_steps;
  const uint64_t to = from + shape[time];
  uint64_t inner = 1;
  for (size_t d = time + 1; d < shape.size(); ++d) inner *= shape[d];
  const uint64_t outer = elements / (inner * shape[time]);
  for (size_t k = 0; k < pass.segments.size(); ++k) {
    const TimeSegment& segment = pass.segments[k];
    const uint64_t lo = std::max(from, segment.begin);
    const uint64_t hi = std::min(to, segment.end);
    if (lo >= hi) continue;
    std::vector<uint64_t> piece_start = start, piece_shape = shape;
    piece_start[time] = lo - segment.begin + segment.first;
    piece_shape[time] = hi - lo;
    const uint64_t piece_elements = outer * piece_shape[time] * inner;
    buffers->later.resize(piece_elements * DataTypeSize(segment.array.dtype()));
    ZS_RETURN_IF_ERROR(segment.array.Read(piece_start, piece_shape, buffers->later.data()));
    buffers->piece_values.resize(piece_elements);
    const Reducer& reducer = pass.segment_reducers[k];
    reducer.to_doubles(buffers->later.data(), piece_elements, reducer.cf,
                       buffers->piece_values.data());
    // Into the piece's steps of the box, for each index of the dimensions before time.
    const uint64_t run = piece_shape[time] * inner;
    for (uint64_t o = 0; o < outer; ++o) {
      std::copy_n(buffers->piece_values.data() + o * run, run,
                  buffers->later_values.data() + (o * shape[time] + (lo - from)) * inner);
    }
  }
  return Status::Ok();
}

// Reads block `b` of `pass` into `buffers` and reduces each of its channels into `out` (one entry
// per channel of the block's level piece, or one for an array without levels). A tendency pass
// reduces the differences between the box n steps later and the block.
Status ReadAndReduceBlock(const ArrayPass& pass, uint64_t b, BlockBuffers* buffers,
                          std::vector<ChannelAccumulator>* out) {
  const std::vector<size_t> which = pass.PieceIndices(b);
  const size_t rank = pass.pieces.size();
  std::vector<uint64_t> start(rank), shape(rank);
  uint64_t elements = 1;
  for (size_t d = 0; d < rank; ++d) {
    const IndexRange& r = pass.pieces[d][which[d]];
    start[d] = r.start;
    shape[d] = r.size();
    elements *= shape[d];
  }
  std::vector<std::byte>* buffer = &buffers->block;
  buffer->resize(elements * DataTypeSize(pass.array.dtype()));
  ZS_RETURN_IF_ERROR(pass.array.Read(start, shape, buffer->data()));
  Reducer reducer = pass.reducer;
  const std::byte* values = buffer->data();
  if (pass.tendency_steps > 0) {
    ZS_RETURN_IF_ERROR(ReadLater(pass, start, shape, elements, buffers));
    buffers->differences.resize(elements);
    double* differences = buffers->differences.data();
    const double* later = buffers->later_values.data();
    pass.reducer.to_doubles(buffer->data(), elements, pass.reducer.cf, differences);
    for (uint64_t i = 0; i < elements; ++i) differences[i] = later[i] - differences[i];
    reducer = MakeReducer<double, double, false>(StoredValues(DataType::kFloat64));
    values = reinterpret_cast<const std::byte*>(differences);
  }
  out->clear();
  if (!pass.level_dim) {
    out->push_back(reducer.Reduce(values, Strided{0, 1, elements, 0}));
    return Status::Ok();
  }
  const size_t l = *pass.level_dim;
  uint64_t inner = 1;
  for (size_t d = l + 1; d < rank; ++d) inner *= shape[d];
  const uint64_t outer = elements / (inner * shape[l]);
  for (const auto& [slot, level] : pass.level_pieces[which[l]].channels) {
    const uint64_t offset = level - start[l];
    out->push_back(reducer.Reduce(values, Strided{offset * inner, outer, inner, shape[l] * inner}));
  }
  return Status::Ok();
}

// Per channel dimension that `selections` select on: the selected indices as runs. Records each
// selection's labels in `recorded`.
Result<std::map<std::string, std::vector<IndexRange>>> SelectedRuns(
    const Dataset& dataset, const std::vector<std::string>& dims,
    const std::vector<uint64_t>& shape, const std::vector<LabelSelection>& selections,
    std::vector<SelectedLabels>* recorded) {
  std::map<std::string, std::vector<IndexRange>> selected;
  for (const LabelSelection& selection : selections) {
    auto dim = std::find(dims.begin(), dims.end(), selection.dim);
    std::optional<Coordinate> loaded;
    if (dim == dims.end()) {
      // A text coordinate along another dimension (ERA5's `expver` along `valid_time`) selects on
      // that dimension, as in the loader.
      Result<Coordinate> other = dataset.LoadCoordinate(selection.dim);
      if (other.ok() && other->along() != selection.dim) {
        dim = std::find(dims.begin(), dims.end(), other->along());
        loaded = std::move(other).value();
      }
    }
    if (dim == dims.end()) {
      std::string s = "cannot select '";
      s += selection.ToString();
      s += "': the channels' dimensions are ";
      s += "(" + Join(dims) + ")";
      if (IsLevelDimension(selection.dim)) s += " (choose levels with the variables: name@500,850)";
      return InvalidArgumentError(std::move(s));
    }
    if (!loaded) {
      ZS_ASSIGN_OR_RETURN(loaded, dataset.LoadCoordinate(selection.dim));
    }
    const Coordinate& coordinate = *loaded;
    const std::string& along = *dim;
    if (selected.count(along)) {
      return InvalidArgumentError("cannot select '" + selection.ToString() + "': dimension '" +
                                  along + "' is selected twice");
    }
    const uint64_t extent = shape[dim - dims.begin()];
    if (coordinate.size() != extent) {
      return InvalidArgumentError(coordinate.Describe() + " has " +
                                  std::to_string(coordinate.size()) + " labels but dimension '" +
                                  along + "' has size " + std::to_string(extent));
    }
    ZS_ASSIGN_OR_RETURN(std::vector<uint64_t> indices, coordinate.Select(selection));
    // One increasing run of labels (a range, or a date naming a period) is recorded as its first
    // and last label; anything else label by label; text labels (which repeat: ERA5's `expver`
    // along time) as the distinct labels selected.
    bool one_run = !coordinate.is_text();
    for (size_t i = 1; i < indices.size(); ++i) one_run &= indices[i] == indices[i - 1] + 1;
    SelectedLabels labels{
        selection.dim, one_run, {}, !coordinate.is_time() && !coordinate.is_text()};
    if (coordinate.is_text()) {
      for (uint64_t i : indices) {
        std::string label = coordinate.FormatLabel(i);
        if (std::find(labels.labels.begin(), labels.labels.end(), label) == labels.labels.end()) {
          labels.labels.push_back(std::move(label));
        }
      }
    } else if (one_run) {
      labels.labels = {coordinate.FormatLabel(indices.front()),
                       coordinate.FormatLabel(indices.back())};
    } else {
      for (uint64_t i : indices) labels.labels.push_back(coordinate.FormatLabel(i));
    }
    recorded->push_back(std::move(labels));
    selected[along] = Runs(std::move(indices));
  }
  return selected;
}

// One pass per array, in the order of the arrays' first channels, each listing its channels.
// `time_dependent`: the static fields (Channel::broadcast) left out (tendency passes).
Result<std::vector<ArrayPass>> PassesByArray(std::span<const Channel> channels, bool decode_cf,
                                             bool time_dependent = false) {
  std::vector<ArrayPass> passes;
  for (size_t c = 0; c < channels.size(); ++c) {
    const Channel& channel = channels[c];
    if (time_dependent && channel.broadcast) continue;
    // The arrays holding the channel: one, or one per run of a combined dataset's time axis.
    std::vector<TimeSegment> sources = channel.time_segments;
    if (sources.empty()) sources.push_back(TimeSegment{0, 0, 0, channel.array});
    for (const TimeSegment& source : sources) {
      auto it = std::find_if(passes.begin(), passes.end(), [&](const ArrayPass& p) {
        return p.array.url() == source.array.url();
      });
      if (it == passes.end()) {
        ArrayPass pass{source.array,
                       {},
                       channel.level_dim,
                       {},
                       {},
                       {},
                       std::nullopt,
                       0,
                       1,
                       0,
                       0,
                       0,
                       std::nullopt,
                       {},
                       {}};
        if (!channel.time_segments.empty()) {
          pass.time_run = IndexRange{source.begin, source.end};
          pass.time_first = source.first;
        }
        CfDecoding cf = StoredValues(source.array.dtype());
        if (decode_cf) {
          ZS_ASSIGN_OR_RETURN(cf, CfDecodingOf(source.array));
        }
        ZS_ASSIGN_OR_RETURN_CTX(pass.reducer, ReducerFor(source.array.dtype(), cf),
                                "variable '" + channel.variable + "'");
        passes.push_back(std::move(pass));
        it = passes.end() - 1;
      }
      it->channel_slots.push_back(c);
    }
  }
  return passes;
}

// Cuts `pass`'s array into blocks: its channels' levels grouped by the level chunks that hold
// them, every other dim's selection (`selected`, else all of it) cut at chunk boundaries.
void PlanBlocks(std::span<const Channel> channels,
                const std::map<std::string, std::vector<IndexRange>>& selected, ArrayPass* pass) {
  const std::vector<uint64_t> chunks = pass->array.chunks();
  size_t channel_dim = 0;
  for (size_t d = 0; d < pass->array.rank(); ++d) {
    if (pass->level_dim && d == *pass->level_dim) {
      std::map<uint64_t, LevelPiece> by_chunk;
      for (size_t slot = 0; slot < pass->channel_slots.size(); ++slot) {
        const uint64_t level = channels[pass->channel_slots[slot]].level_index;
        LevelPiece& piece = by_chunk[level / chunks[d]];
        if (piece.channels.empty()) piece.span = {level, level + 1};
        piece.span.start = std::min(piece.span.start, level);
        piece.span.stop = std::max(piece.span.stop, level + 1);
        piece.channels.emplace_back(slot, level);
      }
      std::vector<IndexRange> spans;
      for (auto& [chunk, piece] : by_chunk) {
        spans.push_back(piece.span);
        pass->level_pieces.push_back(std::move(piece));
      }
      pass->pieces.push_back(std::move(spans));
      continue;
    }
    const Channel& channel = channels[pass->channel_slots.front()];
    const std::string& dim = channel.dims[channel_dim];
    const auto sel = selected.find(dim);
    std::vector<IndexRange> runs = sel != selected.end()
                                       ? sel->second
                                       : std::vector<IndexRange>{{0, channel.shape[channel_dim]}};
    ++channel_dim;
    if (IsTimeDimension(dim)) pass->time_dim = d;
    if (pass->time_run && IsTimeDimension(dim)) {
      // The dataset's selected times that this array holds, as its own indices.
      std::vector<IndexRange> own;
      for (const IndexRange& r : runs) {
        const uint64_t lo = std::max(r.start, pass->time_run->start);
        const uint64_t hi = std::min(r.stop, pass->time_run->stop);
        if (lo >= hi) continue;
        const uint64_t shift = pass->time_first - pass->time_run->start;
        own.push_back(IndexRange{lo + shift, hi + shift});
      }
      runs = std::move(own);
    }
    pass->pieces.push_back(SplitAtChunks(runs, chunks[d]));
  }
  // Blocks are the cartesian product of the pieces, so their elements multiply out per dim.
  uint64_t elements = 1;
  for (const auto& dim_pieces : pass->pieces) {
    pass->num_blocks *= dim_pieces.size();
    uint64_t extent = 0;
    for (const IndexRange& r : dim_pieces) extent += r.size();
    elements *= extent;
  }
  pass->num_bytes = elements * DataTypeSize(pass->array.dtype());
}

// The blocks of part `options.part_index` of `options.part_count`: a contiguous run of the blocks
// of all passes, in pass order, the parts' sizes differing by one at most. Returns the first and
// the end, counted over all passes' blocks.
std::pair<uint64_t, uint64_t> PartBlocks(const std::vector<ArrayPass>& passes,
                                         const ChannelStatsOptions& options) {
  uint64_t all_blocks = 0;
  for (const ArrayPass& pass : passes) all_blocks += pass.num_blocks;
  const auto part_start = [&](uint64_t i) {
    return all_blocks / options.part_count * i +
           std::min<uint64_t>(i, all_blocks % options.part_count);
  };
  return {part_start(options.part_index), part_start(options.part_index + 1)};
}

// Reduces this part's blocks into one accumulator per channel of each table (the values', then
// each tendency's: ArrayPass::table). Blocks run in parallel batches; their results merge in block
// order, so the sums do not depend on scheduling.
Result<std::vector<std::vector<ChannelAccumulator>>> ReduceBlocks(
    const Dataset& dataset, const std::vector<ArrayPass>& passes, size_t num_tables,
    size_t num_channels, const ChannelStatsOptions& options) {
  const auto [part_begin, part_end] = PartBlocks(passes, options);
  // Each pass's share of the part, as a range of the pass's own blocks.
  std::vector<IndexRange> shares;
  uint64_t total_bytes = 0;
  uint64_t base = 0;  // the first block of a pass among all passes' blocks
  for (const ArrayPass& pass : passes) {
    const uint64_t begin = std::clamp(part_begin, base, base + pass.num_blocks) - base;
    const uint64_t end = std::clamp(part_end, base, base + pass.num_blocks) - base;
    shares.push_back({begin, end});
    total_bytes += pass.BlocksBytes(begin, end);
    base += pass.num_blocks;
  }
  ThreadPool pool(options.num_threads);
  const uint64_t batch = std::max<uint64_t>(64, 16 * pool.num_threads());
  std::vector<std::vector<ChannelAccumulator>> merged(
      num_tables, std::vector<ChannelAccumulator>(num_channels));
  std::vector<std::vector<ChannelAccumulator>> results;
  uint64_t done_bytes = 0;
  for (size_t p = 0; p < passes.size(); ++p) {
    const ArrayPass& pass = passes[p];
    const uint64_t end = shares[p].stop;
    for (uint64_t first = shares[p].start; first < end; first += batch) {
      if (options.interrupt != nullptr && options.interrupt->load(std::memory_order_relaxed)) {
        return InvalidArgumentError("the statistics of " + dataset.url() + " were interrupted");
      }
      const uint64_t n = std::min(batch, end - first);
      results.resize(n);
      ZS_RETURN_IF_ERROR(ParallelFor(&pool, n, [&](size_t i) -> Status {
        thread_local BlockBuffers buffers;
        return ReadAndReduceBlock(pass, first + i, &buffers, &results[i]);
      }));
      for (uint64_t i = 0; i < n; ++i) {
        const std::vector<size_t> which = pass.PieceIndices(first + i);
        for (size_t k = 0; k < results[i].size(); ++k) {
          const size_t slot =
              pass.level_dim ? pass.level_pieces[which[*pass.level_dim]].channels[k].first : 0;
          merged[pass.table][pass.channel_slots[slot]].Merge(results[i][k]);
        }
      }
      if (options.progress) {
        done_bytes += pass.BlocksBytes(first, first + n);
        options.progress(done_bytes, total_bytes);
      }
    }
  }
  return merged;
}

// Fills `out`'s statistics (ChannelStats or TendencyStats) from a channel's accumulator
// (undefined ones NaN: no values).
template <typename Stats>
void Summarize(const ChannelAccumulator& s, Stats* out) {
  out->count = s.moments.count;
  out->nan_count = s.nan_count;
  const bool any = s.moments.count > 0;
  out->mean = any ? s.moments.mean : kNaN;
  out->std = any ? std::sqrt(s.moments.Variance()) : kNaN;
  out->min = any ? s.min : kNaN;
  out->max = any ? s.max : kNaN;
}

// A tendency's distance in store steps and the runs of selected steps t whose t + steps is
// selected too (the first steps of its pairs).
struct Tendency {
  uint64_t steps = 0;
  std::vector<IndexRange> starts;
};

// Resolves `options.tendencies` against the time dimension of `reference` (a time-dependent
// channel) and its selected runs; records the steps, and the time step where the selected times
// are evenly spaced, in `file`.
Result<std::vector<Tendency>> ResolveTendencies(
    const Dataset& dataset, const Channel& reference,
    const std::map<std::string, std::vector<IndexRange>>& selected,
    const ChannelStatsOptions& options, ChannelStatsFile* file) {
  std::vector<Tendency> tendencies;
  if (options.tendencies.empty()) return tendencies;
  const auto dim = std::find_if(reference.dims.begin(), reference.dims.end(),
                                [](const std::string& d) { return IsTimeDimension(d); });
  if (reference.broadcast || dim == reference.dims.end()) {
    return InvalidArgumentError("tendencies of " + dataset.url() +
                                ": the channels have no time dimension (" + Join(reference.dims) +
                                ")");
  }
  const uint64_t extent = reference.shape[static_cast<size_t>(dim - reference.dims.begin())];
  std::vector<uint8_t> is_selected(extent, 0);
  const auto runs = selected.find(*dim);
  for (const IndexRange& r :
       runs != selected.end() ? runs->second : std::vector<IndexRange>{{0, extent}}) {
    std::fill(is_selected.begin() + static_cast<ptrdiff_t>(r.start),
              is_selected.begin() + static_cast<ptrdiff_t>(r.stop), 1);
  }
  const uint64_t num_selected = static_cast<uint64_t>(
      std::count(is_selected.begin(), is_selected.end(), static_cast<uint8_t>(1)));
  // The step of the selected times, where they are times, evenly spaced from the first selected
  // to the last (durations are counted in it).
  Result<Coordinate> coordinate = dataset.LoadCoordinate(*dim);
  std::string uneven = "'" + *dim + "' has no time coordinate";
  if (coordinate.ok() && coordinate->is_time() && coordinate->size() == extent &&
      num_selected > 1) {
    const auto first = static_cast<uint64_t>(std::find(is_selected.begin(), is_selected.end(), 1) -
                                             is_selected.begin());
    const uint64_t last =
        extent - 1 -
        static_cast<uint64_t>(std::find(is_selected.rbegin(), is_selected.rend(), 1) -
                              is_selected.rbegin());
    const int64_t step = coordinate->TimeSeconds(first + 1) - coordinate->TimeSeconds(first);
    bool even = step > 0;
    for (uint64_t i = first + 1; even && i <= last; ++i) {
      even = coordinate->TimeSeconds(i) - coordinate->TimeSeconds(i - 1) == step;
    }
    if (even) {
      file->time_step_seconds = step;
    } else {
      uneven = "the times of " + coordinate->Describe() + " are not evenly spaced from " +
               coordinate->FormatLabel(first) + " to " + coordinate->FormatLabel(last);
    }
  }
  for (const std::string& text : options.tendencies) {
    Tendency tendency;
    const bool digits = !text.empty() && text.size() <= 18 &&
                        text.find_first_not_of("0123456789") == std::string::npos;
    if (digits) {
      tendency.steps = std::stoull(text);
      if (tendency.steps == 0) {
        return InvalidArgumentError("tendency '" + text +
                                    "': expected a positive number of time steps or a duration "
                                    "(\"6h\")");
      }
    } else {
      ZS_ASSIGN_OR_RETURN(const int64_t seconds, ParseDuration("tendency", text));
      if (!file->time_step_seconds) {
        std::string s = "tendency '";
        s += text;
        s += "': a duration needs evenly spaced times, and ";
        s += uneven;
        s += "; give it in time steps";
        return InvalidArgumentError(std::move(s));
      }
      if (seconds % *file->time_step_seconds != 0) {
        return InvalidArgumentError("tendency '" + text + "' (" + std::to_string(seconds) +
                                    " s) is not a whole number of the time steps of " +
                                    coordinate->Describe() + " (" +
                                    std::to_string(*file->time_step_seconds) + " s)");
      }
      tendency.steps = static_cast<uint64_t>(seconds / *file->time_step_seconds);
    }
    for (const Tendency& other : tendencies) {
      if (other.steps == tendency.steps) {
        return InvalidArgumentError("tendency '" + text + "': " + std::to_string(tendency.steps) +
                                    " time steps are asked for twice");
      }
    }
    if (tendency.steps >= num_selected) {
      return InvalidArgumentError("tendency '" + text + "' (" + std::to_string(tendency.steps) +
                                  " time steps): the selection of " + dataset.url() + " has " +
                                  std::to_string(num_selected) + " step(s) along '" + *dim +
                                  "'; a tendency needs two of them that far apart");
    }
    std::vector<uint64_t> starts;
    for (uint64_t t = 0; t + tendency.steps < extent; ++t) {
      if (is_selected[t] && is_selected[t + tendency.steps]) starts.push_back(t);
    }
    if (starts.empty()) {
      return InvalidArgumentError("tendency '" + text + "': no two selected steps along '" + *dim +
                                  "' of " + dataset.url() + " are " +
                                  std::to_string(tendency.steps) + " time steps apart");
    }
    tendency.starts = Runs(std::move(starts));
    file->tendency_steps.push_back(tendency.steps);
    tendencies.push_back(std::move(tendency));
  }
  return tendencies;
}

}  // namespace

void Moments::Merge(const Moments& other) {
  if (other.count == 0) return;
  if (count == 0) {
    *this = other;
    return;
  }
  const double n_a = static_cast<double>(count);
  const double n_b = static_cast<double>(other.count);
  const double n = n_a + n_b;
  const double delta = other.mean - mean;
  mean += delta * (n_b / n);
  m2 += other.m2 + delta * delta * (n_a * n_b / n);
  count += other.count;
}

double Moments::Variance() const { return count == 0 ? kNaN : m2 / static_cast<double>(count); }

void ChannelAccumulator::Merge(const ChannelAccumulator& other) {
  moments.Merge(other.moments);
  nan_count += other.nan_count;
  min = std::min(min, other.min);
  max = std::max(max, other.max);
}

Result<ChannelStatsFile> ComputeChannelStats(const Dataset& dataset,
                                             std::span<const Channel> channels,
                                             const ChannelStatsOptions& options) {
  ZS_ASSIGN_OR_RETURN(ChannelStatsPart part, ComputeChannelStatsPart(dataset, channels, options));
  return FinishChannelStats(std::move(part));
}

Result<ChannelStatsPart> ComputeChannelStatsPart(const Dataset& dataset,
                                                 std::span<const Channel> channels,
                                                 const ChannelStatsOptions& options) {
  if (options.part_count == 0 || options.part_index >= options.part_count) {
    return InvalidArgumentError("part " + std::to_string(options.part_index) + "/" +
                                std::to_string(options.part_count) +
                                " is not a part of the statistics of " + dataset.url());
  }
  if (channels.empty()) return InvalidArgumentError("no channels to compute statistics of");
  // The channels' dimensions are the time-dependent ones'; a static field (Channel::broadcast)
  // has them without time, and a time selection leaves it whole.
  const Channel* reference = &channels.front();
  for (const Channel& c : channels) {
    if (!c.broadcast) {
      reference = &c;
      break;
    }
  }
  ChannelStatsPart part;
  ChannelStatsFile& file = part.job;
  file.source = dataset.url();
  file.decode_cf = options.decode_cf;
  ZS_ASSIGN_OR_RETURN(const auto selected, SelectedRuns(dataset, reference->dims, reference->shape,
                                                        options.select, &file.select));
  ZS_ASSIGN_OR_RETURN(std::vector<ArrayPass> passes, PassesByArray(channels, options.decode_cf));
  for (ArrayPass& pass : passes) PlanBlocks(channels, selected, &pass);
  ZS_ASSIGN_OR_RETURN(const std::vector<Tendency> tendencies,
                      ResolveTendencies(dataset, *reference, selected, options, &file));
  for (size_t i = 0; i < tendencies.size(); ++i) {
    // The first steps of the pairs stand for the time selection; each block reads its box
    // `steps` later too.
    std::map<std::string, std::vector<IndexRange>> starts = selected;
    for (const std::string& dim : reference->dims) {
      if (IsTimeDimension(dim)) starts[dim] = tendencies[i].starts;
    }
    ZS_ASSIGN_OR_RETURN(std::vector<ArrayPass> tendency_passes,
                        PassesByArray(channels, options.decode_cf, /*time_dependent=*/true));
    for (ArrayPass& pass : tendency_passes) {
      PlanBlocks(channels, starts, &pass);
      pass.tendency_steps = tendencies[i].steps;
      pass.table = 1 + i;
      const Channel& channel = channels[pass.channel_slots.front()];
      for (const TimeSegment& segment : channel.time_segments) {
        CfDecoding cf = StoredValues(segment.array.dtype());
        if (options.decode_cf) {
          ZS_ASSIGN_OR_RETURN(cf, CfDecodingOf(segment.array));
        }
        ZS_ASSIGN_OR_RETURN(Reducer reducer, ReducerFor(segment.array.dtype(), cf));
        pass.segments.push_back(segment);
        pass.segment_reducers.push_back(reducer);
      }
      passes.push_back(std::move(pass));
    }
  }
  ZS_ASSIGN_OR_RETURN(
      std::vector<std::vector<ChannelAccumulator>> tables,
      ReduceBlocks(dataset, passes, 1 + tendencies.size(), channels.size(), options));
  part.channels = std::move(tables[0]);
  part.tendencies.assign(std::make_move_iterator(tables.begin() + 1),
                         std::make_move_iterator(tables.end()));
  for (const Channel& channel : channels) {
    ChannelStats out;
    out.name = channel.name;
    out.variable = channel.variable;
    out.level = channel.level;
    if (!channel.broadcast) {
      for (const Tendency& t : tendencies) out.tendencies.push_back(TendencyStats{t.steps});
    }
    file.channels.push_back(std::move(out));
  }
  return part;
}

ChannelStatsFile FinishChannelStats(ChannelStatsPart part) {
  ChannelStatsFile file = std::move(part.job);
  for (size_t c = 0; c < file.channels.size() && c < part.channels.size(); ++c) {
    Summarize(part.channels[c], &file.channels[c]);
    for (TendencyStats& t : file.channels[c].tendencies) {
      const auto i = static_cast<size_t>(
          std::find(file.tendency_steps.begin(), file.tendency_steps.end(), t.steps) -
          file.tendency_steps.begin());
      if (i < part.tendencies.size() && c < part.tendencies[i].size()) {
        Summarize(part.tendencies[i][c], &t);
      }
    }
  }
  return file;
}

}  // namespace zarrstream
