#include "codec/codec_chain.h"

#include <cstring>

#include "codec/codec_registry.h"
#include "codec/sharding_codec.h"

namespace zarrstream {

namespace {

std::string_view KindName(CodecKind kind) {
  switch (kind) {
    case CodecKind::kArrayToArray:
      return "array->array";
    case CodecKind::kArrayToBytes:
      return "array->bytes";
    case CodecKind::kBytesToBytes:
      return "bytes->bytes";
  }
  return "?";
}

}  // namespace

Result<std::shared_ptr<const CodecChain>> CodecChain::Make(std::span<const CodecSpec> specs,
                                                           const ChunkRepresentation& decoded) {
  std::shared_ptr<CodecChain> chain(new CodecChain());
  chain->decoded_ = decoded;
  ChunkRepresentation current = decoded;
  for (size_t i = 0; i < specs.size(); ++i) {
    const CodecSpec& spec = specs[i];
    const std::string context = "codec '" + spec.name + "' (position " + std::to_string(i) + ")";
    const CodecRegistration* reg = FindCodec(spec.name);
    if (reg == nullptr) return UnsupportedError("unknown " + context);
    const bool have_array_to_bytes = chain->array_to_bytes_ != nullptr;
    if ((reg->kind == CodecKind::kArrayToArray && have_array_to_bytes) ||
        (reg->kind == CodecKind::kArrayToBytes && have_array_to_bytes) ||
        (reg->kind == CodecKind::kBytesToBytes && !have_array_to_bytes)) {
      return MetadataError(context + ": an " + std::string(KindName(reg->kind)) +
                           " codec cannot stand here; a chain is array->array codecs, exactly one "
                           "array->bytes codec, then bytes->bytes codecs");
    }
    switch (reg->kind) {
      case CodecKind::kArrayToArray: {
        ZS_ASSIGN_OR_RETURN_CTX(auto codec, reg->array_to_array(spec.configuration, current),
                                context);
        current = codec->encoded_representation();
        chain->array_to_array_.push_back(std::move(codec));
        break;
      }
      case CodecKind::kArrayToBytes: {
        ZS_ASSIGN_OR_RETURN_CTX(chain->array_to_bytes_,
                                reg->array_to_bytes(spec.configuration, current), context);
        break;
      }
      case CodecKind::kBytesToBytes: {
        ZS_ASSIGN_OR_RETURN_CTX(auto codec, reg->bytes_to_bytes(spec.configuration, current),
                                context);
        chain->bytes_to_bytes_.push_back(std::move(codec));
        break;
      }
    }
  }
  if (chain->array_to_bytes_ == nullptr) {
    return MetadataError("codec chain has no array->bytes codec (such as 'bytes')");
  }
  // Decompression bombs stop at what the chunk's declared shape and data type allow: where a
  // codec's decoded size is not fixed, its decoder gets the largest size the codecs before it can
  // have written (issue 9's rule, "bounded by the array's declared chunk size").
  std::optional<uint64_t> size = chain->array_to_bytes_->encoded_size();
  uint64_t max_size = chain->array_to_bytes_->max_encoded_size();
  for (const auto& codec : chain->bytes_to_bytes_) {
    chain->bytes_sizes_.push_back(size ? DecodedSize(*size) : DecodedSize::AtMost(max_size));
    size = size ? codec->EncodedSize(*size) : std::nullopt;
    max_size = size ? *size : codec->MaxEncodedSize(max_size);
  }
  chain->max_encoded_size_ = max_size;
  if (chain->array_to_array_.empty() && chain->bytes_to_bytes_.empty()) {
    chain->sharding_ = dynamic_cast<const ShardingCodec*>(chain->array_to_bytes_.get());
  }
  return std::shared_ptr<const CodecChain>(std::move(chain));
}

std::optional<uint64_t> CodecChain::encoded_size() const {
  std::optional<uint64_t> size = array_to_bytes_->encoded_size();
  for (const auto& codec : bytes_to_bytes_) {
    if (!size) return std::nullopt;
    size = codec->EncodedSize(*size);
  }
  return size;
}

Status CodecChain::Decode(std::span<const std::byte> encoded, std::span<std::byte> out,
                          CodecScratch* scratch) const {
  if (out.size() != decoded_.num_bytes()) {
    return InternalError("CodecChain::Decode: output of " + std::to_string(out.size()) +
                         " bytes for a chunk of " + std::to_string(decoded_.num_bytes()));
  }
  const bool direct_bytes = array_to_array_.empty() && array_to_bytes_->is_identity();
  // bytes→bytes, last first. Stages alternate between two scratch buffers.
  std::span<const std::byte> current = encoded;
  for (size_t i = bytes_to_bytes_.size(); i-- > 0;) {
    const BytesToBytesCodec& codec = *bytes_to_bytes_[i];
    if (i == 0 && direct_bytes) return codec.DecodeInto(current, out, scratch);
    ByteBuffer& next = scratch->buffers[i % 2];
    ZS_RETURN_IF_ERROR(codec.Decode(current, bytes_sizes_[i], &next));
    current = next.span();
  }
  if (array_to_array_.empty()) return array_to_bytes_->Decode(current, out, scratch);

  // array→bytes into scratch, then array→array codecs, last first; the final one writes `out`.
  auto representation_bytes = [&](size_t codec_index) {
    return array_to_array_[codec_index]->encoded_representation().num_bytes();
  };
  ByteBuffer* array_buffers[2] = {&scratch->buffers[2], &scratch->buffers[3]};
  size_t last = array_to_array_.size() - 1;
  array_buffers[0]->Resize(representation_bytes(last));
  ZS_RETURN_IF_ERROR(array_to_bytes_->Decode(current, array_buffers[0]->span(), scratch));
  std::span<const std::byte> array = array_buffers[0]->span();
  for (size_t i = array_to_array_.size(); i-- > 0;) {
    std::span<std::byte> target;
    if (i == 0) {
      target = out;
    } else {
      ByteBuffer* buffer = array_buffers[(array_to_array_.size() - i) % 2];
      buffer->Resize(representation_bytes(i - 1));
      target = buffer->span();
    }
    ZS_RETURN_IF_ERROR(array_to_array_[i]->Decode(array, target));
    array = target;
  }
  return Status::Ok();
}

Status CodecChain::Encode(std::span<const std::byte> decoded, ByteBuffer* out,
                          CodecScratch* scratch) const {
  if (decoded.size() != decoded_.num_bytes()) {
    return InternalError("CodecChain::Encode: input of " + std::to_string(decoded.size()) +
                         " bytes for a chunk of " + std::to_string(decoded_.num_bytes()));
  }
  // Array→array codecs alternate between two scratch buffers.
  std::span<const std::byte> array = decoded;
  ByteBuffer* array_buffers[2] = {&scratch->buffers[2], &scratch->buffers[3]};
  for (size_t i = 0; i < array_to_array_.size(); ++i) {
    ByteBuffer* target = array_buffers[i % 2];
    target->Resize(array_to_array_[i]->encoded_representation().num_bytes());
    ZS_RETURN_IF_ERROR(array_to_array_[i]->Encode(array, target->span()));
    array = target->span();
  }
  // The array→bytes codec and then each bytes→bytes codec write alternately into `out` and a
  // scratch buffer, starting where the last stage lands in `out` (no final copy). An identity
  // array→bytes codec before a compressor writes nothing: the compressor reads the values.
  const bool skip_identity = array_to_bytes_->is_identity() && !bytes_to_bytes_.empty();
  const size_t stages = (skip_identity ? 0 : 1) + bytes_to_bytes_.size();
  auto target_of = [&](size_t stage) {
    return (stages - 1 - stage) % 2 == 0 ? out : &scratch->buffers[0];
  };
  std::span<const std::byte> bytes = array;
  size_t stage = 0;
  if (!skip_identity) {
    ByteBuffer* first = target_of(stage++);
    ZS_RETURN_IF_ERROR(array_to_bytes_->Encode(array, first));
    bytes = first->span();
  }
  for (const auto& codec : bytes_to_bytes_) {
    ByteBuffer* next = target_of(stage++);
    ZS_RETURN_IF_ERROR(codec->Encode(bytes, next));
    bytes = next->span();
  }
  return Status::Ok();
}

Status CodecChain::Encode(std::span<const std::byte> decoded, ByteBuffer* out) const {
  CodecScratch scratch;
  return Encode(decoded, out, &scratch);
}

nlohmann::json CodecChain::ToJson() const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& codec : array_to_array_) list.push_back(codec->ToJson());
  list.push_back(array_to_bytes_->ToJson());
  for (const auto& codec : bytes_to_bytes_) list.push_back(codec->ToJson());
  return list;
}

}  // namespace zarrstream
