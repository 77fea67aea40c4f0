// Reading arrays of text kinds (ExtendedType::is_text: strings, bytes, JSON objects, numpy "U"
// and "S"): their elements are not fixed-size numbers, so they bypass the numeric read path
// (chunk_reader.h) and its GPU counterpart. Coordinates and labels are small, so a read decodes
// its chunks one after another on the calling thread.
//
// A chunk's chain is [text codec, bytes→bytes codecs...]: the text codec is numcodecs' vlen-utf8
// or vlen-bytes (a little-endian uint32 item count, then a uint32 length and the bytes of each
// item), json2 (a JSON list of the items, then numpy's dtype string and the chunk shape), or
// "bytes" for the fixed-length kinds (length_bytes per element, NUL-padded; "U" as UTF-32 in the
// byte order the codec names).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "metadata/array_metadata.h"
#include "zarrstream/status.h"

namespace zarrstream {

// A vlen or JSON chunk decodes to at most this many bytes before its items are split: a bound for
// decompression bombs, as the numeric path's declared chunk size is.
inline constexpr uint64_t kMaxTextChunkBytes = uint64_t{1} << 30;

class TextChunkDecoder {
 public:
  // Prepares the decoder for the chunks of `metadata` (a text kind). Sharding, array→array codecs
  // and unknown codecs are kUnsupported errors naming the codec.
  static Result<std::shared_ptr<const TextChunkDecoder>> Make(const ArrayMetadata& metadata);

  // Decodes one stored chunk into its elements, C order, one string per element: UTF-8 text for
  // strings and "U" (trailing NULs dropped, as numpy does), the bytes for bytes and "S" (trailing
  // NULs dropped), JSON text for JSON objects. Bad input is kCorruptChunk; thread-safe.
  Status Decode(std::span<const std::byte> encoded, std::vector<std::string>* elements) const;

  // The zarr.json "codecs" list.
  nlohmann::json ToJson() const;

 private:
  TextChunkDecoder() = default;
  Status Split(std::span<const std::byte> bytes, std::vector<std::string>* elements) const;

  ExtendedType type_;
  std::vector<uint64_t> chunk_shape_;
  uint64_t num_elements_ = 0;
  bool big_endian_ = false;  // "U" stored big-endian
  std::vector<CodecSpec> specs_;
  std::vector<std::unique_ptr<BytesToBytesCodec>> bytes_to_bytes_;
};

}  // namespace zarrstream
