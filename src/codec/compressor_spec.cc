#include "codec/compressor_spec.h"

#include <charconv>
#include <string>

#include "codec/codec_configuration.h"
#include "codec/codec_registry.h"

namespace zarrstream {
namespace {

constexpr std::string_view kSpecForms =
    "none, zstd[:level], gzip[:level], lz4, blosc[:cname[:clevel[:shuffle|bitshuffle|noshuffle]]]";

std::vector<std::string_view> SplitFields(std::string_view spec) {
  std::vector<std::string_view> fields;
  size_t begin = 0;
  for (;;) {
    const size_t colon = spec.find(':', begin);
    fields.push_back(spec.substr(begin, colon == std::string_view::npos ? colon : colon - begin));
    if (colon == std::string_view::npos) return fields;
    begin = colon + 1;
  }
}

Status SpecError(std::string_view spec, std::string_view problem) {
  std::string message = "compressor '";
  message += spec;
  message += "': ";
  message += problem;
  return InvalidArgumentError(std::move(message));
}

Result<int64_t> ParseInteger(std::string_view spec, std::string_view field, std::string_view what) {
  int64_t value = 0;
  const char* end = field.data() + field.size();
  auto [ptr, ec] = std::from_chars(field.data(), end, value);
  if (field.empty() || ec != std::errc() || ptr != end) {
    std::string problem(what);
    problem += " must be an integer, got '";
    problem += field;
    problem += "'";
    return SpecError(spec, problem);
  }
  return value;
}

// Checks `codec` with its own factory (the same check opening the array will make), so that the
// error points at the spec the user typed.
Status CheckCodec(std::string_view spec, const CodecSpec& codec, DataType data_type) {
  const CodecRegistration* registration = FindCodec(codec.name);
  if (registration == nullptr || registration->kind != CodecKind::kBytesToBytes) {
    return InternalError("compressor spec maps to unregistered codec '" + codec.name + "'");
  }
  ChunkRepresentation representation;
  representation.data_type = data_type;
  representation.shape = {1};
  representation.fill_value.assign(DataTypeSize(data_type), std::byte{0});
  Result<std::unique_ptr<BytesToBytesCodec>> made =
      registration->bytes_to_bytes(codec.configuration, representation);
  if (!made.ok()) return SpecError(spec, made.status().message());
  return Status::Ok();
}

Result<CodecSpec> ParseOne(std::string_view spec, DataType data_type) {
  const std::vector<std::string_view> fields = SplitFields(spec);
  const std::string_view name = fields[0];
  auto too_many = [&](size_t allowed) -> Status {
    if (fields.size() <= allowed) return Status::Ok();
    std::string problem = "too many ':' fields for ";
    problem += name;
    problem += " (expected ";
    problem += kSpecForms;
    problem += ")";
    return SpecError(spec, problem);
  };
  CodecSpec codec;
  if (name == "zstd") {
    ZS_RETURN_IF_ERROR(too_many(2));
    int64_t level = 3;
    if (fields.size() > 1) {
      ZS_ASSIGN_OR_RETURN(level, ParseInteger(spec, fields[1], "zstd level"));
    }
    codec = {"zstd", {{"level", level}, {"checksum", false}}};
  } else if (name == "gzip") {
    ZS_RETURN_IF_ERROR(too_many(2));
    int64_t level = 5;
    if (fields.size() > 1) {
      ZS_ASSIGN_OR_RETURN(level, ParseInteger(spec, fields[1], "gzip level"));
    }
    codec = {"gzip", {{"level", level}}};
  } else if (name == "lz4") {
    ZS_RETURN_IF_ERROR(too_many(1));
    codec = {"numcodecs.lz4", {{"acceleration", 1}}};
  } else if (name == "blosc") {
    ZS_RETURN_IF_ERROR(too_many(4));
    const size_t typesize = DataTypeSize(data_type);
    std::string cname = fields.size() > 1 ? std::string(fields[1]) : "zstd";
    int64_t clevel = 5;
    if (fields.size() > 2) {
      ZS_ASSIGN_OR_RETURN(clevel, ParseInteger(spec, fields[2], "blosc clevel"));
    }
    // zarr-python's default: bit-shuffling only pays off when a byte holds a whole element.
    std::string shuffle = typesize == 1 ? "bitshuffle" : "shuffle";
    if (fields.size() > 3) shuffle = std::string(fields[3]);
    if (shuffle != "shuffle" && shuffle != "bitshuffle" && shuffle != "noshuffle") {
      return SpecError(
          spec, "blosc shuffle must be shuffle, bitshuffle or noshuffle, got '" + shuffle + "'");
    }
    codec = {"blosc",
             {{"typesize", typesize},
              {"cname", cname},
              {"clevel", clevel},
              {"shuffle", shuffle},
              {"blocksize", 0}}};
  } else {
    std::string problem = "unknown compressor '";
    problem += name;
    problem += "' (expected ";
    problem += kSpecForms;
    problem += ")";
    return SpecError(spec, problem);
  }
  ZS_RETURN_IF_ERROR(CheckCodec(spec, codec, data_type));
  return codec;
}

}  // namespace

Result<std::vector<CodecSpec>> ParseCompressorSpec(std::string_view spec, DataType data_type) {
  if (spec == "none") return std::vector<CodecSpec>();
  ZS_ASSIGN_OR_RETURN(CodecSpec codec, ParseOne(spec, data_type));
  return std::vector<CodecSpec>{std::move(codec)};
}

Result<std::vector<CodecSpec>> MakeCodecChainSpecs(
    std::string_view compressor, DataType data_type,
    std::optional<std::span<const uint64_t>> inner_chunk_shape) {
  ZS_ASSIGN_OR_RETURN(std::vector<CodecSpec> compressors,
                      ParseCompressorSpec(compressor, data_type));
  const CodecSpec little_endian_bytes{"bytes", {{"endian", "little"}}};
  // Byte order means nothing for 1-byte types; zarr-python leaves it out for them.
  std::vector<CodecSpec> chain = {DataTypeSize(data_type) == 1 ? CodecSpec{"bytes"}
                                                               : little_endian_bytes};
  chain.insert(chain.end(), compressors.begin(), compressors.end());
  if (!inner_chunk_shape) return chain;

  auto to_json = [](const std::vector<CodecSpec>& codecs) {
    nlohmann::json list = nlohmann::json::array();
    for (const CodecSpec& codec : codecs) {
      list.push_back(codec.configuration.empty() ? nlohmann::json{{"name", codec.name}}
                                                 : CodecJson(codec.name, codec.configuration));
    }
    return list;
  };
  const std::vector<CodecSpec> index_codecs = {little_endian_bytes, CodecSpec{"crc32c"}};
  nlohmann::json configuration = {
      {"chunk_shape", std::vector<uint64_t>(inner_chunk_shape->begin(), inner_chunk_shape->end())},
      {"codecs", to_json(chain)},
      {"index_codecs", to_json(index_codecs)},
      {"index_location", "end"},
  };
  return std::vector<CodecSpec>{{"sharding_indexed", std::move(configuration)}};
}

}  // namespace zarrstream
