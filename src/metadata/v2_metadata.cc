// Zarr v2 metadata, normalised into the v3 model once here so that every layer above has one path
// (the rules are listed in v2_metadata.h).
//
// v2 has no extension mechanism and writers add keys freely (zarr-python 3 puts
// "consolidated_metadata" into .zgroup), so unknown top-level keys are ignored, as zarr-python
// does. Inside filters they are errors: an option this parser does not know could change decoding.
#include "metadata/v2_metadata.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "metadata/extended_type.h"
#include "metadata/metadata_parsing.h"
#include "metadata/v3_metadata.h"

namespace zarrstream {
namespace {

using nlohmann::json;

// The type of the values at one point of a v2 filter chain, with the byte order they are stored in.
struct V2Type {
  DataType type;
  bool big_endian;
};

// numpy's spelling of a v2 type: "<f4", ">i8", "|u1".
std::string V2TypeString(V2Type t) {
  std::string s = NumpyTypeString(t.type);
  if (DataTypeSize(t.type) > 1) s[0] = t.big_endian ? '>' : '<';
  return s;
}

Result<V2Type> ParseDtypeString(std::string_view dtype, const std::string& field) {
  const std::string quoted = DescribeJson(json(std::string(dtype)));
  auto malformed = [&](std::string_view why) {
    return FieldError(ErrorCode::kMetadata, field,
                      "invalid dtype " + quoted + ": " + std::string(why));
  };
  auto unsupported = [&](std::string_view what) {
    return FieldError(ErrorCode::kUnsupported, field,
                      "unsupported dtype " + quoted + " (" + std::string(what) + ")");
  };
  if (dtype.size() < 2) return malformed("expected a numpy type string such as \"<f4\"");
  const char order = dtype[0];
  const char kind = dtype[1];
  if (order != '<' && order != '>' && order != '|') {
    return malformed("expected a byte order '<', '>' or '|' first");
  }
  switch (kind) {
    case 'O':
      return unsupported("object");
    case 'U':
    case 'S':
    case 'a':
      return unsupported("string");
    case 'V':
      return unsupported("void/structured");
    case 'M':
    case 'm':
      return unsupported("datetime/timedelta");
    case 'b':
    case 'i':
    case 'u':
    case 'f':
    case 'c':
      break;
    default:
      return malformed("unknown type kind");
  }
  const std::string_view size_text = dtype.substr(2);
  if (size_text.empty() || size_text.size() > 2 ||
      !std::all_of(size_text.begin(), size_text.end(),
                   [](char c) { return c >= '0' && c <= '9'; })) {
    return malformed("expected the item size in bytes after the kind");
  }
  const int size = std::stoi(std::string(size_text));
  std::optional<DataType> type;
  switch (kind) {
    case 'b':
      if (size == 1) type = DataType::kBool;
      break;
    case 'i':
      if (size == 1) type = DataType::kInt8;
      if (size == 2) type = DataType::kInt16;
      if (size == 4) type = DataType::kInt32;
      if (size == 8) type = DataType::kInt64;
      break;
    case 'u':
      if (size == 1) type = DataType::kUInt8;
      if (size == 2) type = DataType::kUInt16;
      if (size == 4) type = DataType::kUInt32;
      if (size == 8) type = DataType::kUInt64;
      break;
    case 'f':
      if (size == 2) type = DataType::kFloat16;
      if (size == 4) type = DataType::kFloat32;
      if (size == 8) type = DataType::kFloat64;
      break;
    default:  // 'c'
      if (size == 8) type = DataType::kComplex64;
      if (size == 16) type = DataType::kComplex128;
      break;
  }
  if (!type) return unsupported("no such core data type");
  if (size > 1 && order == '|') return malformed("byte order '|' is only for 1-byte types");
  return V2Type{*type, order == '>' && size > 1};
}

Result<V2Type> ParseDtypeField(const json& value, const std::string& field) {
  if (value.is_array()) {
    return FieldError(ErrorCode::kUnsupported, field, "structured dtypes are not supported");
  }
  if (!value.is_string()) {
    return FieldError(ErrorCode::kMetadata, field,
                      "expected a numpy type string, got " + DescribeJson(value));
  }
  return ParseDtypeString(value.get_ref<const std::string&>(), field);
}

// An integer option of a compressor, `fallback` when absent or null (numcodecs' defaults).
Result<int64_t> IntegerOption(const json& object, std::string_view key, int64_t fallback,
                              const std::string& prefix) {
  auto it = object.find(std::string(key));
  if (it == object.end() || it->is_null()) return fallback;
  const std::string field = prefix + "." + std::string(key);
  if (!it->is_number_integer()) {
    return FieldError(ErrorCode::kMetadata, field, "expected an integer, got " + DescribeJson(*it));
  }
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return FieldError(ErrorCode::kMetadata, field, "value " + DescribeJson(*it) + " is too large");
  }
  return it->get<int64_t>();
}

Status CheckFilterKeys(const json& filter, std::initializer_list<std::string_view> known,
                       const std::string& field) {
  for (const auto& [key, value] : filter.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      return FieldError(ErrorCode::kUnsupported, field, "unknown option '" + key + "'");
    }
  }
  return Status::Ok();
}

// The names a type-changing filter gives its decoded and encoded types.
struct TypeKeys {
  std::string_view dtype = "dtype";    // required
  std::string_view astype = "astype";  // optional, defaulting to dtype
};

// delta, fixedscaleoffset and quantize ("dtype", "astype"), astype ("decode_dtype",
// "encode_dtype"): the dtype is what they read (it must be what reaches them) and the astype what
// they write. Updates `current` to the astype.
Result<json> ParseTypeChangingFilter(const json& filter, const std::string& field, V2Type* current,
                                     json configuration, TypeKeys keys = {}) {
  const std::string dtype_key(keys.dtype), astype_key(keys.astype);
  ZS_ASSIGN_OR_RETURN(const json* dtype_json,
                      RequiredField(filter, dtype_key, field + "." + dtype_key));
  ZS_ASSIGN_OR_RETURN(V2Type dtype, ParseDtypeField(*dtype_json, field + "." + dtype_key));
  // numcodecs reinterprets the incoming bytes as dtype; a different type (or byte order) would
  // mean arithmetic on reinterpreted values, which the typed v3 chain cannot express.
  if (dtype.type != current->type || dtype.big_endian != current->big_endian) {
    return FieldError(ErrorCode::kUnsupported, field + "." + dtype_key,
                      dtype_key + " " + DescribeJson(*dtype_json) + " differs from the " +
                          V2TypeString(*current) + " values reaching the filter");
  }
  const json* astype_json = dtype_json;
  auto astype_it = filter.find(astype_key);
  if (astype_it != filter.end() && !astype_it->is_null()) astype_json = &*astype_it;
  ZS_ASSIGN_OR_RETURN(V2Type astype, ParseDtypeField(*astype_json, field + "." + astype_key));
  configuration[dtype_key] = *dtype_json;
  configuration[astype_key] = *astype_json;
  *current = astype;
  return configuration;
}

// A compressor (in "compressor", or in "filters" where v2 allows any codec) as its v3 codec; errors
// name `field`.
Result<CodecSpec> ParseCompressor(const json& compressor, V2Type current, const std::string& field);

struct V2CodecChain {
  std::vector<CodecSpec> array_to_array;
  std::vector<CodecSpec> after_bytes;  // filters that work on bytes (shuffle)
};

Status AddFilter(const json& filter, const std::string& field, V2Type* current,
                 V2CodecChain* chain) {
  if (!filter.is_object()) {
    return FieldError(ErrorCode::kMetadata, field,
                      "expected a codec configuration object, got " + DescribeJson(filter));
  }
  ZS_ASSIGN_OR_RETURN(const json* id, RequiredField(filter, "id", field + ".id"));
  if (!id->is_string()) {
    return FieldError(ErrorCode::kMetadata, field + ".id",
                      "expected a string, got " + DescribeJson(*id));
  }
  if (*id == "delta" || *id == "fixedscaleoffset" || *id == "quantize" || *id == "bitround" ||
      *id == "astype") {
    // Array filters must come before the bytes codec in a v3 chain, so one after a byte filter
    // has no v3 equivalent.
    if (!chain->after_bytes.empty()) {
      return FieldError(
          ErrorCode::kUnsupported, field + ".id",
          "filter " + DescribeJson(*id) + " after a filter on bytes (\"shuffle\" or a compressor)");
    }
    json configuration = json::object();
    const std::string name = "numcodecs." + id->get<std::string>();
    if (*id == "bitround") {
      // Keeps the type; the codec checks keepbits against it.
      ZS_RETURN_IF_ERROR(CheckFilterKeys(filter, {"id", "keepbits"}, field));
      ZS_ASSIGN_OR_RETURN(const json* keepbits,
                          RequiredField(filter, "keepbits", field + ".keepbits"));
      chain->array_to_array.push_back({name, {{"keepbits", *keepbits}}});
      return Status::Ok();
    }
    if (*id == "astype") {
      ZS_RETURN_IF_ERROR(CheckFilterKeys(filter, {"id", "encode_dtype", "decode_dtype"}, field));
      ZS_ASSIGN_OR_RETURN(configuration, ParseTypeChangingFilter(
                                             filter, field, current, std::move(configuration),
                                             {.dtype = "decode_dtype", .astype = "encode_dtype"}));
      chain->array_to_array.push_back({name, std::move(configuration)});
      return Status::Ok();
    }
    if (*id == "delta") {
      ZS_RETURN_IF_ERROR(CheckFilterKeys(filter, {"id", "dtype", "astype"}, field));
    } else if (*id == "quantize") {
      ZS_RETURN_IF_ERROR(CheckFilterKeys(filter, {"id", "digits", "dtype", "astype"}, field));
      ZS_ASSIGN_OR_RETURN(const json* digits, RequiredField(filter, "digits", field + ".digits"));
      configuration["digits"] = *digits;
    } else {
      ZS_RETURN_IF_ERROR(
          CheckFilterKeys(filter, {"id", "dtype", "astype", "scale", "offset"}, field));
      for (std::string_view key : {"scale", "offset"}) {
        const std::string key_field = field + "." + std::string(key);
        ZS_ASSIGN_OR_RETURN(const json* number, RequiredField(filter, key, key_field));
        if (!number->is_number()) {
          return FieldError(ErrorCode::kMetadata, key_field,
                            "expected a number, got " + DescribeJson(*number));
        }
        configuration[std::string(key)] = *number;
      }
    }
    ZS_ASSIGN_OR_RETURN(configuration,
                        ParseTypeChangingFilter(filter, field, current, std::move(configuration)));
    chain->array_to_array.push_back({name, std::move(configuration)});
    return Status::Ok();
  }
  if (*id == "shuffle") {
    ZS_RETURN_IF_ERROR(CheckFilterKeys(filter, {"id", "elementsize"}, field));
    ZS_ASSIGN_OR_RETURN(int64_t element_size,
                        IntegerOption(filter, "elementsize",
                                      static_cast<int64_t>(DataTypeSize(current->type)), field));
    if (element_size <= 0) {
      return FieldError(ErrorCode::kMetadata, field + ".elementsize",
                        "must be positive, got " + std::to_string(element_size));
    }
    chain->after_bytes.push_back({"numcodecs.shuffle", {{"elementsize", element_size}}});
    return Status::Ok();
  }
  // v2 takes any codec as a filter: kerchunk writes an HDF5 dataset's deflate as a "zlib" filter
  // after "shuffle", with a null compressor. Such a compressor works on bytes, as shuffle does.
  if (*id == "zlib" || *id == "gzip" || *id == "bz2" || *id == "zstd" || *id == "lz4" ||
      *id == "blosc") {
    ZS_ASSIGN_OR_RETURN(CodecSpec codec, ParseCompressor(filter, *current, field));
    chain->after_bytes.push_back(std::move(codec));
    return Status::Ok();
  }
  return FieldError(ErrorCode::kUnsupported, field + ".id",
                    "unsupported filter " + DescribeJson(*id));
}

// Compressors: options a decoder does not need are ignored (the compressed frame describes
// itself), so numcodecs versions adding encoder options do not break reading.
Result<CodecSpec> ParseCompressor(const json& compressor, V2Type current,
                                  const std::string& field) {
  if (!compressor.is_object()) {
    return FieldError(
        ErrorCode::kMetadata, field,
        "expected null or a codec configuration object, got " + DescribeJson(compressor));
  }
  ZS_ASSIGN_OR_RETURN(const json* id_json, RequiredField(compressor, "id", field + ".id"));
  if (!id_json->is_string()) {
    return FieldError(ErrorCode::kMetadata, field + ".id",
                      "expected a string, got " + DescribeJson(*id_json));
  }
  const std::string& id = id_json->get_ref<const std::string&>();
  if (id == "zstd") {
    ZS_ASSIGN_OR_RETURN(int64_t level, IntegerOption(compressor, "level", 0, field));
    bool checksum = false;
    auto it = compressor.find("checksum");
    if (it != compressor.end() && !it->is_null()) {
      if (!it->is_boolean()) {
        return FieldError(ErrorCode::kMetadata, field + ".checksum",
                          "expected true or false, got " + DescribeJson(*it));
      }
      checksum = it->get<bool>();
    }
    return CodecSpec{"zstd", {{"level", level}, {"checksum", checksum}}};
  }
  if (id == "blosc") {
    std::string cname = "lz4";
    auto it = compressor.find("cname");
    if (it != compressor.end() && !it->is_null()) {
      if (!it->is_string()) {
        return FieldError(ErrorCode::kMetadata, field + ".cname",
                          "expected a string, got " + DescribeJson(*it));
      }
      cname = it->get<std::string>();
    }
    ZS_ASSIGN_OR_RETURN(int64_t clevel, IntegerOption(compressor, "clevel", 5, field));
    ZS_ASSIGN_OR_RETURN(int64_t shuffle, IntegerOption(compressor, "shuffle", 1, field));
    ZS_ASSIGN_OR_RETURN(int64_t blocksize, IntegerOption(compressor, "blocksize", 0, field));
    if (blocksize < 0) {
      return FieldError(ErrorCode::kMetadata, field + ".blocksize",
                        "must not be negative, got " + std::to_string(blocksize));
    }
    // typesize is what blosc shuffles by: the item size of the values reaching the compressor.
    const size_t typesize = DataTypeSize(current.type);
    std::string shuffle_name;
    switch (shuffle) {
      case 0:
        shuffle_name = "noshuffle";
        break;
      case 1:
        shuffle_name = "shuffle";
        break;
      case 2:
        shuffle_name = "bitshuffle";
        break;
      // numcodecs' AUTOSHUFFLE: byte shuffling does nothing to 1-byte items, so it bit-shuffles.
      case -1:
        shuffle_name = typesize == 1 ? "bitshuffle" : "shuffle";
        break;
      default:
        return FieldError(ErrorCode::kMetadata, field + ".shuffle",
                          "expected -1, 0, 1 or 2, got " + std::to_string(shuffle));
    }
    return CodecSpec{"blosc",
                     {{"cname", cname},
                      {"clevel", clevel},
                      {"shuffle", shuffle_name},
                      {"blocksize", blocksize},
                      {"typesize", typesize}}};
  }
  if (id == "gzip" || id == "zlib" || id == "bz2") {
    ZS_ASSIGN_OR_RETURN(int64_t level, IntegerOption(compressor, "level", 1, field));
    return CodecSpec{id == "gzip" ? "gzip" : "numcodecs." + id, {{"level", level}}};
  }
  if (id == "lz4") {
    ZS_ASSIGN_OR_RETURN(int64_t acceleration, IntegerOption(compressor, "acceleration", 1, field));
    return CodecSpec{"numcodecs.lz4", {{"acceleration", acceleration}}};
  }
  return FieldError(ErrorCode::kUnsupported, field + ".id",
                    "unsupported compressor " + DescribeJson(*id_json));
}

Result<std::vector<CodecSpec>> BuildCodecChain(const json& filters, const json& compressor,
                                               V2Type array_type, bool fortran_order, size_t rank) {
  std::vector<CodecSpec> codecs;
  if (fortran_order) {
    json order = json::array();
    for (size_t d = rank; d > 0; --d) order.push_back(d - 1);
    codecs.push_back({"transpose", {{"order", std::move(order)}}});
  }
  V2Type current = array_type;
  V2CodecChain chain;
  if (!filters.is_null()) {
    if (!filters.is_array()) {
      return FieldError(ErrorCode::kMetadata, "filters",
                        "expected null or an array, got " + DescribeJson(filters));
    }
    for (size_t i = 0; i < filters.size(); ++i) {
      ZS_RETURN_IF_ERROR(
          AddFilter(filters[i], "filters[" + std::to_string(i) + "]", &current, &chain));
    }
  }
  for (CodecSpec& codec : chain.array_to_array) codecs.push_back(std::move(codec));
  json bytes_configuration = json::object();
  if (DataTypeSize(current.type) > 1) {
    bytes_configuration["endian"] = current.big_endian ? "big" : "little";
  }
  codecs.push_back({"bytes", std::move(bytes_configuration)});
  for (CodecSpec& codec : chain.after_bytes) codecs.push_back(std::move(codec));
  if (!compressor.is_null()) {
    ZS_ASSIGN_OR_RETURN(CodecSpec codec, ParseCompressor(compressor, current, "compressor"));
    codecs.push_back(std::move(codec));
  }
  return codecs;
}

// The id of the first filter, which for an "|O" array is its object codec ("vlen-utf8"); empty
// when there is none.
std::string ObjectCodecId(const json& filters) {
  if (!filters.is_array() || filters.empty() || !filters[0].is_object()) return "";
  auto id = filters[0].find("id");
  return id != filters[0].end() && id->is_string() ? id->get<std::string>() : "";
}

// The stored values of an extended type, for the filters and compressor that see them: time
// kinds are int64, "<U" UTF-32 code units, the rest bytes.
V2Type StorageType(const ExtendedType& type, char order) {
  if (type.is_time()) return {DataType::kInt64, order == '>'};
  if (type.kind == ExtendedType::Kind::kFixedUtf32) return {DataType::kUInt32, order == '>'};
  return {DataType::kUInt8, false};
}

// The chain of an "|O" array: its object codec (the first filter) serialises the chunk, as an
// array→bytes codec does in v3 ("vlen-utf8", "vlen-bytes", "numcodecs.json2").
Result<std::vector<CodecSpec>> BuildObjectCodecChain(const json& filters, const json& compressor,
                                                     const ExtendedType& type, bool fortran_order,
                                                     size_t rank) {
  if (fortran_order && rank > 1) {
    return FieldError(ErrorCode::kUnsupported, "order",
                      "Fortran order is not supported for object arrays");
  }
  if (filters.size() > 1) {
    return FieldError(ErrorCode::kUnsupported, "filters[1]",
                      "filters after an object codec are not supported");
  }
  std::vector<CodecSpec> codecs;
  if (type.kind == ExtendedType::Kind::kJson) {
    codecs.push_back({"numcodecs.json2", json::object()});
  } else {
    codecs.push_back(
        {type.kind == ExtendedType::Kind::kString ? "vlen-utf8" : "vlen-bytes", json::object()});
  }
  if (!compressor.is_null()) {
    ZS_ASSIGN_OR_RETURN(CodecSpec codec,
                        ParseCompressor(compressor, V2Type{DataType::kUInt8, false}, "compressor"));
    codecs.push_back(std::move(codec));
  }
  return codecs;
}

Result<std::vector<std::byte>> ParseV2FillValue(const json& value, DataType type) {
  // Some v2 writers store an integer array's fill value as a float ("fill_value": 0.0); take it
  // when it is a whole number. Every other form is one the v3 spec also allows.
  if ((IsSignedInteger(type) || IsUnsignedInteger(type)) && value.is_number_float()) {
    const double d = value.get<double>();
    if (std::isfinite(d) && std::trunc(d) == d) {
      if (d >= 0 && d < 0x1p64) return ParseV3FillValue(json(static_cast<uint64_t>(d)), type);
      if (d < 0 && d >= -0x1p63) return ParseV3FillValue(json(static_cast<int64_t>(d)), type);
    }
  }
  return ParseV3FillValue(value, type);
}

Result<json> ParseZattrs(const json* zattrs) {
  if (zattrs == nullptr) return json::object();
  if (!zattrs->is_object()) {
    return MetadataError(".zattrs: expected a JSON object, got " + DescribeJson(*zattrs));
  }
  return *zattrs;
}

Result<ArrayMetadata> ParseV2Array(const json& zarray, const json* zattrs) {
  if (!zarray.is_object()) {
    return MetadataError(".zarray: expected a JSON object, got " + DescribeJson(zarray));
  }
  ArrayMetadata metadata;
  metadata.zarr_format = 2;
  ZS_RETURN_IF_ERROR(CheckFormatVersion(zarray, "zarr_format", 2));

  ZS_ASSIGN_OR_RETURN(const json* shape, RequiredField(zarray, "shape", "shape"));
  ZS_ASSIGN_OR_RETURN(metadata.shape, ParseExtents(*shape, "shape", /*allow_zero=*/true));
  ZS_ASSIGN_OR_RETURN(const json* chunks, RequiredField(zarray, "chunks", "chunks"));
  ZS_ASSIGN_OR_RETURN(metadata.chunk_shape, ParseExtents(*chunks, "chunks", /*allow_zero=*/false));

  ZS_ASSIGN_OR_RETURN(const json* dtype_json, RequiredField(zarray, "dtype", "dtype"));
  ZS_ASSIGN_OR_RETURN(const json* filters, RequiredField(zarray, "filters", "filters"));
  ZS_ASSIGN_OR_RETURN(const json* compressor, RequiredField(zarray, "compressor", "compressor"));
  if (dtype_json->is_string()) {
    ZS_ASSIGN_OR_RETURN(
        metadata.extended_type,
        ParseV2ExtendedType(dtype_json->get_ref<const std::string&>(), ObjectCodecId(*filters)));
  }
  V2Type dtype{};
  if (metadata.extended_type) {
    dtype = StorageType(*metadata.extended_type, dtype_json->get_ref<const std::string&>()[0]);
    metadata.data_type = metadata.extended_type->is_time() ? DataType::kInt64 : DataType::kUInt8;
  } else {
    ZS_ASSIGN_OR_RETURN(dtype, ParseDtypeField(*dtype_json, "dtype"));
    metadata.data_type = dtype.type;
  }
  ZS_RETURN_IF_ERROR(
      ValidateRegularGrid(metadata.shape, metadata.chunk_shape, dtype.type, "shape", "chunks"));

  ZS_ASSIGN_OR_RETURN(const json* fill_value, RequiredField(zarray, "fill_value", "fill_value"));
  if (metadata.extended_type) {
    ZS_RETURN_IF_ERROR(ParseExtendedFillValue(*fill_value, &metadata));
  } else if (fill_value->is_null()) {
    // No fill value: zarr reads missing chunks as uninitialised memory; zeros are the honest
    // deterministic choice, and the flag lets callers tell.
    metadata.fill_value_is_null = true;
    metadata.fill_value.assign(DataTypeSize(dtype.type), std::byte{0});
  } else {
    ZS_ASSIGN_OR_RETURN(metadata.fill_value, ParseV2FillValue(*fill_value, dtype.type));
  }

  ZS_ASSIGN_OR_RETURN(const json* order, RequiredField(zarray, "order", "order"));
  if (*order != "C" && *order != "F") {
    return FieldError(ErrorCode::kMetadata, "order",
                      "expected \"C\" or \"F\", got " + DescribeJson(*order));
  }

  metadata.chunk_key_encoding = {ChunkKeyEncoding::Kind::kV2, '.'};
  auto separator = zarray.find("dimension_separator");
  if (separator != zarray.end() && !separator->is_null()) {
    if (*separator != "." && *separator != "/") {
      return FieldError(ErrorCode::kMetadata, "dimension_separator",
                        "expected \".\" or \"/\", got " + DescribeJson(*separator));
    }
    metadata.chunk_key_encoding.separator = separator->get_ref<const std::string&>()[0];
  }

  if (metadata.extended_type && metadata.extended_type->is_text() &&
      metadata.extended_type->NumpyTypeString() == "|O") {
    ZS_ASSIGN_OR_RETURN(metadata.codecs,
                        BuildObjectCodecChain(*filters, *compressor, *metadata.extended_type,
                                              *order == "F", metadata.shape.size()));
  } else {
    ZS_ASSIGN_OR_RETURN(metadata.codecs, BuildCodecChain(*filters, *compressor, dtype,
                                                         *order == "F", metadata.shape.size()));
  }

  ZS_ASSIGN_OR_RETURN(metadata.attributes, ParseZattrs(zattrs));
  auto dimensions = metadata.attributes.find("_ARRAY_DIMENSIONS");
  if (dimensions != metadata.attributes.end()) {
    const std::string field = "_ARRAY_DIMENSIONS";
    if (!dimensions->is_array() || dimensions->size() != metadata.shape.size()) {
      return FieldError(ErrorCode::kMetadata, field,
                        "expected an array of " + std::to_string(metadata.shape.size()) +
                            " dimension names, got " +
                            (dimensions->is_array() ? std::to_string(dimensions->size()) + " names"
                                                    : DescribeJson(*dimensions)));
    }
    for (size_t i = 0; i < dimensions->size(); ++i) {
      const json& name = (*dimensions)[i];
      if (name.is_null()) {
        metadata.dimension_names.emplace_back();
      } else if (name.is_string()) {
        metadata.dimension_names.push_back(name.get<std::string>());
      } else {
        return FieldError(ErrorCode::kMetadata, field + "[" + std::to_string(i) + "]",
                          "expected a string, got " + DescribeJson(name));
      }
    }
    // It is the dimension names in v2 clothing, not a user attribute: keep one copy of it.
    metadata.attributes.erase(dimensions);
  }
  return metadata;
}

Result<GroupMetadata> ParseV2Group(const json& zgroup, const json* zattrs) {
  if (!zgroup.is_object()) {
    return MetadataError(".zgroup: expected a JSON object, got " + DescribeJson(zgroup));
  }
  ZS_RETURN_IF_ERROR(CheckFormatVersion(zgroup, "zarr_format", 2));
  GroupMetadata group;
  group.zarr_format = 2;
  ZS_ASSIGN_OR_RETURN(group.attributes, ParseZattrs(zattrs));
  return group;
}

Result<ConsolidatedMetadata> ParseConsolidated(const json& document) {
  if (!document.is_object()) {
    return MetadataError(".zmetadata: expected a JSON object, got " + DescribeJson(document));
  }
  ZS_RETURN_IF_ERROR(CheckFormatVersion(document, "zarr_consolidated_format", 1));
  ZS_ASSIGN_OR_RETURN(const json* entries, RequiredField(document, "metadata", "metadata"));
  if (!entries->is_object()) {
    return FieldError(ErrorCode::kMetadata, "metadata",
                      "expected an object, got " + DescribeJson(*entries));
  }
  struct Documents {
    const json* zarray = nullptr;
    const json* zgroup = nullptr;
    const json* zattrs = nullptr;
  };
  std::map<std::string, Documents> nodes;
  for (const auto& [key, value] : entries->items()) {
    const std::string field = "metadata[" + DescribeJson(json(key)) + "]";
    const size_t slash = key.rfind('/');
    const std::string leaf = slash == std::string::npos ? key : key.substr(slash + 1);
    const std::string path = slash == std::string::npos ? "" : key.substr(0, slash);
    if (!path.empty()) ZS_RETURN_IF_ERROR(ValidateNodePath(path, field));
    Documents& documents = nodes[path];
    if (leaf == ".zarray") {
      documents.zarray = &value;
    } else if (leaf == ".zgroup") {
      documents.zgroup = &value;
    } else if (leaf == ".zattrs") {
      documents.zattrs = &value;
    } else {
      return FieldError(ErrorCode::kMetadata, field,
                        "expected a key ending in .zarray, .zgroup or .zattrs");
    }
  }
  ConsolidatedMetadata result;
  for (const auto& [path, documents] : nodes) {
    const std::string prefix = path.empty() ? "" : path + "/";
    const std::string field = "metadata[" + DescribeJson(json(prefix + ".zarray")) + "]";
    if (documents.zarray != nullptr && documents.zgroup != nullptr) {
      return FieldError(ErrorCode::kMetadata, field, "a node cannot have both .zarray and .zgroup");
    }
    if (documents.zarray != nullptr) {
      Result<ArrayMetadata> array = ParseV2Array(*documents.zarray, documents.zattrs);
      if (!array.ok() && array.status().code() == ErrorCode::kUnsupported) {
        // Well-formed but unsupported: listed, and opening it is the error (see
        // ArrayMetadata::unsupported), so that its siblings stay readable.
        ArrayMetadata unsupported;
        unsupported.zarr_format = 2;
        unsupported.unsupported = array.status();
        result.emplace(path, std::move(unsupported));
        continue;
      }
      if (!array.ok()) return array.status().WithContext("field '" + field + "'");
      result.emplace(path, std::move(array).value());
    } else if (documents.zgroup != nullptr) {
      const std::string group_field = "metadata[" + DescribeJson(json(prefix + ".zgroup")) + "]";
      Result<GroupMetadata> group = ParseV2Group(*documents.zgroup, documents.zattrs);
      if (!group.ok()) return group.status().WithContext("field '" + group_field + "'");
      result.emplace(path, std::move(group).value());
    } else {
      return FieldError(ErrorCode::kMetadata,
                        "metadata[" + DescribeJson(json(prefix + ".zattrs")) + "]",
                        "attributes of a node that has neither .zarray nor .zgroup");
    }
  }
  AttachSubgroupConsolidatedMetadata(&result);
  return result;
}

// Parses an optional .zattrs text into `storage`, returning a pointer to it (null when absent).
Result<const json*> ParseOptionalZattrs(std::optional<std::string_view> text, json* storage) {
  if (!text) return static_cast<const json*>(nullptr);
  ZS_ASSIGN_OR_RETURN(*storage, ParseJsonDocument(*text, ".zattrs"));
  return static_cast<const json*>(storage);
}

}  // namespace

Result<std::pair<DataType, bool>> ParseV2DataType(std::string_view dtype) {
  ZS_ASSIGN_OR_RETURN(V2Type type, ParseDtypeString(dtype, "dtype"));
  return std::make_pair(type.type, type.big_endian);
}

Result<ArrayMetadata> ParseV2ArrayMetadata(std::string_view zarray,
                                           std::optional<std::string_view> zattrs) {
  ZS_ASSIGN_OR_RETURN(json zarray_json, ParseJsonDocument(zarray, ".zarray"));
  json zattrs_storage;
  ZS_ASSIGN_OR_RETURN(const json* zattrs_json, ParseOptionalZattrs(zattrs, &zattrs_storage));
  // Every value's type is checked before it is read; this only stops a missed check from
  // becoming an exception in a caller that expects errors as values.
  try {
    return ParseV2Array(zarray_json, zattrs_json);
  } catch (const json::exception& e) {
    return MetadataError(std::string("malformed .zarray: ") + e.what());
  }
}

Result<GroupMetadata> ParseV2GroupMetadata(std::string_view zgroup,
                                           std::optional<std::string_view> zattrs) {
  ZS_ASSIGN_OR_RETURN(json zgroup_json, ParseJsonDocument(zgroup, ".zgroup"));
  json zattrs_storage;
  ZS_ASSIGN_OR_RETURN(const json* zattrs_json, ParseOptionalZattrs(zattrs, &zattrs_storage));
  try {
    return ParseV2Group(zgroup_json, zattrs_json);
  } catch (const json::exception& e) {
    return MetadataError(std::string("malformed .zgroup: ") + e.what());
  }
}

Result<ConsolidatedMetadata> ParseV2ConsolidatedMetadata(std::string_view zmetadata) {
  ZS_ASSIGN_OR_RETURN(json document, ParseJsonDocument(zmetadata, ".zmetadata"));
  try {
    return ParseConsolidated(document);
  } catch (const json::exception& e) {
    return MetadataError(std::string("malformed .zmetadata: ") + e.what());
  }
}

}  // namespace zarrstream
