// How the detection runs: the channels' selected boxes are cut into cells, one per array, run of
// time steps one read chunk long, and level (and stacked member) chunk; a cell's read chunks are
// those its box touches at those steps. Cells go in rounds of kCellsPerRound: their stored read
// chunks are found (listings, shard indexes), then read in waves, one chunk per undecided cell per
// wave, each chunk scanned for a value at every step it holds. A (channel, step) pair belongs to
// one cell and a wave reads one chunk per cell, so the scans of one wave never touch the same
// flag: they set plain bytes without synchronisation.
#include "dataset/missing_dates.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "array/array_state.h"
#include "array/chunk_reader.h"
#include "dataset/cf_decoding.h"

namespace zarrstream {

namespace {

// Cells whose chunk lists, shard indexes and reads are planned at once.
constexpr size_t kCellsPerRound = 1024;
// The shard indexes kept between rounds (a shard spans the cells of several rounds).
constexpr uint64_t kIndexCacheBytes = uint64_t{256} << 20;

// Whether any of the `n` contiguous elements at `data` is a value once decoded (not NaN); stops at
// the first.
template <typename T, typename Compute, bool kDecode>
bool AnyValue(const std::byte* data, uint64_t n, const CfDecoding& cf) {
  const CfDecoder<Compute> decode(cf);
  constexpr size_t kSize = std::is_same_v<T, Float16Bits> ? 2 : sizeof(T);
  for (uint64_t i = 0; i < n; ++i) {
    Compute x;
    if constexpr (kDecode) {
      x = decode(LoadStoredElement<T>(data + i * kSize));
    } else {
      x = static_cast<Compute>(LoadStoredElement<T>(data + i * kSize));
    }
    if (!std::isnan(x)) return true;
  }
  return false;
}

using AnyValueFn = bool (*)(const std::byte*, uint64_t, const CfDecoding&);

template <typename T>
AnyValueFn AnyValueOf(const CfDecoding& cf) {
  if (!cf.decode) return &AnyValue<T, double, false>;
  if (cf.wide()) return &AnyValue<T, double, true>;
  return &AnyValue<T, float, true>;
}

AnyValueFn AnyValueFor(const CfDecoding& cf) {
  switch (cf.source) {
    case DataType::kInt8:
      return AnyValueOf<int8_t>(cf);
    case DataType::kInt16:
      return AnyValueOf<int16_t>(cf);
    case DataType::kInt32:
      return AnyValueOf<int32_t>(cf);
    case DataType::kInt64:
      return AnyValueOf<int64_t>(cf);
    case DataType::kUInt8:
      return AnyValueOf<uint8_t>(cf);
    case DataType::kUInt16:
      return AnyValueOf<uint16_t>(cf);
    case DataType::kUInt32:
      return AnyValueOf<uint32_t>(cf);
    case DataType::kUInt64:
      return AnyValueOf<uint64_t>(cf);
    case DataType::kFloat16:
      return AnyValueOf<Float16Bits>(cf);
    case DataType::kFloat32:
      return AnyValueOf<float>(cf);
    case DataType::kFloat64:
      return AnyValueOf<double>(cf);
    default:
      return nullptr;  // the geometry refuses other types
  }
}

// A time-dependent channel the detection looks at: one per distinct name (an input that is also a
// target is looked at once).
struct Watched {
  size_t channel = 0;  // in the geometry
  // Floating-point values, or integers with a CF fill value: the chunks must be read. Otherwise a
  // stored chunk is a value at every step it holds.
  bool can_be_nan = false;
  CfDecoding cf;
  AnyValueFn any_value = nullptr;
  std::vector<uint8_t> has_value;  // per selected step (t - range.start)
};

// One watched channel's part of a cell.
struct CellChannel {
  size_t watched = 0;
  uint64_t level = 0, member = 0;  // its indices along the array's level and member dimensions
  uint64_t begin = 0, end = 0;     // the array's time indices of its steps in the cell
};

struct Cell {
  size_t slot = 0;    // into LoaderGeometry::arrays
  int64_t shift = 0;  // dataset time index = the array's + shift
  bool can_be_nan = false;
  size_t time_axis = 0;
  std::optional<size_t> level_axis, member_axis;
  std::vector<IndexRange> box;      // per array dimension (time, level, member: see above)
  std::vector<uint64_t> low, high;  // the read chunks the box touches (inclusive)
  std::vector<CellChannel> channels;
  std::vector<std::vector<uint64_t>> stored;  // read chunks stored, found in its round
  size_t next = 0;                            // the next of `stored` to read
};

class Detection {
 public:
  Detection(const LoaderGeometry& g, ThreadPool* pool)
      : g_(g), pool_(pool), range_(g.ranges[*g.time_dim]), index_cache_(kIndexCacheBytes) {}

  Result<std::vector<uint64_t>> Run() {
    MakeCells();
    for (size_t begin = 0; begin < cells_.size(); begin += kCellsPerRound) {
      const size_t end = std::min(cells_.size(), begin + kCellsPerRound);
      ZS_RETURN_IF_ERROR(FindStoredChunks(begin, end));
      for (size_t i = begin; i < end; ++i) {
        Cell& cell = cells_[i];
        if (!cell.can_be_nan && !cell.stored.empty()) MarkAll(cell);
      }
      ZS_RETURN_IF_ERROR(ReadWaves(begin, end));
      for (size_t i = begin; i < end; ++i) cells_[i].stored = {};
    }
    std::vector<uint64_t> missing;
    for (uint64_t t = range_.start; t < range_.stop; ++t) {
      for (const Watched& w : watched_) {
        if (!w.has_value[t - range_.start]) {
          missing.push_back(t);
          break;
        }
      }
    }
    return missing;
  }

 private:
  void MakeCells() {
    std::map<std::tuple<size_t, int64_t, uint64_t, uint64_t, uint64_t>, size_t> by_key;
    std::vector<std::string> names;
    for (size_t c = 0; c < g_.channels.size(); ++c) {
      const Channel& channel = g_.channels[c];
      if (g_.resident[g_.channel_array[c]]) continue;  // a static field: no time steps
      if (std::find(names.begin(), names.end(), channel.name) != names.end()) continue;
      names.push_back(channel.name);
      const CfDecoding& cf = g_.cf[c];
      Watched w;
      w.channel = c;
      w.can_be_nan = IsFloatingPoint(cf.source) || (cf.decode && cf.num_fill_values > 0);
      w.cf = cf;
      w.any_value = AnyValueFor(cf);
      w.has_value.assign(range_.size(), 0);
      // At a frequency (LoaderOptions::frequency) samples touch every time_step-th step from the
      // selection's first only: the others need no answer, and their chunks no read.
      for (uint64_t i = 0; i < range_.size(); ++i) w.has_value[i] = i % g_.time_step != 0;
      const size_t watched = watched_.size();
      watched_.push_back(std::move(w));
      std::vector<ArraySegment> segments = g_.time_segments[c];
      if (segments.empty()) {
        segments.push_back(
            ArraySegment{0, std::numeric_limits<uint64_t>::max(), 0, g_.channel_array[c]});
      }
      const size_t time_axis = *ArrayDimOf(g_, c, *g_.time_dim);
      for (const ArraySegment& segment : segments) {
        const uint64_t lo = std::max(range_.start, segment.begin);
        const uint64_t hi = std::min(range_.stop, segment.end);
        if (lo >= hi) continue;
        const internal::ArrayState& array = *g_.arrays[segment.array];
        const std::vector<uint64_t>& chunk = array.read_chunk_shape;
        const uint64_t first = lo - segment.begin + segment.first;
        const uint64_t stop = hi - segment.begin + segment.first;
        const int64_t shift =
            static_cast<int64_t>(segment.begin) - static_cast<int64_t>(segment.first);
        const uint64_t level_chunk =
            channel.level_dim ? channel.level_index / chunk[*channel.level_dim] : 0;
        const uint64_t member_chunk =
            channel.member_dim ? channel.member_index / chunk[*channel.member_dim] : 0;
        for (uint64_t k = first / chunk[time_axis]; k <= (stop - 1) / chunk[time_axis]; ++k) {
          const auto key = std::make_tuple(segment.array, shift, k, level_chunk, member_chunk);
          auto [it, added] = by_key.emplace(key, cells_.size());
          if (added) cells_.push_back(MakeCell(c, segment.array, shift, time_axis, k));
          Cell& cell = cells_[it->second];
          cell.channels.push_back(CellChannel{watched, channel.level_index, channel.member_index,
                                              std::max(first, k * chunk[time_axis]),
                                              std::min(stop, (k + 1) * chunk[time_axis])});
        }
      }
    }
    // In key order: a round holds neighbouring steps of one array, which share shards.
    std::vector<Cell> ordered;
    ordered.reserve(cells_.size());
    for (const auto& [key, i] : by_key) ordered.push_back(std::move(cells_[i]));
    cells_ = std::move(ordered);
  }

  Cell MakeCell(size_t c, size_t slot, int64_t shift, size_t time_axis, uint64_t time_chunk) const {
    const Channel& channel = g_.channels[c];
    const internal::ArrayState& array = *g_.arrays[slot];
    const std::vector<uint64_t>& chunk = array.read_chunk_shape;
    const size_t rank = array.metadata.shape.size();
    Cell cell;
    cell.slot = slot;
    cell.shift = shift;
    cell.can_be_nan = watched_.back().can_be_nan;
    cell.time_axis = time_axis;
    cell.level_axis = channel.level_dim;
    cell.member_axis = channel.member_dim;
    cell.box.assign(rank, IndexRange{0, 0});
    cell.low.assign(rank, 0);
    cell.high.assign(rank, 0);
    cell.low[time_axis] = cell.high[time_axis] = time_chunk;
    if (channel.level_dim) {
      cell.low[*channel.level_dim] = cell.high[*channel.level_dim] =
          channel.level_index / chunk[*channel.level_dim];
    }
    if (channel.member_dim) {
      cell.low[*channel.member_dim] = cell.high[*channel.member_dim] =
          channel.member_index / chunk[*channel.member_dim];
    }
    for (size_t d = 0; d < g_.dims.size(); ++d) {
      const std::optional<size_t> a = ArrayDimOf(g_, c, d);
      if (!a || d == *g_.time_dim) continue;
      const IndexRange touched = TouchedStoreRange(g_, d);
      cell.box[*a] = touched;
      cell.low[*a] = touched.start / chunk[*a];
      cell.high[*a] = (touched.stop - 1) / chunk[*a];
    }
    return cell;
  }

  Result<const std::unordered_set<std::string>*> StoredKeys(size_t slot) {
    auto it = keys_.find(slot);
    if (it != keys_.end()) return &it->second;
    const internal::ArrayState& array = *g_.arrays[slot];
    ZS_ASSIGN_OR_RETURN_CTX(
        std::vector<KeyInfo> listed, array.store->List(array.path),
        "listing the chunks of " + array.Describe() + " to detect missing dates");
    std::unordered_set<std::string>& keys = keys_[slot];
    for (KeyInfo& key : listed) keys.insert(std::move(key.key));
    return &keys;
  }

  // Sets `stored` of cells [begin, end): their read chunks whose object is listed and, in a shard,
  // whose inner chunk the shard's index holds.
  Status FindStoredChunks(size_t begin, size_t end) {
    struct Candidate {
      size_t cell;
      std::vector<uint64_t> coords;
      std::string shard_key;  // sharded: the shard holding it
      uint64_t inner = 0;     // sharded: its index in the shard (C order)
    };
    std::vector<Candidate> candidates;
    std::map<size_t, std::vector<std::string>> shard_keys;  // per array, distinct
    for (size_t i = begin; i < end; ++i) {
      const Cell& cell = cells_[i];
      const internal::ArrayState& array = *g_.arrays[cell.slot];
      ZS_ASSIGN_OR_RETURN(const std::unordered_set<std::string>* listed, StoredKeys(cell.slot));
      const ShardingCodec* sharding = array.chain->sharding();
      const size_t rank = cell.low.size();
      std::vector<uint64_t> coords = cell.low, object(rank);
      for (bool more = true; more;) {
        uint64_t inner = 0;
        for (size_t a = 0; a < rank; ++a) {
          const uint64_t per_shard = sharding != nullptr ? sharding->chunks_per_shard()[a] : 1;
          object[a] = coords[a] / per_shard;
          inner = inner * per_shard + coords[a] % per_shard;
        }
        std::string key = array.ChunkKey(object);
        if (listed->count(key)) {
          if (sharding != nullptr) {
            std::vector<std::string>& keys = shard_keys[cell.slot];
            if (keys.empty() || keys.back() != key) keys.push_back(key);
            candidates.push_back(Candidate{i, coords, std::move(key), inner});
          } else {
            candidates.push_back(Candidate{i, coords, {}, 0});
          }
        }
        more = false;
        for (size_t a = rank; a-- > 0;) {
          if (coords[a] < cells_[i].high[a]) {
            ++coords[a];
            more = true;
            break;
          }
          coords[a] = cells_[i].low[a];
        }
      }
    }
    std::map<std::pair<size_t, std::string>, std::shared_ptr<const ShardIndex>> indexes;
    for (auto& [slot, keys] : shard_keys) {
      std::sort(keys.begin(), keys.end());
      keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
      std::vector<Result<std::shared_ptr<const ShardIndex>>> read =
          ReadShardIndexes(*g_.arrays[slot], keys, pool_, &index_cache_);
      for (size_t k = 0; k < keys.size(); ++k) {
        if (!read[k].ok()) {
          return std::move(read[k]).status().WithContext("detecting missing dates");
        }
        indexes[{slot, keys[k]}] = std::move(*read[k]);
      }
    }
    for (Candidate& candidate : candidates) {
      Cell& cell = cells_[candidate.cell];
      if (!candidate.shard_key.empty()) {
        const std::shared_ptr<const ShardIndex>& index = indexes[{cell.slot, candidate.shard_key}];
        if (index == nullptr || index->is_empty(candidate.inner)) continue;
      }
      cell.stored.push_back(std::move(candidate.coords));
    }
    return Status::Ok();
  }

  // Every step of `cell`'s channels has a value (a stored chunk of an array that holds no NaN).
  void MarkAll(const Cell& cell) {
    for (const CellChannel& cc : cell.channels) {
      for (uint64_t i = cc.begin; i < cc.end; ++i) Flag(cell, cc, i) = 1;
    }
  }

  uint8_t& Flag(const Cell& cell, const CellChannel& cc, uint64_t array_index) {
    const auto t = static_cast<uint64_t>(static_cast<int64_t>(array_index) + cell.shift);
    return watched_[cc.watched].has_value[t - range_.start];
  }

  bool Decided(const Cell& cell) {
    for (const CellChannel& cc : cell.channels) {
      for (uint64_t i = cc.begin; i < cc.end; ++i) {
        if (!Flag(cell, cc, i)) return false;
      }
    }
    return true;
  }

  // Reads the stored chunks of cells [begin, end) whose values can be NaN, one per undecided cell
  // per wave, until each cell is decided or read whole.
  Status ReadWaves(size_t begin, size_t end) {
    std::vector<ChunkRead> reads;
    std::vector<size_t> read_cell;
    for (;;) {
      reads.clear();
      read_cell.clear();
      for (size_t i = begin; i < end; ++i) {
        Cell& cell = cells_[i];
        if (!cell.can_be_nan || cell.next >= cell.stored.size() || Decided(cell)) continue;
        ChunkRead read;
        read.array = g_.arrays[cell.slot];
        read.coords = cell.stored[cell.next++];
        reads.push_back(std::move(read));
        read_cell.push_back(i);
      }
      if (reads.empty()) return Status::Ok();
      PartialChunkOutput partial;
      partial.copy = [&](size_t r, std::span<const std::byte> decoded) {
        Scan(cells_[read_cell[r]], reads[r].coords, decoded);
      };
      // Listed a moment ago, gone now: no values from it.
      partial.fill = [](size_t) {};
      ReadChunks(reads, partial, pool_, 0, &index_cache_);
      for (ChunkRead& read : reads) {
        // kNotFound: a chunk deleted since the listing (or, with missing_chunks_are_errors, an
        // inner chunk that is empty after all): no values, as above.
        if (!read.status.ok() && read.status.code() != ErrorCode::kNotFound) {
          return std::move(read.status).WithContext("detecting missing dates");
        }
      }
    }
  }

  // Flags the steps of `cell`'s channels that read chunk `coords` (`decoded`) holds a value of.
  void Scan(const Cell& cell, const std::vector<uint64_t>& coords,
            std::span<const std::byte> decoded) {
    const internal::ArrayState& array = *g_.arrays[cell.slot];
    const std::vector<uint64_t>& shape = array.read_chunk_shape;
    const size_t rank = shape.size();
    const uint64_t element = DataTypeSize(array.metadata.data_type);
    std::vector<uint64_t> origin(rank), strides(rank), lo(rank), hi(rank), at(rank);
    uint64_t stride = 1;
    for (size_t a = rank; a-- > 0;) {
      origin[a] = coords[a] * shape[a];
      strides[a] = stride;
      stride *= shape[a];
    }
    for (const CellChannel& cc : cell.channels) {
      const Watched& w = watched_[cc.watched];
      bool empty = false;
      for (size_t a = 0; a < rank; ++a) {
        if (a == cell.time_axis) continue;
        IndexRange r = cell.box[a];
        if (cell.level_axis && a == *cell.level_axis) r = {cc.level, cc.level + 1};
        if (cell.member_axis && a == *cell.member_axis) r = {cc.member, cc.member + 1};
        lo[a] = std::max(r.start, origin[a]) - origin[a];
        hi[a] = std::min(r.stop, origin[a] + shape[a]) - origin[a];
        empty |= std::max(r.start, origin[a]) >= std::min(r.stop, origin[a] + shape[a]);
      }
      if (empty) continue;
      const size_t ta = cell.time_axis;
      const uint64_t from = std::max(cc.begin, origin[ta]);
      const uint64_t to = std::min(cc.end, origin[ta] + shape[ta]);
      for (uint64_t i = from; i < to; ++i) {
        uint8_t& flag = Flag(cell, cc, i);
        if (flag) continue;
        lo[ta] = i - origin[ta];
        hi[ta] = lo[ta] + 1;
        flag = BoxHasValue(w, decoded.data(), element, strides, lo, hi, at) ? 1 : 0;
      }
    }
  }

  // Whether the box [lo, hi) of a chunk (C order, `strides` in elements) holds a value: runs along
  // the last dimension, stopping at the first value.
  static bool BoxHasValue(const Watched& w, const std::byte* data, uint64_t element,
                          const std::vector<uint64_t>& strides, const std::vector<uint64_t>& lo,
                          const std::vector<uint64_t>& hi, std::vector<uint64_t>& at) {
    const size_t rank = lo.size();
    const CfDecoding& cf = w.cf;
    at = lo;
    const uint64_t run = hi[rank - 1] - lo[rank - 1];
    for (;;) {
      uint64_t offset = 0;
      for (size_t a = 0; a < rank; ++a) offset += at[a] * strides[a];
      if (w.any_value(data + offset * element, run, cf)) return true;
      size_t a = rank - 1;
      for (;;) {
        if (a == 0) return false;
        --a;
        if (++at[a] < hi[a]) break;
        at[a] = lo[a];
      }
    }
  }

  const LoaderGeometry& g_;
  ThreadPool* pool_;
  const IndexRange range_;
  ShardIndexCache index_cache_;
  std::vector<Watched> watched_;
  std::vector<Cell> cells_;
  std::unordered_map<size_t, std::unordered_set<std::string>> keys_;
};

}  // namespace

Result<std::vector<uint64_t>> DetectMissingSteps(const LoaderGeometry& geometry, ThreadPool* pool) {
  if (!geometry.time_dim) return std::vector<uint64_t>();
  return Detection(geometry, pool).Run();
}

}  // namespace zarrstream
