// Writing extended-type arrays as one v3 chunk (see extended_array_copy.h).
#include "tools/extended_array_copy.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "array/array_state.h"
#include "array/text_read.h"
#include "codec/codec_registry.h"
#include "metadata/extended_type.h"
#include "util/byte_buffer.h"
#include "util/checked_size.h"

namespace zarrstream::tools {
namespace {

using nlohmann::json;
using Kind = ExtendedType::Kind;

// UTF-8 `text` as UTF-32 code points, or an error quoting it when it is not valid UTF-8.
Result<std::u32string> Utf32(const std::string& text) {
  const auto invalid = [&] { return InvalidArgumentError("'" + text + "' is not valid UTF-8"); };
  std::u32string out;
  for (size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const int length = lead < 0x80         ? 1
                       : (lead >> 5) == 6  ? 2
                       : (lead >> 4) == 14 ? 3
                       : (lead >> 3) == 30 ? 4
                                           : 0;
    if (length == 0 || i + length > text.size()) return invalid();
    char32_t code = length == 1 ? lead : lead & (0x7F >> length);
    for (int k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next >> 6) != 2) return invalid();
      code = (code << 6) | (next & 0x3F);
    }
    out += code;
    i += length;
  }
  return out;
}

void AppendLittleEndian(uint64_t value, int bytes, std::string* out) {
  for (int b = 0; b < bytes; ++b) out->push_back(static_cast<char>((value >> (8 * b)) & 0xFF));
}

// numpy "U" values, `length` code points each (NUL-padded, UTF-32 little endian).
Result<std::string> EncodeFixedUtf32(const std::vector<std::string>& values, uint64_t length) {
  std::string out;
  for (const std::string& value : values) {
    ZS_ASSIGN_OR_RETURN(std::u32string codes, Utf32(value));
    if (codes.size() > length) {
      return InvalidArgumentError("'" + value + "' is longer than the " + std::to_string(length) +
                                  " characters of its type");
    }
    codes.resize(length, U'\0');
    for (char32_t code : codes) AppendLittleEndian(code, 4, &out);
  }
  return out;
}

// numpy "S" values, `length` bytes each (NUL-padded).
Result<std::string> EncodeFixedBytes(const std::vector<std::string>& values, uint64_t length) {
  std::string out;
  for (const std::string& value : values) {
    if (value.size() > length) {
      return InvalidArgumentError("a value of " + std::to_string(value.size()) +
                                  " bytes is longer than the " + std::to_string(length) +
                                  " bytes of its type");
    }
    out += value;
    out.append(length - value.size(), '\0');
  }
  return out;
}

// numcodecs' vlen-utf8 / vlen-bytes: a uint32 item count, then each item's uint32 length and
// bytes, little endian.
Result<std::string> EncodeVariableLength(const std::vector<std::string>& values) {
  constexpr uint64_t kMax = std::numeric_limits<uint32_t>::max();
  if (values.size() > kMax) return InvalidArgumentError("more than 2^32-1 values");
  std::string out;
  AppendLittleEndian(values.size(), 4, &out);
  for (const std::string& value : values) {
    if (value.size() > kMax) return InvalidArgumentError("a value longer than 2^32-1 bytes");
    AppendLittleEndian(value.size(), 4, &out);
    out += value;
  }
  return out;
}

// One array's zarr.json parts and its single chunk's bytes before compression.
struct SingleChunkArray {
  std::vector<uint64_t> shape;
  std::vector<std::string> dims;
  json data_type;
  json fill_value;
  json serializer;  // the array→bytes codec
  std::string bytes;
  json attributes = json::object();
};

// Writes `array` at `path` of `store`: zstd-compressed chunk first, then zarr.json, so a reader
// never finds metadata without its chunk.
Status WriteSingleChunkArray(Store& store, const std::string& path, const SingleChunkArray& array) {
  const json zstd_configuration = {{"level", 0}, {"checksum", false}};
  ChunkRepresentation representation;
  representation.data_type = DataType::kUInt8;
  representation.shape = {array.bytes.size()};
  ZS_ASSIGN_OR_RETURN(auto zstd,
                      FindCodec("zstd")->bytes_to_bytes(zstd_configuration, representation));
  ByteBuffer chunk;
  ZS_RETURN_IF_ERROR(zstd->Encode(std::as_bytes(std::span(array.bytes)), &chunk));
  std::vector<uint64_t> chunk_shape = array.shape;
  for (uint64_t& extent : chunk_shape) extent = std::max<uint64_t>(extent, 1);
  const std::string prefix = path.empty() ? "" : path + "/";
  std::string chunk_key = prefix + "c";
  for (size_t d = 0; d < chunk_shape.size(); ++d) chunk_key += "/0";
  const bool empty = std::find(array.shape.begin(), array.shape.end(), 0) != array.shape.end();
  json metadata = {
      {"zarr_format", 3},
      {"node_type", "array"},
      {"shape", array.shape},
      {"data_type", array.data_type},
      {"chunk_grid", {{"name", "regular"}, {"configuration", {{"chunk_shape", chunk_shape}}}}},
      {"chunk_key_encoding", {{"name", "default"}, {"configuration", {{"separator", "/"}}}}},
      {"fill_value", array.fill_value},
      {"codecs", {array.serializer, {{"name", "zstd"}, {"configuration", zstd_configuration}}}},
      {"attributes", array.attributes},
      {"storage_transformers", json::array()},
  };
  if (!array.dims.empty()) metadata["dimension_names"] = array.dims;
  if (!empty) ZS_RETURN_IF_ERROR(store.Put(chunk_key, chunk.span()));
  const std::string document = metadata.dump(2);
  return store.Put(prefix + "zarr.json", std::as_bytes(std::span(document)));
}

// An array copied whole is one chunk; like a text chunk read, at most kMaxTextChunkBytes.
Status CheckCopiedWhole(uint64_t bytes, const std::string& context) {
  if (bytes <= kMaxTextChunkBytes) return Status::Ok();
  return UnsupportedError(context + ": " + std::to_string(bytes) + " bytes, more than the " +
                          std::to_string(kMaxTextChunkBytes) +
                          " an array of this type may hold to be copied (whole, as one chunk)");
}

const json kLittleEndianBytes = {{"name", "bytes"}, {"configuration", {{"endian", "little"}}}};

}  // namespace

std::string WhyNotWritableInV3(const ExtendedType& type) {
  if (type.kind == Kind::kJson) return "Zarr v3 has no data type for JSON objects (v2's json2)";
  return "";
}

Status WriteExtendedArray(Store& store, const ExtendedArrayCopy& copy) {
  const Array& source = copy.array;
  const std::string context = "copying " + source.url() + " to '" + copy.path + "'";
  const ExtendedType& type = *source.extended_type();
  if (std::string why = WhyNotWritableInV3(type); !why.empty()) {
    return UnsupportedError(context + ": " + why);
  }
  const std::optional<uint64_t> count = CheckedProduct(copy.shape);
  if (!count) return InvalidArgumentError(context + ": the region's element count overflows");
  SingleChunkArray out;
  out.shape = copy.shape;
  out.dims = source.dims();
  out.data_type = ExtendedTypeToV3Json(type);
  out.fill_value = ExtendedFillValueToJson(source.state().metadata);
  out.attributes = json::parse(copy.attributes_json, nullptr, /*allow_exceptions=*/false);
  if (!out.attributes.is_object()) out.attributes = json::object();
  if (type.is_time()) {
    // Read as int64 like any number; the chunk is those values, little endian.
    ZS_RETURN_IF_ERROR(CheckCopiedWhole(*count * sizeof(int64_t), context));
    std::vector<int64_t> ticks(*count);
    ZS_RETURN_IF_ERROR(source.Read(copy.start, copy.shape, ticks.data()));
    for (int64_t tick : ticks) AppendLittleEndian(static_cast<uint64_t>(tick), 8, &out.bytes);
    out.serializer = kLittleEndianBytes;
    return WriteSingleChunkArray(store, copy.path, out).WithContext(context);
  }
  ZS_ASSIGN_OR_RETURN(std::vector<std::string> values, source.ReadText(copy.start, copy.shape));
  Result<std::string> encoded = std::string();
  switch (type.kind) {
    case Kind::kString:
      encoded = EncodeVariableLength(values);
      out.serializer = {{"name", "vlen-utf8"}, {"configuration", json::object()}};
      break;
    case Kind::kBytes:
      encoded = EncodeVariableLength(values);
      out.serializer = {{"name", "vlen-bytes"}, {"configuration", json::object()}};
      break;
    case Kind::kFixedUtf32:
      encoded = EncodeFixedUtf32(values, type.length_bytes / 4);
      out.serializer = kLittleEndianBytes;
      break;
    case Kind::kFixedBytes:
      encoded = EncodeFixedBytes(values, type.length_bytes);
      out.serializer = {{"name", "bytes"}};
      break;
    default:
      return InternalError(context + ": unexpected type " + type.Name());
  }
  if (!encoded.ok()) return encoded.status().WithContext(context);
  ZS_RETURN_IF_ERROR(CheckCopiedWhole(encoded->size(), context));
  out.bytes = std::move(*encoded);
  return WriteSingleChunkArray(store, copy.path, out).WithContext(context);
}

Status WriteLabelArray(Store& store, const std::string& name,
                       const std::vector<std::string>& labels) {
  const std::string context = "writing the '" + name + "' label coordinate";
  uint64_t length = 1;
  for (const std::string& label : labels) {
    ZS_ASSIGN_OR_RETURN_CTX(std::u32string codes, Utf32(label), context);
    length = std::max<uint64_t>(length, codes.size());
  }
  SingleChunkArray out;
  out.shape = {labels.size()};
  out.dims = {name};
  out.data_type = ExtendedTypeToV3Json(ExtendedType{Kind::kFixedUtf32, "", 1, length * 4});
  out.fill_value = "";
  out.serializer = kLittleEndianBytes;
  ZS_ASSIGN_OR_RETURN_CTX(out.bytes, EncodeFixedUtf32(labels, length), context);
  return WriteSingleChunkArray(store, name, out).WithContext(context);
}

}  // namespace zarrstream::tools
