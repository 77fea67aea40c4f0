// Index arithmetic of the sample plan; the overview is in sample_plan.h.
#include "loader/sample_plan.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>

#include "util/checked_size.h"
#include "util/mix64.h"

namespace zarrstream {
namespace {

constexpr const char* kStateFormat = "zarrstream.sample_plan/1";
// Feistel domains are at most 2^64 (two 32-bit halves); keeping n at or below 2^62 leaves cycle
// walking its expected <= 4 encryptions and every position sum below 2^64.
constexpr uint64_t kMaxSamples = uint64_t{1} << 62;

// Keys depend on (seed, epoch, purpose) only, never on the rank, so every rank computes the same
// epoch order.
uint64_t DeriveKey(uint64_t seed, uint64_t epoch, uint64_t purpose) {
  uint64_t h = Mix64(seed ^ 0x6a09e667f3bcc908ULL);
  h = Mix64(h ^ (epoch + 0x9e3779b97f4a7c15ULL));
  return Mix64(h ^ (purpose * 0xbb67ae8584caa73bULL));
}

enum KeyPurpose : uint64_t { kSamplesKey = 1, kBlocksKey = 2, kGroupsKey = 3 };

std::string RangeText(const IndexRange& range) {
  std::string s = "[";
  s += std::to_string(range.start);
  s += ", ";
  s += std::to_string(range.stop);
  s += ")";
  return s;
}

// FNV-1a over the fields that define the sequence besides seed, epoch, world size, batch size and
// shuffle mode (which the state records, and Restore checks, one by one).
class Fingerprint {
 public:
  void Add(uint64_t value) {
    for (int i = 0; i < 8; ++i) AddByte(static_cast<uint8_t>(value >> (8 * i)));
  }
  void Add(std::string_view text) {
    Add(text.size());
    for (char c : text) AddByte(static_cast<uint8_t>(c));
  }
  uint64_t value() const { return hash_; }

 private:
  void AddByte(uint8_t byte) {
    hash_ ^= byte;
    hash_ *= 0x100000001b3ULL;
  }
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

}  // namespace

std::string_view ShuffleModeName(ShuffleMode mode) {
  switch (mode) {
    case ShuffleMode::kNone:
      return "none";
    case ShuffleMode::kExact:
      return "exact";
    case ShuffleMode::kBlock:
      return "block";
  }
  return "unknown";
}

Result<ShuffleMode> ParseShuffleMode(std::string_view name) {
  for (ShuffleMode mode : {ShuffleMode::kNone, ShuffleMode::kExact, ShuffleMode::kBlock}) {
    if (name == ShuffleModeName(mode)) return mode;
  }
  std::string s = "unknown shuffle mode '";
  s += name;
  s += "': expected none, exact or block";
  return ConfigError(std::move(s));
}

// ---- FeistelPermutation ----

FeistelPermutation::FeistelPermutation(uint64_t size, uint64_t key) : size_(size) {
  // Bits needed for size - 1, at least 2 and even, so the two halves are equal.
  int bits = 2;
  while (bits < 64 && (size - 1) >> bits != 0) ++bits;
  if (bits % 2 != 0) ++bits;
  half_bits_ = bits / 2;
  half_mask_ = (uint64_t{1} << half_bits_) - 1;
  for (int i = 0; i < kRounds; ++i) {
    round_keys_[i] = Mix64(key + static_cast<uint64_t>(i + 1) * 0x9e3779b97f4a7c15ULL);
  }
}

uint64_t FeistelPermutation::Encrypt(uint64_t x) const {
  uint64_t left = x >> half_bits_;
  uint64_t right = x & half_mask_;
  for (uint64_t key : round_keys_) {
    const uint64_t next_left = right;
    right = left ^ (Mix64(right ^ key) & half_mask_);
    left = next_left;
  }
  return (left << half_bits_) | right;
}

uint64_t FeistelPermutation::operator()(uint64_t index) const {
  if (size_ <= 1) return index;
  uint64_t x = Encrypt(index);
  while (x >= size_) x = Encrypt(x);
  return x;
}

// ---- SamplePlanState ----

std::string SamplePlanState::ToJson() const {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016" PRIx64, fingerprint);
  nlohmann::json j = {{"format", kStateFormat},   {"seed", seed},
                      {"epoch", epoch},           {"next_batch", next_batch},
                      {"world_size", world_size}, {"rank", rank},
                      {"batch_size", batch_size}, {"shuffle", ShuffleModeName(shuffle)},
                      {"fingerprint", hex}};
  return j.dump();
}

Result<SamplePlanState> SamplePlanState::FromJson(std::string_view json) {
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  const std::string what = "sample plan state";
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgumentError(what + " is not a JSON object");
  }
  auto format = j.find("format");
  if (format == j.end() || !format->is_string() || *format != kStateFormat) {
    std::string s = what;
    s += ": \"format\" must be \"";
    s += kStateFormat;
    s += "\"";
    return InvalidArgumentError(std::move(s));
  }
  auto field = [&](const char* name, uint64_t max, uint64_t* out) -> Status {
    auto it = j.find(name);
    if (it == j.end() || !it->is_number_unsigned() || it->get<uint64_t>() > max) {
      std::string s = what;
      s += ": \"";
      s += name;
      s += "\" is missing or not an unsigned integer";
      if (max != UINT64_MAX) {
        s += " <= ";
        s += std::to_string(max);
      }
      return InvalidArgumentError(std::move(s));
    }
    *out = it->get<uint64_t>();
    return Status::Ok();
  };
  SamplePlanState state;
  uint64_t world_size = 0;
  uint64_t rank = 0;
  ZS_RETURN_IF_ERROR(field("seed", UINT64_MAX, &state.seed));
  ZS_RETURN_IF_ERROR(field("epoch", UINT64_MAX, &state.epoch));
  ZS_RETURN_IF_ERROR(field("next_batch", UINT64_MAX, &state.next_batch));
  ZS_RETURN_IF_ERROR(field("world_size", UINT32_MAX, &world_size));
  ZS_RETURN_IF_ERROR(field("rank", UINT32_MAX, &rank));
  ZS_RETURN_IF_ERROR(field("batch_size", UINT64_MAX, &state.batch_size));
  state.world_size = static_cast<uint32_t>(world_size);
  state.rank = static_cast<uint32_t>(rank);
  auto shuffle = j.find("shuffle");
  if (shuffle == j.end() || !shuffle->is_string()) {
    return InvalidArgumentError(what + ": \"shuffle\" is missing or not a string");
  }
  ZS_ASSIGN_OR_RETURN_CTX(state.shuffle, ParseShuffleMode(shuffle->get<std::string>()), what);
  auto fingerprint = j.find("fingerprint");
  const std::string hex =
      fingerprint != j.end() && fingerprint->is_string() ? fingerprint->get<std::string>() : "";
  if (hex.size() != 16 || hex.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return InvalidArgumentError(what + ": \"fingerprint\" must be 16 lowercase hex digits");
  }
  state.fingerprint = std::stoull(hex, nullptr, 16);
  return state;
}

// ---- SamplePlan: construction ----

namespace {

// "sample plan, dimension '<name>'": where errors about one sampled dimension point.
std::string DimWhere(const std::string& what, const std::string& name) {
  return what + ", dimension '" + name + "'";
}

// Refuses options no plan can have: no sampled dimensions, a zero batch size, world size or block
// size, a rank outside the world.
Status CheckPlanOptions(size_t num_dims, const SamplePlanOptions& options,
                        const std::string& what) {
  if (num_dims == 0) {
    return ConfigError(what + ": no sampled dimensions; sample at least one (e.g. time)");
  }
  if (options.batch_size == 0) return ConfigError(what + ": batch_size must be at least 1");
  if (options.world_size == 0) return ConfigError(what + ": world_size must be at least 1");
  if (options.rank >= options.world_size) {
    return ConfigError(what + ": rank " + std::to_string(options.rank) +
                       " is not below world_size " + std::to_string(options.world_size));
  }
  if (options.block_chunks == 0) return ConfigError(what + ": block_chunks must be at least 1");
  if (options.block_window == 0) return ConfigError(what + ": block_window must be at least 1");
  return Status::Ok();
}

// Refuses sampled dimension `i` of `dims` when it has no name or one an earlier dimension has, a
// zero window, stride or chunk extent, an empty selection, or a window (plus target reach) that
// does not fit its selection.
Status CheckSampledDim(std::span<const SampledDim> dims, size_t i, const std::string& what) {
  const SampledDim& dim = dims[i];
  if (dim.name.empty()) {
    return ConfigError(what + ": sampled dimension " + std::to_string(i) + " has no name");
  }
  for (size_t k = 0; k < i; ++k) {
    if (dims[k].name == dim.name) {
      return ConfigError(what + ": dimension '" + dim.name + "' is sampled twice");
    }
  }
  const std::string where = DimWhere(what, dim.name);
  if (dim.window == 0) return ConfigError(where + ": window must be at least 1");
  if (dim.stride.has_value() && *dim.stride == 0) {
    return ConfigError(where + ": stride must be at least 1");
  }
  if (dim.chunk == 0) return ConfigError(where + ": chunk extent must be at least 1");
  if (dim.range.stop <= dim.range.start) {
    return ConfigError(where + ": the selection " + RangeText(dim.range) + " is empty");
  }
  const uint64_t size = dim.range.size();
  const uint64_t needed = dim.window + dim.reach;
  if (needed < dim.window || needed > size) {
    const std::string reach = dim.reach == 0 ? ""
                                             : " plus target reach " + std::to_string(dim.reach) +
                                                   " (the largest target offset past the window)";
    return ConfigError(where + ": window " + std::to_string(dim.window) + reach +
                       " does not fit the selected range " + RangeText(dim.range) + " of " +
                       std::to_string(size) + " indices");
  }
  return Status::Ok();
}

// This rank's slice of the epoch order of `n` samples, as (first position, count) (see the
// overview for the remainder policies).
Result<std::pair<uint64_t, uint64_t>> RankSlice(uint64_t n, const SamplePlanOptions& options,
                                                const std::string& what) {
  const uint64_t world = options.world_size;
  const uint64_t batch = options.batch_size;
  if (options.drop_last) {
    const std::optional<uint64_t> per_step = CheckedMul(world, batch);
    const uint64_t per_rank = per_step ? n / *per_step * batch : 0;
    if (per_rank == 0) {
      return ConfigError(what + ": drop_last with " + std::to_string(n) +
                         " samples leaves no batches: one batch of " + std::to_string(batch) +
                         " on each of " + std::to_string(world) + " ranks needs more samples");
    }
    return std::pair<uint64_t, uint64_t>{options.rank * per_rank, per_rank};
  }
  if (options.pad_to_equal) {
    const uint64_t per_rank = CeilDiv(n, world);
    return std::pair<uint64_t, uint64_t>{options.rank * per_rank, per_rank};
  }
  const uint64_t base = n / world;
  const uint64_t extra = n % world;
  return std::pair<uint64_t, uint64_t>{
      options.rank * base + std::min<uint64_t>(options.rank, extra),
      base + (options.rank < extra ? 1 : 0)};
}

}  // namespace

Result<SamplePlan> SamplePlan::Create(std::vector<SampledDim> dims,
                                      const SamplePlanOptions& options) {
  const std::string what = "sample plan";
  ZS_RETURN_IF_ERROR(CheckPlanOptions(dims.size(), options, what));

  SamplePlan plan;
  plan.options_ = options;
  plan.num_samples_ = 1;
  plan.num_blocks_ = 1;
  uint64_t all_samples = 1;  // without leaving out missing indices
  Fingerprint fingerprint;
  for (size_t i = 0; i < dims.size(); ++i) {
    ZS_RETURN_IF_ERROR(CheckSampledDim(dims, i, what));
    const SampledDim& dim = dims[i];
    const std::string where = DimWhere(what, dim.name);
    const uint64_t size = dim.range.size();
    const uint64_t needed = dim.window + dim.reach;
    DimGeometry g;
    g.stride = dim.stride.value_or(dim.window);
    const uint64_t all_count = (size - needed) / g.stride + 1;
    std::vector<uint64_t> kept;
    if (!dim.missing.empty()) {
      for (uint64_t j = 0; j < all_count; ++j) {
        const uint64_t origin = dim.range.start + j * g.stride;
        const bool touches = std::any_of(dim.touched.begin(), dim.touched.end(), [&](uint64_t t) {
          return std::binary_search(dim.missing.begin(), dim.missing.end(), origin + t);
        });
        if (!touches) kept.push_back(j);
      }
      if (kept.empty()) {
        return ConfigError(where + ": every sample touches a missing date (" +
                           std::to_string(dim.missing.size()) + " missing in the selection)");
      }
      if (kept.size() == all_count) kept.clear();
    }
    const uint64_t count = kept.empty() ? all_count : kept.size();
    all_samples = CheckedMul(all_samples, all_count).value_or(UINT64_MAX);
    // A block spans at least one stride so that every block holds an origin (without missing
    // indices: with them a block may be empty).
    const uint64_t span_chunks = std::max(options.block_chunks, CeilDiv(g.stride, dim.chunk));
    // BlockBegin computes block boundaries up to one block past the range's end.
    const std::optional<uint64_t> block_span = CheckedMul(span_chunks, dim.chunk);
    if (!block_span || *block_span > UINT64_MAX - dim.range.stop) {
      return ConfigError(where + ": block_chunks × chunk extent overflows");
    }
    g.block_span = *block_span;
    g.first_block = dim.range.start / g.block_span;
    const uint64_t last_origin = dim.range.start + (all_count - 1) * g.stride;
    g.num_blocks = last_origin / g.block_span - g.first_block + 1;
    const std::optional<uint64_t> num_samples = CheckedMul(plan.num_samples_, count);
    if (!num_samples || *num_samples > kMaxSamples) {
      return ConfigError(what + ": the index space has more than 2^62 samples (at dimension '" +
                         dim.name + "', " + std::to_string(count) + " origins)");
    }
    plan.num_samples_ = *num_samples;
    plan.num_blocks_ *= g.num_blocks;  // <= num_samples_: every block holds an origin
    plan.origin_counts_.push_back(count);
    plan.geometry_.push_back(g);
    fingerprint.Add(dim.name);
    for (uint64_t v :
         {dim.range.start, dim.range.stop, dim.window, g.stride, dim.reach, dim.chunk}) {
      fingerprint.Add(v);
    }
    fingerprint.Add(kept.size());
    for (uint64_t j : kept) fingerprint.Add(j);
    plan.kept_.push_back(std::move(kept));
  }
  plan.num_missing_samples_ = all_samples - plan.num_samples_;
  for (uint64_t v : {options.block_chunks, options.block_window, uint64_t{options.drop_last},
                     uint64_t{options.pad_to_equal}}) {
    fingerprint.Add(v);
  }
  plan.fingerprint_ = fingerprint.value();
  plan.dims_ = std::move(dims);

  // This rank's slice of the epoch order.
  ZS_ASSIGN_OR_RETURN(const auto slice, RankSlice(plan.num_samples_, options, what));
  plan.rank_begin_ = slice.first;
  plan.rank_size_ = slice.second;
  plan.num_batches_ = CeilDiv(plan.rank_size_, options.batch_size);
  plan.order_ = plan.MakeOrder(options.shuffle, 0);
  return plan;
}

// ---- index space ----

void SamplePlan::SampleOrigin(uint64_t sample_id, std::span<uint64_t> origin) const {
  for (size_t d = dims_.size(); d-- > 0;) {
    const uint64_t j = sample_id % origin_counts_[d];
    sample_id /= origin_counts_[d];
    origin[d] = dims_[d].range.start + OriginNumber(d, j) * geometry_[d].stride;
  }
}

std::vector<uint64_t> SamplePlan::SampleOrigin(uint64_t sample_id) const {
  std::vector<uint64_t> origin(dims_.size());
  SampleOrigin(sample_id, origin);
  return origin;
}

// ---- epoch order ----

uint64_t SamplePlan::BlockBegin(size_t dim, uint64_t block) const {
  if (block == 0) return 0;
  const DimGeometry& g = geometry_[dim];
  const uint64_t boundary = (g.first_block + block) * g.block_span;  // > range.start
  const uint64_t number = CeilDiv(boundary - dims_[dim].range.start, g.stride);
  const std::vector<uint64_t>& kept = kept_[dim];
  if (!kept.empty()) {
    return static_cast<uint64_t>(std::lower_bound(kept.begin(), kept.end(), number) - kept.begin());
  }
  return std::min(number, origin_counts_[dim]);
}

uint64_t SamplePlan::BlockSize(uint64_t block_id) const {
  uint64_t size = 1;
  for (size_t d = dims_.size(); d-- > 0;) {
    const uint64_t b = block_id % geometry_[d].num_blocks;
    block_id /= geometry_[d].num_blocks;
    size *= BlockBegin(d, b + 1) - BlockBegin(d, b);
  }
  return size;
}

uint64_t SamplePlan::GroupSize(const EpochOrder& order, uint64_t group) const {
  const uint64_t first = group * options_.block_window;
  const uint64_t count = std::min(options_.block_window, num_blocks_ - first);
  uint64_t size = 0;
  for (uint64_t q = first; q < first + count; ++q) size += BlockSize(order.blocks(q));
  return size;
}

SamplePlan::EpochOrder SamplePlan::MakeOrder(ShuffleMode mode, uint64_t epoch) const {
  EpochOrder order;
  order.mode = mode;
  const uint64_t seed = options_.seed;
  if (mode == ShuffleMode::kExact) {
    order.samples = FeistelPermutation(num_samples_, DeriveKey(seed, epoch, kSamplesKey));
  } else if (mode == ShuffleMode::kBlock) {
    order.blocks = FeistelPermutation(num_blocks_, DeriveKey(seed, epoch, kBlocksKey));
    order.group_key = DeriveKey(seed, epoch, kGroupsKey);
    order.num_groups = CeilDiv(num_blocks_, options_.block_window);
    order.checkpoints.reserve(CeilDiv(order.num_groups, kCheckpointGroups));
    uint64_t position = 0;
    for (uint64_t g = 0; g < order.num_groups; ++g) {
      if (g % kCheckpointGroups == 0) order.checkpoints.push_back(position);
      position += GroupSize(order, g);
    }
  }
  return order;
}

void SamplePlan::FillOrder(const EpochOrder& order, uint64_t begin, std::span<uint64_t> ids) const {
  switch (order.mode) {
    case ShuffleMode::kNone:
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = begin + i;
      return;
    case ShuffleMode::kExact:
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = order.samples(begin + i);
      return;
    case ShuffleMode::kBlock:
      FillBlockOrder(order, begin, ids);
      return;
  }
}

void SamplePlan::FillBlockOrder(const EpochOrder& order, uint64_t begin,
                                std::span<uint64_t> ids) const {
  if (ids.empty()) return;
  // The group holding `begin`: the last checkpoint at or before it, then at most 63 group sizes.
  const auto checkpoint =
      std::upper_bound(order.checkpoints.begin(), order.checkpoints.end(), begin) - 1;
  uint64_t group =
      static_cast<uint64_t>(checkpoint - order.checkpoints.begin()) * kCheckpointGroups;
  uint64_t group_start = *checkpoint;
  while (true) {
    const uint64_t size = GroupSize(order, group);
    if (begin < group_start + size) break;
    group_start += size;
    ++group;
  }

  const size_t num_dims = dims_.size();
  std::vector<uint64_t> block_ids;
  std::vector<uint64_t> block_starts;  // within the group, plus its size at the end
  size_t out = 0;
  uint64_t position = begin;
  while (out < ids.size()) {
    const uint64_t first = group * options_.block_window;
    const uint64_t count = std::min(options_.block_window, num_blocks_ - first);
    block_ids.clear();
    block_starts.assign(1, 0);
    for (uint64_t q = first; q < first + count; ++q) {
      block_ids.push_back(order.blocks(q));
      block_starts.push_back(block_starts.back() + BlockSize(block_ids.back()));
    }
    const uint64_t group_size = block_starts.back();
    const FeistelPermutation within(group_size, Mix64(order.group_key ^ Mix64(group)));
    for (uint64_t t = position - group_start; t < group_size && out < ids.size(); ++t) {
      const uint64_t u = within(t);
      const size_t b =
          std::upper_bound(block_starts.begin(), block_starts.end(), u) - block_starts.begin() - 1;
      // Block id and sample-within-block to a sample id; all three are C order (last dim
      // fastest), so one pass from the last dimension decomposes and composes them.
      uint64_t block_rest = block_ids[b];
      uint64_t local = u - block_starts[b];
      uint64_t sample_id = 0;
      uint64_t multiplier = 1;
      for (size_t d = num_dims; d-- > 0;) {
        const uint64_t block = block_rest % geometry_[d].num_blocks;
        block_rest /= geometry_[d].num_blocks;
        const uint64_t j_begin = BlockBegin(d, block);
        const uint64_t extent = BlockBegin(d, block + 1) - j_begin;
        const uint64_t j = j_begin + local % extent;
        local /= extent;
        sample_id += j * multiplier;
        multiplier *= origin_counts_[d];
      }
      ids[out++] = sample_id;
    }
    group_start += group_size;
    position = group_start;
    ++group;
  }
}

// ---- batches and cursor ----

SampleBatch SamplePlan::MakeBatch(uint64_t index) const {
  const uint64_t n = num_samples_;
  const uint64_t offset = index * options_.batch_size;
  const uint64_t size = std::min(options_.batch_size, rank_size_ - offset);
  SampleBatch batch;
  batch.epoch = epoch_;
  batch.index = index;
  batch.num_dims = dims_.size();
  batch.sample_ids.resize(size);
  // Positions past n are padding: they repeat the order from its start (wrapping again when
  // there are fewer samples than ranks).
  const uint64_t first = rank_begin_ + offset;
  uint64_t done = 0;
  while (done < size) {
    const uint64_t p = first + done;
    const bool padding = p >= n;
    const uint64_t position = padding ? (p - n) % n : p;
    const uint64_t run = std::min(size - done, n - position);
    FillOrder(order_, position, std::span<uint64_t>(batch.sample_ids).subspan(done, run));
    if (padding) batch.num_padding += run;
    done += run;
  }
  batch.origins.resize(size * batch.num_dims);
  for (uint64_t i = 0; i < size; ++i) {
    SampleOrigin(batch.sample_ids[i],
                 std::span<uint64_t>(batch.origins).subspan(i * batch.num_dims, batch.num_dims));
  }
  return batch;
}

Result<SampleBatch> SamplePlan::Batch(uint64_t index) const {
  if (index >= num_batches_) {
    std::string s = "sample plan: batch ";
    s += std::to_string(index);
    s += " is past the ";
    s += std::to_string(num_batches_);
    s += " batches of rank ";
    s += std::to_string(options_.rank);
    return InvalidArgumentError(std::move(s));
  }
  return MakeBatch(index);
}

std::optional<SampleBatch> SamplePlan::Next() {
  if (next_batch_ >= num_batches_) return std::nullopt;
  return MakeBatch(next_batch_++);
}

void SamplePlan::SetEpoch(uint64_t epoch) {
  if (epoch != epoch_) order_ = MakeOrder(options_.shuffle, epoch);
  epoch_ = epoch;
  next_batch_ = 0;
}

SamplePlanState SamplePlan::State() const {
  SamplePlanState state;
  state.seed = options_.seed;
  state.epoch = epoch_;
  state.next_batch = next_batch_;
  state.world_size = options_.world_size;
  state.rank = options_.rank;
  state.batch_size = options_.batch_size;
  state.shuffle = options_.shuffle;
  state.fingerprint = fingerprint_;
  return state;
}

Status SamplePlan::Restore(const SamplePlanState& state) {
  auto mismatch = [](const char* what, const std::string& saved, const std::string& ours) {
    std::string s = "cannot restore the sample plan: the state was saved with ";
    s += what;
    s += " ";
    s += saved;
    s += ", this plan has ";
    s += what;
    s += " ";
    s += ours;
    return InvalidArgumentError(std::move(s));
  };
  if (state.seed != options_.seed) {
    return mismatch("seed", std::to_string(state.seed), std::to_string(options_.seed));
  }
  if (state.world_size != options_.world_size) {
    return mismatch("world_size", std::to_string(state.world_size),
                    std::to_string(options_.world_size));
  }
  if (state.batch_size != options_.batch_size) {
    return mismatch("batch_size", std::to_string(state.batch_size),
                    std::to_string(options_.batch_size));
  }
  if (state.shuffle != options_.shuffle) {
    return mismatch("shuffle", std::string(ShuffleModeName(state.shuffle)),
                    std::string(ShuffleModeName(options_.shuffle)));
  }
  if (state.fingerprint != fingerprint_) {
    return InvalidArgumentError(
        "cannot restore the sample plan: the state was saved for a different geometry (the "
        "sampled dimensions, their selected ranges, windows, strides, target reaches or chunk "
        "extents, or the block_chunks, block_window, drop_last or padding settings differ)");
  }
  if (state.next_batch > num_batches_) {
    std::string s = "cannot restore the sample plan: the state's position, batch ";
    s += std::to_string(state.next_batch);
    s += ", is past the ";
    s += std::to_string(num_batches_);
    s += " batches of rank ";
    s += std::to_string(options_.rank);
    return InvalidArgumentError(std::move(s));
  }
  SetEpoch(state.epoch);
  next_batch_ = state.next_batch;
  return Status::Ok();
}

// ---- read estimate ----

namespace {

// Distinct chunks along `dim` that some sample's window plus reach overlaps, for `origins` origins
// `stride` apart. With stride <= chunk every chunk between the first and the last is overlapped;
// otherwise walk the origins (their count is then at most the selection's size / chunk).
// `kept`: the origin numbers kept where missing indices leave some out (empty: all `origins`).
uint64_t ChunksOverlapped(const SampledDim& dim, uint64_t origins, uint64_t stride,
                          const std::vector<uint64_t>& kept) {
  const uint64_t footprint = dim.window + dim.reach;
  const uint64_t last_origin = dim.range.start + (origins - 1) * stride;
  if (stride <= dim.chunk && kept.empty()) {
    return (last_origin + footprint - 1) / dim.chunk - dim.range.start / dim.chunk + 1;
  }
  uint64_t chunks = 0;
  uint64_t next_uncounted = 0;  // chunks below this one are counted
  for (uint64_t k = 0; k < origins; ++k) {
    const uint64_t origin = dim.range.start + (kept.empty() ? k : kept[k]) * stride;
    const uint64_t low = std::max(origin / dim.chunk, next_uncounted);
    const uint64_t high = (origin + footprint - 1) / dim.chunk;
    if (low <= high) {
      chunks += high - low + 1;
      next_uncounted = high + 1;
    }
  }
  return chunks;
}

// The chunk cells (one chunk index per sampled dimension) that the windows plus reach of one
// batch's samples touch: the distinct ones, and the references (per sample, the cells it touches).
class BatchCells {
 public:
  explicit BatchCells(std::span<const SampledDim> dims)
      : dims_(dims), low_(dims.size()), high_(dims.size()), cell_(dims.size()) {}

  void Clear() { cells_.clear(); }

  // Adds the cells of the sample at `origin`; returns how many it touches.
  uint64_t AddSample(std::span<const uint64_t> origin) {
    uint64_t refs = 1;
    for (size_t d = 0; d < dims_.size(); ++d) {
      low_[d] = origin[d] / dims_[d].chunk;
      high_[d] = (origin[d] + dims_[d].window + dims_[d].reach - 1) / dims_[d].chunk;
      refs *= high_[d] - low_[d] + 1;
      cell_[d] = low_[d];
    }
    // Every cell of the box [low, high], odometer order.
    bool more = true;
    while (more) {
      cells_.insert(cell_);
      more = false;
      for (size_t d = dims_.size(); d-- > 0;) {
        if (cell_[d] < high_[d]) {
          ++cell_[d];
          more = true;
          break;
        }
        cell_[d] = low_[d];
      }
    }
    return refs;
  }

  size_t distinct() const { return cells_.size(); }

 private:
  std::span<const SampledDim> dims_;
  std::vector<uint64_t> low_;
  std::vector<uint64_t> high_;
  std::vector<uint64_t> cell_;
  std::set<std::vector<uint64_t>> cells_;
};

}  // namespace

ReadEstimate SamplePlan::EstimateReads(ShuffleMode mode, uint64_t max_batches) const {
  ReadEstimate estimate;
  estimate.mode = mode;
  estimate.chunks_in_selection = 1;
  for (size_t d = 0; d < dims_.size(); ++d) {
    estimate.chunks_in_selection *= static_cast<double>(
        ChunksOverlapped(dims_[d], origin_counts_[d], geometry_[d].stride, kept_[d]));
  }

  const EpochOrder other = mode == options_.shuffle ? EpochOrder{} : MakeOrder(mode, epoch_);
  const EpochOrder& order = mode == options_.shuffle ? order_ : other;
  const uint64_t full_batches = num_samples_ / options_.batch_size;
  const uint64_t batches = std::max<uint64_t>(full_batches, 1);
  const uint64_t batch_size = full_batches > 0 ? options_.batch_size : num_samples_;
  const uint64_t measured = std::min(std::max<uint64_t>(max_batches, 1), batches);

  std::vector<uint64_t> ids(batch_size);
  std::vector<uint64_t> origin(dims_.size());
  BatchCells cells(dims_);
  double distinct_sum = 0;
  double refs_sum = 0;
  for (uint64_t k = 0; k < measured; ++k) {
    // Evenly spaced: batch floor(k × batches / measured), without overflowing the product.
    const uint64_t batch = batches / measured * k + batches % measured * k / measured;
    FillOrder(order, batch * batch_size, ids);
    cells.Clear();
    for (uint64_t id : ids) {
      SampleOrigin(id, origin);
      refs_sum += static_cast<double>(cells.AddSample(origin));
    }
    distinct_sum += static_cast<double>(cells.distinct());
  }
  estimate.batches_measured = measured;
  estimate.chunks_per_batch = distinct_sum / static_cast<double>(measured);
  estimate.chunk_refs_per_batch = refs_sum / static_cast<double>(measured);
  const double batches_per_epoch =
      static_cast<double>(num_samples_) / static_cast<double>(options_.batch_size);
  estimate.read_amplification =
      estimate.chunks_per_batch * batches_per_epoch / estimate.chunks_in_selection;
  return estimate;
}

}  // namespace zarrstream
