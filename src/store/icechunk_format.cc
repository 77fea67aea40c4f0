// Reading Icechunk's flatbuffers through the low-level Table API. Each table below lists its
// fields by id as the spec's schemas define them (a field's vtable slot is 4 + 2 * id); spec 2
// only appends fields to spec 1's tables, so one reader serves both.
#include "store/icechunk_format.h"

#include <flatbuffers/flatbuffers.h>
#include <flatbuffers/flexbuffers.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>

namespace zarrstream::icechunk {

namespace {

constexpr std::string_view kMagic =
    "ICE\xF0\x9F\xA7\x8A"
    "CHUNK";
static_assert(kMagic.size() == 12);

// Decompressed flatbuffers larger than this are refused (a few bytes of zstd can claim more).
constexpr size_t kMaxFlatbufferBytes = size_t{1} << 32;

constexpr flatbuffers::voffset_t Slot(int id) {
  return static_cast<flatbuffers::voffset_t>(4 + 2 * id);
}

// Field ids, one namespace per table.
namespace snapshot_field {
constexpr int kId = 0, kParentId = 1, kNodes = 2, kFlushedAt = 3, kMessage = 4, kMetadata = 5,
              kManifestFiles = 6, kManifestFilesV2 = 7, kExtra = 8;
}
namespace node_field {
constexpr int kId = 0, kPath = 1, kUserData = 2, kNodeDataType = 3, kNodeData = 4, kExtra = 5;
}
// NodeData union members.
constexpr uint8_t kNodeArray = 1, kNodeGroup = 2;
namespace array_field {
constexpr int kShape = 0, kDimensionNames = 1, kManifests = 2, kShapeV2 = 3;
}
namespace shape_v2_field {
constexpr int kArrayLength = 0, kNumChunks = 1;
}
namespace manifest_ref_field {
constexpr int kObjectId = 0, kExtents = 1;
}
namespace metadata_item_field {
constexpr int kName = 0, kValue = 1;
}
namespace manifest_file_v2_field {
constexpr int kId = 0, kSizeBytes = 1, kNumChunkRefs = 2, kExtra = 3;
}
namespace manifest_field {
constexpr int kId = 0, kArrays = 1, kLocationDictionary = 2, kCompressionAlgorithm = 3, kExtra = 4;
}
namespace array_manifest_field {
constexpr int kNodeId = 0, kRefs = 1, kExtra = 2;
}
namespace chunk_ref_field {
constexpr int kIndex = 0, kInline = 1, kOffset = 2, kLength = 3, kChunkId = 4, kLocation = 5,
              kChecksumEtag = 6, kChecksumLastModified = 7, kCompressedLocation = 8, kExtra = 9;
}

// Struct sizes on the wire: ObjectId12, ObjectId8, DimensionShape {u64, u64}, ChunkIndexRange
// {u32, u32}, ManifestFileInfo {id12, pad 4, u64, u32, pad 4}.
constexpr size_t kId12Size = 12, kId8Size = 8, kDimensionShapeSize = 16, kIndexRangeSize = 8,
                 kManifestFileInfoSize = 32;

using flatbuffers::Table;
using flatbuffers::Verifier;
using ByteVector = flatbuffers::Vector<uint8_t>;
using TableVector = flatbuffers::Vector<flatbuffers::Offset<Table>>;

// A vector of structs, seen as its raw bytes: element count and the first element.
struct StructVector {
  const uint8_t* data = nullptr;
  uint32_t size = 0;
};

StructVector GetStructVector(const Table& t, int id) {
  const auto* v = t.GetPointer<const ByteVector*>(Slot(id));
  if (v == nullptr) return {};
  return {v->Data(), v->size()};
}

bool VerifyStructVector(Verifier& v, const Table& t, int id, size_t element_size, bool required) {
  if (!(required ? t.VerifyOffsetRequired(v, Slot(id)) : t.VerifyOffset(v, Slot(id)))) {
    return false;
  }
  const auto* vec = t.GetPointer<const ByteVector*>(Slot(id));
  return vec == nullptr ||
         v.VerifyVectorOrString(reinterpret_cast<const uint8_t*>(vec), element_size);
}

bool VerifyBytes(Verifier& v, const Table& t, int id, bool required) {
  return VerifyStructVector(v, t, id, 1, required);
}

bool VerifyString(Verifier& v, const Table& t, int id, bool required) {
  return (required ? t.VerifyOffsetRequired(v, Slot(id)) : t.VerifyOffset(v, Slot(id))) &&
         v.VerifyString(t.GetPointer<const flatbuffers::String*>(Slot(id)));
}

template <typename VerifyElement>
bool VerifyTables(Verifier& v, const Table& t, int id, bool required,
                  VerifyElement verify_element) {
  if (!(required ? t.VerifyOffsetRequired(v, Slot(id)) : t.VerifyOffset(v, Slot(id)))) {
    return false;
  }
  const auto* vec = t.GetPointer<const TableVector*>(Slot(id));
  if (vec == nullptr) return true;
  if (!v.VerifyVector(vec)) return false;
  for (uint32_t i = 0; i < vec->size(); ++i) {
    if (!verify_element(v, *vec->Get(i))) return false;
  }
  return true;
}

template <size_t N>
bool VerifyId(Verifier& v, const Table& t, int id, bool required) {
  return required ? t.VerifyFieldRequired<std::array<uint8_t, N>>(v, Slot(id), 1)
                  : t.VerifyField<std::array<uint8_t, N>>(v, Slot(id), 1);
}

template <size_t N>
std::optional<std::array<uint8_t, N>> GetId(const Table& t, int id) {
  const auto* p = t.GetStruct<const uint8_t*>(Slot(id));
  if (p == nullptr) return std::nullopt;
  std::array<uint8_t, N> out;
  std::memcpy(out.data(), p, N);
  return out;
}

std::string GetString(const Table& t, int id) {
  const auto* s = t.GetPointer<const flatbuffers::String*>(Slot(id));
  return s == nullptr ? std::string() : s->str();
}

std::span<const uint8_t> GetBytes(const Table& t, int id) {
  const auto* v = t.GetPointer<const ByteVector*>(Slot(id));
  if (v == nullptr) return {};
  return {v->Data(), v->size()};
}

bool VerifyManifestRef(Verifier& v, const Table& t) {
  using namespace manifest_ref_field;
  return t.VerifyTableStart(v) && VerifyId<kId12Size>(v, t, kObjectId, true) &&
         VerifyStructVector(v, t, kExtents, kIndexRangeSize, true) && v.EndTable();
}

bool VerifyShapeV2(Verifier& v, const Table& t) {
  using namespace shape_v2_field;
  return t.VerifyTableStart(v) && t.VerifyField<uint64_t>(v, Slot(kArrayLength), 8) &&
         t.VerifyField<uint32_t>(v, Slot(kNumChunks), 4) && v.EndTable();
}

bool VerifyDimensionName(Verifier& v, const Table& t) {
  return t.VerifyTableStart(v) && VerifyString(v, t, 0, false) && v.EndTable();
}

bool VerifyArrayNodeData(Verifier& v, const Table& t) {
  using namespace array_field;
  return t.VerifyTableStart(v) && VerifyStructVector(v, t, kShape, kDimensionShapeSize, true) &&
         VerifyTables(v, t, kDimensionNames, false, VerifyDimensionName) &&
         VerifyTables(v, t, kManifests, true, VerifyManifestRef) &&
         VerifyTables(v, t, kShapeV2, false, VerifyShapeV2) && v.EndTable();
}

bool VerifyNode(Verifier& v, const Table& t) {
  using namespace node_field;
  if (!(t.VerifyTableStart(v) && VerifyId<kId8Size>(v, t, kId, true) &&
        VerifyString(v, t, kPath, true) && VerifyBytes(v, t, kUserData, true) &&
        t.VerifyField<uint8_t>(v, Slot(kNodeDataType), 1) &&
        t.VerifyOffsetRequired(v, Slot(kNodeData)) && VerifyBytes(v, t, kExtra, false))) {
    return false;
  }
  const uint8_t type = t.GetField<uint8_t>(Slot(kNodeDataType), 0);
  const auto* data = t.GetPointer<const Table*>(Slot(kNodeData));
  if (type == kNodeArray) {
    if (!VerifyArrayNodeData(v, *data)) return false;
  } else if (type == kNodeGroup) {
    if (!(data->VerifyTableStart(v) && v.EndTable())) return false;
  } else {
    return false;
  }
  return v.EndTable();
}

bool VerifyMetadataItem(Verifier& v, const Table& t) {
  using namespace metadata_item_field;
  return t.VerifyTableStart(v) && VerifyString(v, t, kName, true) &&
         VerifyBytes(v, t, kValue, true) && v.EndTable();
}

bool VerifyManifestFileV2(Verifier& v, const Table& t) {
  using namespace manifest_file_v2_field;
  return t.VerifyTableStart(v) && VerifyId<kId12Size>(v, t, kId, false) &&
         t.VerifyField<uint64_t>(v, Slot(kSizeBytes), 8) &&
         t.VerifyField<uint32_t>(v, Slot(kNumChunkRefs), 4) && VerifyBytes(v, t, kExtra, false) &&
         v.EndTable();
}

bool VerifySnapshot(Verifier& v, const Table& t) {
  using namespace snapshot_field;
  return t.VerifyTableStart(v) && VerifyId<kId12Size>(v, t, kId, true) &&
         VerifyId<kId12Size>(v, t, kParentId, false) &&
         VerifyTables(v, t, kNodes, true, VerifyNode) &&
         t.VerifyField<uint64_t>(v, Slot(kFlushedAt), 8) && VerifyString(v, t, kMessage, true) &&
         VerifyTables(v, t, kMetadata, true, VerifyMetadataItem) &&
         VerifyStructVector(v, t, kManifestFiles, kManifestFileInfoSize, true) &&
         VerifyTables(v, t, kManifestFilesV2, false, VerifyManifestFileV2) &&
         VerifyBytes(v, t, kExtra, false) && v.EndTable();
}

bool VerifyChunkRef(Verifier& v, const Table& t) {
  using namespace chunk_ref_field;
  return t.VerifyTableStart(v) && VerifyStructVector(v, t, kIndex, 4, true) &&
         VerifyBytes(v, t, kInline, false) && t.VerifyField<uint64_t>(v, Slot(kOffset), 8) &&
         t.VerifyField<uint64_t>(v, Slot(kLength), 8) &&
         VerifyId<kId12Size>(v, t, kChunkId, false) && VerifyString(v, t, kLocation, false) &&
         VerifyString(v, t, kChecksumEtag, false) &&
         t.VerifyField<uint32_t>(v, Slot(kChecksumLastModified), 4) &&
         VerifyBytes(v, t, kCompressedLocation, false) && VerifyBytes(v, t, kExtra, false) &&
         v.EndTable();
}

bool VerifyArrayManifest(Verifier& v, const Table& t) {
  using namespace array_manifest_field;
  return t.VerifyTableStart(v) && VerifyId<kId8Size>(v, t, kNodeId, true) &&
         VerifyTables(v, t, kRefs, true, VerifyChunkRef) && VerifyBytes(v, t, kExtra, false) &&
         v.EndTable();
}

bool VerifyManifest(Verifier& v, const Table& t) {
  using namespace manifest_field;
  return t.VerifyTableStart(v) && VerifyId<kId12Size>(v, t, kId, true) &&
         VerifyTables(v, t, kArrays, true, VerifyArrayManifest) &&
         VerifyBytes(v, t, kLocationDictionary, false) &&
         t.VerifyField<uint8_t>(v, Slot(kCompressionAlgorithm), 1) &&
         VerifyBytes(v, t, kExtra, false) && v.EndTable();
}

// The root table of `buffer`, after `verify` accepted it; nullptr when it did not.
template <typename VerifyRoot>
const Table* VerifiedRoot(std::span<const uint8_t> buffer, VerifyRoot verify_root) {
  if (buffer.size() < sizeof(flatbuffers::uoffset_t) ||
      buffer.size() >= FLATBUFFERS_MAX_BUFFER_SIZE) {
    return nullptr;
  }
  // As icechunk's reader allows: snapshots of large repositories hold millions of tables.
  Verifier verifier(buffer.data(), buffer.size(), /*max_depth=*/64, /*max_tables=*/50'000'000);
  const flatbuffers::uoffset_t root = verifier.VerifyOffset(0);
  if (root == 0) return nullptr;
  const auto* table = reinterpret_cast<const Table*>(buffer.data() + root);
  return verify_root(verifier, *table) ? table : nullptr;
}

int CompareIndex(const uint8_t* stored, uint32_t stored_size, std::span<const uint32_t> index) {
  const size_t n = std::min<size_t>(stored_size, index.size());
  for (size_t i = 0; i < n; ++i) {
    const uint32_t a = flatbuffers::ReadScalar<uint32_t>(stored + size_t{4} * i);
    if (a != index[i]) return a < index[i] ? -1 : 1;
  }
  if (stored_size == index.size()) return 0;
  return stored_size < index.size() ? -1 : 1;
}

}  // namespace

std::string EncodeObjectId(std::span<const uint8_t> id) {
  static constexpr char kAlphabet[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
  std::string out;
  uint32_t buffer = 0;
  int bits = 0;
  for (uint8_t byte : id) {
    buffer = (buffer << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out.push_back(kAlphabet[(buffer >> (bits - 5)) & 31]);
      bits -= 5;
    }
  }
  if (bits > 0) out.push_back(kAlphabet[(buffer << (5 - bits)) & 31]);
  return out;
}

std::optional<std::vector<uint8_t>> DecodeObjectId(std::string_view text, size_t size) {
  if (text.size() != (size * 8 + 4) / 5) return std::nullopt;
  std::vector<uint8_t> out;
  uint32_t buffer = 0;
  int bits = 0;
  for (char c : text) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    if (c == 'O') c = '0';
    if (c == 'I' || c == 'L') c = '1';
    static constexpr std::string_view kAlphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    const size_t value = kAlphabet.find(c);
    if (value == std::string_view::npos) return std::nullopt;
    buffer = (buffer << 5) | static_cast<uint32_t>(value);
    bits += 5;
    if (bits >= 8) {
      out.push_back(static_cast<uint8_t>(buffer >> (bits - 8)));
      bits -= 8;
    }
  }
  // The padding bits must be zero, so that each id has one spelling.
  if (out.size() != size || (buffer & ((1u << bits) - 1)) != 0) return std::nullopt;
  return out;
}

Result<DecodedFile> DecodeFile(std::span<const std::byte> bytes, FileType expected,
                               std::string_view what) {
  const std::string context(what);
  if (bytes.size() < kHeaderSize) {
    return CorruptChunkError(context + ": " + std::to_string(bytes.size()) +
                             " bytes, shorter than an Icechunk file header (" +
                             std::to_string(kHeaderSize) + ")");
  }
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  if (std::memcmp(p, kMagic.data(), kMagic.size()) != 0) {
    return CorruptChunkError(context +
                             ": not an Icechunk file (its first bytes are not the magic "
                             "\"ICE🧊CHUNK\")");
  }
  DecodedFile file;
  file.implementation.assign(reinterpret_cast<const char*>(p + 12), 24);
  while (!file.implementation.empty() &&
         (file.implementation.back() == ' ' || file.implementation.back() == '\0')) {
    file.implementation.pop_back();
  }
  file.spec_version = p[36];
  const uint8_t type = p[37];
  const uint8_t compression = p[38];
  if (file.spec_version < kMinSpecVersion || file.spec_version > kMaxSpecVersion) {
    return UnsupportedError(
        context + ": Icechunk spec version " + std::to_string(file.spec_version) +
        " (written by '" + file.implementation + "'); this reader knows versions " +
        std::to_string(kMinSpecVersion) + " to " + std::to_string(kMaxSpecVersion));
  }
  if (type != static_cast<uint8_t>(expected)) {
    return CorruptChunkError(context + ": the header says file type " + std::to_string(type) +
                             ", expected " + std::to_string(static_cast<int>(expected)));
  }
  const uint8_t* body = p + kHeaderSize;
  const size_t body_size = bytes.size() - kHeaderSize;
  if (compression == 0) {
    file.flatbuffer.assign(body, body + body_size);
    return file;
  }
  if (compression != 1) {
    return UnsupportedError(context + ": compression algorithm " + std::to_string(compression) +
                            " (known: 0 none, 1 zstd)");
  }
  // Icechunk writes streamed frames, which need not carry their content size.
  std::unique_ptr<ZSTD_DStream, size_t (*)(ZSTD_DStream*)> stream(ZSTD_createDStream(),
                                                                  ZSTD_freeDStream);
  if (stream == nullptr) return OutOfMemoryError(context + ": cannot create a zstd stream");
  ZSTD_inBuffer in{body, body_size, 0};
  file.flatbuffer.resize(std::max<size_t>(body_size * 4, 4096));
  size_t produced = 0;
  size_t last = 1;
  while (true) {
    if (produced == file.flatbuffer.size()) {
      if (file.flatbuffer.size() >= kMaxFlatbufferBytes) {
        return CorruptChunkError(context + ": decompresses to more than " +
                                 std::to_string(kMaxFlatbufferBytes) + " bytes");
      }
      file.flatbuffer.resize(std::min(file.flatbuffer.size() * 2, kMaxFlatbufferBytes));
    }
    ZSTD_outBuffer out{file.flatbuffer.data(), file.flatbuffer.size(), produced};
    last = ZSTD_decompressStream(stream.get(), &out, &in);
    if (ZSTD_isError(last)) {
      return CorruptChunkError(context + ": zstd: " + ZSTD_getErrorName(last));
    }
    produced = out.pos;
    if (last == 0 && in.pos == in.size) break;
    if (in.pos == in.size && out.pos < out.size) {
      return CorruptChunkError(context + ": the zstd stream is truncated");
    }
  }
  file.flatbuffer.resize(produced);
  return file;
}

Result<Snapshot> ParseSnapshot(std::span<const uint8_t> flatbuffer, int spec_version,
                               std::string_view what) {
  const Table* root = VerifiedRoot(flatbuffer, VerifySnapshot);
  if (root == nullptr) {
    return CorruptChunkError(std::string(what) +
                             ": the snapshot flatbuffer does not verify (corrupt file)");
  }
  using namespace snapshot_field;
  Snapshot snapshot;
  snapshot.id = *GetId<kId12Size>(*root, kId);
  snapshot.parent_id = GetId<kId12Size>(*root, kParentId);
  snapshot.flushed_at_us = root->GetField<uint64_t>(Slot(kFlushedAt), 0);
  snapshot.message = GetString(*root, kMessage);
  const auto* nodes = root->GetPointer<const TableVector*>(Slot(kNodes));
  snapshot.nodes.reserve(nodes->size());
  for (uint32_t i = 0; i < nodes->size(); ++i) {
    const Table& t = *nodes->Get(i);
    Node node;
    node.id = *GetId<kId8Size>(t, node_field::kId);
    node.path = GetString(t, node_field::kPath);
    const std::span<const uint8_t> user_data = GetBytes(t, node_field::kUserData);
    node.user_data.assign(reinterpret_cast<const char*>(user_data.data()), user_data.size());
    node.is_array = t.GetField<uint8_t>(Slot(node_field::kNodeDataType), 0) == kNodeArray;
    if (node.is_array) {
      const Table& array = *t.GetPointer<const Table*>(Slot(node_field::kNodeData));
      const StructVector shape = GetStructVector(array, array_field::kShape);
      for (uint32_t d = 0; d < shape.size; ++d) {
        const uint8_t* s = shape.data + static_cast<size_t>(d) * kDimensionShapeSize;
        node.shape.push_back(
            {flatbuffers::ReadScalar<uint64_t>(s), flatbuffers::ReadScalar<uint64_t>(s + 8), 0});
      }
      if (const auto* v2 = array.GetPointer<const TableVector*>(Slot(array_field::kShapeV2))) {
        node.shape.clear();
        for (uint32_t d = 0; d < v2->size(); ++d) {
          const Table& s = *v2->Get(d);
          node.shape.push_back({s.GetField<uint64_t>(Slot(shape_v2_field::kArrayLength), 0), 0,
                                s.GetField<uint32_t>(Slot(shape_v2_field::kNumChunks), 0)});
        }
      }
      const auto* refs = array.GetPointer<const TableVector*>(Slot(array_field::kManifests));
      for (uint32_t m = 0; m < refs->size(); ++m) {
        const Table& r = *refs->Get(m);
        ManifestRef ref;
        ref.id = *GetId<kId12Size>(r, manifest_ref_field::kObjectId);
        const StructVector extents = GetStructVector(r, manifest_ref_field::kExtents);
        for (uint32_t d = 0; d < extents.size; ++d) {
          const uint8_t* e = extents.data + static_cast<size_t>(d) * kIndexRangeSize;
          ref.extents.emplace_back(flatbuffers::ReadScalar<uint32_t>(e),
                                   flatbuffers::ReadScalar<uint32_t>(e + 4));
        }
        node.manifests.push_back(std::move(ref));
      }
    }
    snapshot.nodes.push_back(std::move(node));
  }
  (void)spec_version;  // the tables of spec 2 extend those of spec 1
  return snapshot;
}

Result<std::shared_ptr<const Manifest>> Manifest::Parse(std::vector<uint8_t> flatbuffer,
                                                        int spec_version, std::string_view what) {
  const Table* root = VerifiedRoot(flatbuffer, VerifyManifest);
  if (root == nullptr) {
    return CorruptChunkError(std::string(what) +
                             ": the manifest flatbuffer does not verify (corrupt file)");
  }
  std::shared_ptr<Manifest> manifest(new Manifest());
  manifest->id_ = *GetId<kId12Size>(*root, manifest_field::kId);
  manifest->spec_version_ = spec_version;
  manifest->what_ = std::string(what);
  manifest->buffer_ = std::move(flatbuffer);  // the heap block does not move
  return std::shared_ptr<const Manifest>(std::move(manifest));
}

const void* Manifest::ArrayRefs(const ObjectId8& node) const {
  const auto* root = flatbuffers::GetRoot<Table>(buffer_.data());
  const auto* arrays = root->GetPointer<const TableVector*>(Slot(manifest_field::kArrays));
  // Sorted by node id (the spec); binary search.
  uint32_t lo = 0, hi = arrays->size();
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    const Table& a = *arrays->Get(mid);
    const uint8_t* id = a.GetStruct<const uint8_t*>(Slot(array_manifest_field::kNodeId));
    const int c = std::memcmp(id, node.data(), node.size());
    if (c == 0) return a.GetPointer<const TableVector*>(Slot(array_manifest_field::kRefs));
    if (c < 0) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return nullptr;
}

namespace {

Result<ChunkRef> ReadChunkRef(const Table& t, const Table& manifest_root, std::string_view what) {
  using namespace chunk_ref_field;
  ChunkRef ref;
  ref.offset = t.GetField<uint64_t>(Slot(kOffset), 0);
  ref.length = t.GetField<uint64_t>(Slot(kLength), 0);
  if (const auto* inline_data = t.GetPointer<const ByteVector*>(Slot(kInline))) {
    ref.kind = ChunkRef::Kind::kInline;
    ref.inline_data = {inline_data->Data(), inline_data->size()};
    return ref;
  }
  if (std::optional<ObjectId12> id = GetId<kId12Size>(t, kChunkId)) {
    ref.kind = ChunkRef::Kind::kNative;
    ref.chunk_id = *id;
    return ref;
  }
  ref.kind = ChunkRef::Kind::kVirtual;
  ref.checksum_etag = GetString(t, kChecksumEtag);
  ref.checksum_last_modified = t.GetField<uint32_t>(Slot(kChecksumLastModified), 0);
  if (t.GetPointer<const flatbuffers::String*>(Slot(kLocation)) != nullptr) {
    ref.location = GetString(t, kLocation);
    return ref;
  }
  const std::span<const uint8_t> compressed = GetBytes(t, kCompressedLocation);
  if (compressed.empty()) {
    return CorruptChunkError(std::string(what) +
                             ": a chunk reference is neither inline, native nor virtual");
  }
  // Spec 2: the location is zstd-compressed with the manifest's dictionary.
  const std::span<const uint8_t> dictionary =
      GetBytes(manifest_root, manifest_field::kLocationDictionary);
  const uint8_t algorithm =
      manifest_root.GetField<uint8_t>(Slot(manifest_field::kCompressionAlgorithm), 1);
  if (algorithm != 1) {
    return UnsupportedError(std::string(what) +
                            ": virtual chunk locations compressed with "
                            "algorithm " +
                            std::to_string(algorithm) + " (known: 1, zstd)");
  }
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> context(ZSTD_createDCtx(), ZSTD_freeDCtx);
  std::string location(size_t{64} * 1024, '\0');
  const size_t n =
      ZSTD_decompress_usingDict(context.get(), location.data(), location.size(), compressed.data(),
                                compressed.size(), dictionary.data(), dictionary.size());
  if (ZSTD_isError(n)) {
    return CorruptChunkError(
        std::string(what) +
        ": a compressed virtual chunk location does not decompress: " + ZSTD_getErrorName(n));
  }
  location.resize(n);
  ref.location = std::move(location);
  return ref;
}

}  // namespace

Result<std::optional<ChunkRef>> Manifest::Find(const ObjectId8& node,
                                               std::span<const uint32_t> index) const {
  const auto* refs = static_cast<const TableVector*>(ArrayRefs(node));
  if (refs == nullptr) return std::optional<ChunkRef>();
  uint32_t lo = 0, hi = refs->size();
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    const Table& r = *refs->Get(mid);
    const StructVector stored = GetStructVector(r, chunk_ref_field::kIndex);
    const int c = CompareIndex(stored.data, stored.size, index);
    if (c == 0) {
      ZS_ASSIGN_OR_RETURN(ChunkRef ref,
                          ReadChunkRef(r, *flatbuffers::GetRoot<Table>(buffer_.data()), what_));
      return std::optional<ChunkRef>(std::move(ref));
    }
    if (c < 0) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return std::optional<ChunkRef>();
}

Status Manifest::ForEach(
    const ObjectId8& node,
    const std::function<void(std::span<const uint32_t>, const ChunkRef&)>& fn) const {
  const auto* refs = static_cast<const TableVector*>(ArrayRefs(node));
  if (refs == nullptr) return Status::Ok();
  const Table& root = *flatbuffers::GetRoot<Table>(buffer_.data());
  std::vector<uint32_t> index;
  for (uint32_t i = 0; i < refs->size(); ++i) {
    const Table& r = *refs->Get(i);
    const StructVector stored = GetStructVector(r, chunk_ref_field::kIndex);
    index.resize(stored.size);
    for (uint32_t d = 0; d < stored.size; ++d) {
      index[d] = flatbuffers::ReadScalar<uint32_t>(stored.data + size_t{4} * d);
    }
    ZS_ASSIGN_OR_RETURN(ChunkRef ref, ReadChunkRef(r, root, what_));
    fn(index, ref);
  }
  return Status::Ok();
}

namespace {

namespace repo_field {
constexpr int kSpecVersion = 0, kTags = 1, kBranches = 2, kDeletedTags = 3, kSnapshots = 4,
              kConfig = 9;
}
namespace ref_field {
constexpr int kName = 0, kSnapshotIndex = 1;
}
namespace snapshot_info_field {
constexpr int kId = 0, kParentOffset = 1;
}

bool VerifyRef(Verifier& v, const Table& t) {
  return t.VerifyTableStart(v) && VerifyString(v, t, ref_field::kName, true) &&
         t.VerifyField<uint32_t>(v, Slot(ref_field::kSnapshotIndex), 4) && v.EndTable();
}

bool VerifySnapshotInfo(Verifier& v, const Table& t) {
  return t.VerifyTableStart(v) && VerifyId<kId12Size>(v, t, snapshot_info_field::kId, true) &&
         t.VerifyField<int32_t>(v, Slot(snapshot_info_field::kParentOffset), 4) && v.EndTable();
}

// The url_prefix of every virtual chunk container of a repository configuration serialised as a
// FlexBuffer: a map whose "virtual_chunk_containers" is null or a map of containers, each a map
// with a string "url_prefix". The buffer is verified first: it comes from the repository's file.
Result<std::vector<std::string>> VirtualPrefixesOfFlexConfig(std::span<const uint8_t> config,
                                                             std::string_view what) {
  const std::string where = std::string(what) + ": the repository configuration";
  if (config.empty() || !flexbuffers::VerifyBuffer(config.data(), config.size())) {
    return CorruptChunkError(where + " (a FlexBuffer) does not verify (corrupt file)");
  }
  const flexbuffers::Reference root = flexbuffers::GetRoot(config.data(), config.size());
  if (!root.IsMap()) return CorruptChunkError(where + " is not a map");
  const flexbuffers::Reference containers = root.AsMap()["virtual_chunk_containers"];
  std::vector<std::string> prefixes;
  if (containers.IsNull()) return prefixes;
  if (!containers.IsMap()) {
    return CorruptChunkError(where + ": virtual_chunk_containers is not a map");
  }
  const flexbuffers::Map map = containers.AsMap();
  const flexbuffers::TypedVector names = map.Keys();
  const flexbuffers::Vector values = map.Values();
  for (size_t i = 0; i < values.size(); ++i) {
    const flexbuffers::Reference container = values[i];
    const flexbuffers::Reference prefix =
        container.IsMap() ? container.AsMap()["url_prefix"] : flexbuffers::Reference();
    if (!prefix.IsString() || prefix.AsString().length() == 0) {
      return CorruptChunkError(where + ": virtual chunk container '" + names[i].AsKey() +
                               "' has no url_prefix");
    }
    prefixes.push_back(prefix.AsString().str());
  }
  return prefixes;
}

// Only the fields read below are verified, and only they are read.
bool VerifyRepo(Verifier& v, const Table& t) {
  using namespace repo_field;
  if (!(t.VerifyTableStart(v) && t.VerifyField<uint8_t>(v, Slot(kSpecVersion), 1) &&
        VerifyTables(v, t, kTags, true, VerifyRef) &&
        VerifyTables(v, t, kBranches, true, VerifyRef) &&
        t.VerifyOffsetRequired(v, Slot(kDeletedTags)) &&
        VerifyTables(v, t, kSnapshots, true, VerifySnapshotInfo) &&
        VerifyBytes(v, t, kConfig, false))) {
    return false;
  }
  const auto* deleted =
      t.GetPointer<const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>*>(
          Slot(kDeletedTags));
  return v.VerifyVector(deleted) && v.VerifyVectorOfStrings(deleted) && v.EndTable();
}

}  // namespace

Result<RepoInfo> ParseRepoInfo(std::span<const uint8_t> flatbuffer, int spec_version,
                               std::string_view what) {
  const Table* root = VerifiedRoot(flatbuffer, VerifyRepo);
  if (root == nullptr) {
    return CorruptChunkError(std::string(what) +
                             ": the repo info flatbuffer does not verify (corrupt file)");
  }
  using namespace repo_field;
  // The repository's spec version (its header gives the file's): a later one may change what
  // the files below mean.
  const int declared = root->GetField<uint8_t>(Slot(kSpecVersion), 0);
  if (declared > kMaxSpecVersion) {
    return UnsupportedError(std::string(what) + ": the repository is Icechunk spec version " +
                            std::to_string(declared) + "; this reader knows versions " +
                            std::to_string(kMinSpecVersion) + " to " +
                            std::to_string(kMaxSpecVersion));
  }
  (void)spec_version;
  RepoInfo info;
  const auto* snapshots = root->GetPointer<const TableVector*>(Slot(kSnapshots));
  std::vector<ObjectId12> ids;
  for (uint32_t i = 0; i < snapshots->size(); ++i) {
    ids.push_back(*GetId<kId12Size>(*snapshots->Get(i), snapshot_info_field::kId));
  }
  for (uint32_t i = 0; i < snapshots->size(); ++i) {
    // The schema's default is 0 (a field equal to it is not written); -1 marks the first snapshot.
    const int32_t parent =
        snapshots->Get(i)->GetField<int32_t>(Slot(snapshot_info_field::kParentOffset), 0);
    std::optional<ObjectId12> parent_id;
    if (parent >= 0 && static_cast<uint32_t>(parent) < ids.size()) parent_id = ids[parent];
    info.parents.emplace_back(ids[i], parent_id);
  }
  auto refs = [&](int field, std::vector<RepoInfo::NamedSnapshot>* out) -> Status {
    const auto* vec = root->GetPointer<const TableVector*>(Slot(field));
    for (uint32_t i = 0; i < vec->size(); ++i) {
      const Table& r = *vec->Get(i);
      const uint32_t index = r.GetField<uint32_t>(Slot(ref_field::kSnapshotIndex), 0);
      if (index >= ids.size()) {
        return CorruptChunkError(std::string(what) + ": ref '" + GetString(r, ref_field::kName) +
                                 "' points past the snapshot list");
      }
      out->push_back({GetString(r, ref_field::kName), ids[index]});
    }
    return Status::Ok();
  };
  ZS_RETURN_IF_ERROR(refs(kBranches, &info.branches));
  ZS_RETURN_IF_ERROR(refs(kTags, &info.tags));
  const auto* deleted =
      root->GetPointer<const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>*>(
          Slot(kDeletedTags));
  for (uint32_t i = 0; i < deleted->size(); ++i)
    info.deleted_tags.push_back(deleted->Get(i)->str());
  if (const auto* config = root->GetPointer<const ByteVector*>(Slot(kConfig))) {
    ZS_ASSIGN_OR_RETURN(info.virtual_prefixes,
                        VirtualPrefixesOfFlexConfig({config->Data(), config->size()}, what));
  }
  return info;
}

}  // namespace zarrstream::icechunk
