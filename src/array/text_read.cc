#include "array/text_read.h"

#include <algorithm>
#include <cstring>

#include "array/array_state.h"
#include "codec/codec_registry.h"
#include "metadata/metadata_parsing.h"
#include "util/format.h"

namespace zarrstream {
namespace {

using nlohmann::json;
using Kind = ExtendedType::Kind;

uint32_t LoadU32(const std::byte* p, bool big_endian) {
  uint8_t b[4];
  std::memcpy(b, p, 4);
  return big_endian
             ? (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3]
             : (uint32_t{b[3]} << 24) | (uint32_t{b[2]} << 16) | (uint32_t{b[1]} << 8) | b[0];
}

bool ValidUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t n = 0;
    uint32_t code = 0;
    if (c < 0x80) {
      n = 1;
      code = c;
    } else if ((c >> 5) == 0x6) {
      n = 2;
      code = c & 0x1F;
    } else if ((c >> 4) == 0xE) {
      n = 3;
      code = c & 0x0F;
    } else if ((c >> 3) == 0x1E) {
      n = 4;
      code = c & 0x07;
    } else {
      return false;
    }
    if (i + n > text.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      const auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      code = (code << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < kMin[n] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

bool AppendUtf8(uint32_t code, std::string* out) {
  if (code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
  if (code < 0x80) {
    out->push_back(static_cast<char>(code));
  } else if (code < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (code >> 6)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
  } else if (code < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (code >> 12)));
    out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (code >> 18)));
    out->push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
  }
  return true;
}

// Appends the leaves of `value` at `depth` levels of nesting (json2 writes an n-d chunk as
// numpy's nested tolist()).
Status FlattenJson(const json& value, size_t depth, std::vector<std::string>* out) {
  if (depth == 0) {
    out->push_back(value.dump());
    return Status::Ok();
  }
  if (!value.is_array())
    return CorruptChunkError("json2: items are not nested to the chunk's rank");
  for (const json& item : value) ZS_RETURN_IF_ERROR(FlattenJson(item, depth - 1, out));
  return Status::Ok();
}

}  // namespace

Result<std::shared_ptr<const TextChunkDecoder>> TextChunkDecoder::Make(
    const ArrayMetadata& metadata) {
  std::shared_ptr<TextChunkDecoder> decoder(new TextChunkDecoder());
  decoder->type_ = *metadata.extended_type;
  decoder->chunk_shape_ = metadata.chunk_shape;
  decoder->num_elements_ = 1;
  for (uint64_t n : metadata.chunk_shape) decoder->num_elements_ *= n;
  decoder->specs_ = metadata.codecs;
  if (metadata.codecs.empty()) return MetadataError("codec chain is empty");
  const CodecSpec& first = metadata.codecs.front();
  const bool fixed =
      decoder->type_.kind == Kind::kFixedUtf32 || decoder->type_.kind == Kind::kFixedBytes;
  std::string expected;
  switch (decoder->type_.kind) {
    case Kind::kString:
      expected = "vlen-utf8";
      break;
    case Kind::kBytes:
      expected = "vlen-bytes";
      break;
    case Kind::kJson:
      expected = "numcodecs.json2";
      break;
    default:
      expected = "bytes";
      break;
  }
  if (first.name != expected) {
    return UnsupportedError("codec '" + first.name + "' (position 0): a " + decoder->type_.Name() +
                            " array is read through '" + expected +
                            "' first (sharding and array->array codecs are not supported for "
                            "text)");
  }
  if (fixed) {
    auto endian = first.configuration.find("endian");
    decoder->big_endian_ = endian != first.configuration.end() && *endian == "big";
  }
  ChunkRepresentation bytes_representation;
  bytes_representation.data_type = DataType::kUInt8;
  bytes_representation.shape = {fixed ? decoder->num_elements_ * decoder->type_.length_bytes : 0};
  bytes_representation.fill_value = {std::byte{0}};
  for (size_t i = 1; i < metadata.codecs.size(); ++i) {
    const CodecSpec& spec = metadata.codecs[i];
    const std::string context = "codec '" + spec.name + "' (position " + std::to_string(i) + ")";
    const CodecRegistration* reg = FindCodec(spec.name);
    if (reg == nullptr) return UnsupportedError("unknown " + context);
    if (reg->kind != CodecKind::kBytesToBytes) {
      return UnsupportedError(context + ": only bytes->bytes codecs may follow a text codec");
    }
    ZS_ASSIGN_OR_RETURN_CTX(auto codec,
                            reg->bytes_to_bytes(spec.configuration, bytes_representation), context);
    decoder->bytes_to_bytes_.push_back(std::move(codec));
  }
  return std::shared_ptr<const TextChunkDecoder>(std::move(decoder));
}

json TextChunkDecoder::ToJson() const {
  json codecs = json::array();
  for (const CodecSpec& spec : specs_) {
    json entry = {{"name", spec.name}};
    if (!spec.configuration.empty()) entry["configuration"] = spec.configuration;
    codecs.push_back(std::move(entry));
  }
  return codecs;
}

Status TextChunkDecoder::Decode(std::span<const std::byte> encoded,
                                std::vector<std::string>* elements) const {
  const bool fixed = type_.kind == Kind::kFixedUtf32 || type_.kind == Kind::kFixedBytes;
  const uint64_t fixed_size = num_elements_ * type_.length_bytes;
  ByteBuffer buffers[2];
  std::span<const std::byte> current = encoded;
  for (size_t i = bytes_to_bytes_.size(); i > 0; --i) {
    ByteBuffer& out = buffers[i % 2];
    const DecodedSize size =
        fixed && i == 1 ? DecodedSize(fixed_size) : DecodedSize::AtMost(kMaxTextChunkBytes);
    ZS_RETURN_IF_ERROR(bytes_to_bytes_[i - 1]->Decode(current, size, &out));
    current = out.span();
  }
  elements->clear();
  elements->reserve(num_elements_);
  return Split(current, elements);
}

Status TextChunkDecoder::Split(std::span<const std::byte> bytes,
                               std::vector<std::string>* elements) const {
  const auto* text = reinterpret_cast<const char*>(bytes.data());
  switch (type_.kind) {
    case Kind::kString:
    case Kind::kBytes: {
      const char* codec = type_.kind == Kind::kString ? "vlen-utf8" : "vlen-bytes";
      if (bytes.size() < 4) return CorruptChunkError(std::string(codec) + ": no item count");
      const uint32_t count = LoadU32(bytes.data(), false);
      if (count != num_elements_) {
        return CorruptChunkError(std::string(codec) + ": " + std::to_string(count) +
                                 " items where the chunk has " + std::to_string(num_elements_));
      }
      size_t pos = 4;
      for (uint32_t i = 0; i < count; ++i) {
        if (bytes.size() - pos < 4) return CorruptChunkError(std::string(codec) + ": truncated");
        const uint32_t length = LoadU32(bytes.data() + pos, false);
        pos += 4;
        if (bytes.size() - pos < length) {
          return CorruptChunkError(std::string(codec) + ": item " + std::to_string(i) +
                                   " runs past the end");
        }
        elements->emplace_back(text + pos, length);
        pos += length;
        if (type_.kind == Kind::kString && !ValidUtf8(elements->back())) {
          return CorruptChunkError("vlen-utf8: item " + std::to_string(i) + " is not UTF-8");
        }
      }
      if (pos != bytes.size()) return CorruptChunkError(std::string(codec) + ": trailing bytes");
      return Status::Ok();
    }
    case Kind::kFixedUtf32:
    case Kind::kFixedBytes: {
      const uint64_t length = type_.length_bytes;
      if (bytes.size() != num_elements_ * length) {
        return CorruptChunkError("chunk has " + std::to_string(bytes.size()) + " bytes, expected " +
                                 std::to_string(num_elements_ * length));
      }
      for (uint64_t i = 0; i < num_elements_; ++i) {
        const std::byte* p = bytes.data() + i * length;
        std::string& element = elements->emplace_back();
        if (type_.kind == Kind::kFixedBytes) {
          uint64_t n = length;
          while (n > 0 && p[n - 1] == std::byte{0}) --n;
          element.assign(reinterpret_cast<const char*>(p), n);
          continue;
        }
        uint64_t n = length / 4;
        while (n > 0 && LoadU32(p + (n - 1) * 4, big_endian_) == 0) --n;
        for (uint64_t k = 0; k < n; ++k) {
          if (!AppendUtf8(LoadU32(p + k * 4, big_endian_), &element)) {
            return CorruptChunkError("element " + std::to_string(i) +
                                     " holds a value that is not a Unicode code point");
          }
        }
      }
      return Status::Ok();
    }
    case Kind::kJson: {
      Result<json> parsed = ParseJsonDocument(std::string_view(text, bytes.size()), "json2 chunk");
      if (!parsed.ok()) return CorruptChunkError(parsed.status().message());
      json items = std::move(parsed).value();
      if (!items.is_array() || items.size() < 2 || !items.back().is_array()) {
        return CorruptChunkError("json2: expected a list of items, a dtype and a shape");
      }
      const json& shape = items.back();
      if (shape.empty()) {
        // A 0-d chunk: json2 writes its one item alone.
        elements->push_back(items[0].dump());
      } else {
        items.erase(items.end() - 2, items.end());
        ZS_RETURN_IF_ERROR(FlattenJson(items, chunk_shape_.size(), elements));
      }
      if (elements->size() != num_elements_) {
        return CorruptChunkError("json2: " + std::to_string(elements->size()) +
                                 " items where the chunk has " + std::to_string(num_elements_));
      }
      return Status::Ok();
    }
    default:
      break;
  }
  return InternalError("not a text data type");
}

Result<std::vector<std::string>> Array::ReadText(std::span<const uint64_t> start,
                                                 std::span<const uint64_t> shape) const {
  const internal::ArrayState& state = *state_;
  const std::string what = "read of " + state.Describe();
  if (!state.text) {
    return InvalidArgumentError(what + ": it holds " +
                                (state.metadata.extended_type
                                     ? state.metadata.extended_type->Name()
                                     : std::string(DataTypeName(dtype()))) +
                                " values, not text (use Read)");
  }
  const std::vector<uint64_t>& array_shape = state.metadata.shape;
  const size_t rank = array_shape.size();
  if (start.size() != rank || shape.size() != rank) {
    return InvalidArgumentError(what + ": region has rank " + std::to_string(start.size()) +
                                ", the array " + std::to_string(rank));
  }
  uint64_t count = 1;
  for (size_t d = 0; d < rank; ++d) {
    if (start[d] > array_shape[d] || shape[d] > array_shape[d] - start[d]) {
      return InvalidArgumentError(what + ": region " + FormatIndex(start) + " + " +
                                  FormatIndex(shape) + " exceeds the array shape " +
                                  FormatIndex(array_shape));
    }
    count *= shape[d];
  }
  std::vector<std::string> out(count);
  if (count == 0) return out;
  const std::vector<uint64_t>& chunk = state.metadata.chunk_shape;
  // The grid indices of the chunks the region touches, walked as an odometer.
  std::vector<uint64_t> first(rank), last(rank), index(rank);
  for (size_t d = 0; d < rank; ++d) {
    first[d] = start[d] / chunk[d];
    last[d] = (start[d] + shape[d] - 1) / chunk[d];
  }
  index = first;
  std::vector<std::string> elements;
  while (true) {
    const std::string key = state.ChunkKey(index);
    std::string where = what;
    where += ", chunk '";
    where += key;
    where += "'";
    ZS_ASSIGN_OR_RETURN_CTX(std::optional<ByteBuffer> stored, state.store->ReadIfExists(key),
                            where);
    const bool missing = !stored.has_value();
    if (missing && state.options.missing_chunks_are_errors) {
      return NotFoundError(where + ": not stored");
    }
    if (!missing) ZS_RETURN_IF_ERROR_CTX(state.text->Decode(stored->span(), &elements), where);
    // Copy the part of the chunk inside the region, element by element in C order.
    std::vector<uint64_t> lo(rank), hi(rank), at(rank);
    for (size_t d = 0; d < rank; ++d) {
      lo[d] = std::max(start[d], index[d] * chunk[d]);
      hi[d] = std::min(start[d] + shape[d], (index[d] + 1) * chunk[d]);
    }
    at = lo;
    while (true) {
      uint64_t in_chunk = 0, in_out = 0;
      for (size_t d = 0; d < rank; ++d) {
        in_chunk = in_chunk * chunk[d] + (at[d] - index[d] * chunk[d]);
        in_out = in_out * shape[d] + (at[d] - start[d]);
      }
      out[in_out] = missing ? state.metadata.text_fill_value : elements[in_chunk];
      size_t d = rank;
      while (d > 0 && ++at[d - 1] == hi[d - 1]) {
        at[d - 1] = lo[d - 1];
        --d;
      }
      if (d == 0) break;
    }
    size_t d = rank;
    while (d > 0 && ++index[d - 1] > last[d - 1]) {
      index[d - 1] = first[d - 1];
      --d;
    }
    if (d == 0) break;
  }
  return out;
}

}  // namespace zarrstream
