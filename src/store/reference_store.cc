#include "store/reference_store.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>

#include "store/curl_transport.h"
#include "store/http_store.h"
#include "store/parquet_file.h"
#include "store/reference_template.h"
#include "store/sigv4.h"
#include "store/store_registry.h"
#include "util/base64.h"
#include "util/json_document.h"

namespace zarrstream {

namespace {

using nlohmann::json;

// All "gen" entries of a set together generate at most this many keys: a few bytes of JSON could
// otherwise ask for more keys than memory holds.
constexpr uint64_t kMaxGeneratedKeys = uint64_t{1} << 26;

constexpr std::string_view kScheme = "reference";

bool HasScheme(std::string_view url) { return url.find("://") != std::string_view::npos; }

// A short description of a JSON value for messages.
std::string Describe(const json& value) {
  std::string text = value.dump();
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

}  // namespace

Result<std::pair<std::string, std::string>> SplitFileUrl(std::string_view url) {
  auto [scheme, rest] = SplitScheme(url);
  if (scheme.empty() || scheme == "file") {
    const std::filesystem::path path = std::filesystem::path(rest).lexically_normal();
    std::string name = path.filename().string();
    if (name.empty() || name == "." || name == "..") {
      return InvalidArgumentError("'" + std::string(url) + "' names a directory, not a file");
    }
    std::string directory = path.parent_path().string();
    if (directory.empty()) directory = ".";
    if (!scheme.empty()) directory = "file://" + directory;
    return std::make_pair(std::move(directory), std::move(name));
  }
  const size_t slash = rest.rfind('/');
  if (slash == std::string_view::npos || slash + 1 == rest.size()) {
    return InvalidArgumentError("'" + RedactUrl(url) + "' names no file (no path after the host)");
  }
  std::string directory(scheme);
  directory += "://";
  directory += rest.substr(0, slash);
  return std::make_pair(std::move(directory), std::string(rest.substr(slash + 1)));
}

// The stores that targets are read through, one per directory, opened on first use.
class ReferenceStore::TargetStores {
 public:
  // `directory`: of the reference file, where relative target paths start.
  explicit TargetStores(std::string directory) : directory_(std::move(directory)) {}

  // The target at `url`.
  Result<Target> Resolve(const std::string& url) {
    if (url.empty()) return MetadataError("empty target URL");
    const bool relative = !HasScheme(url) && url.front() != '/';
    const std::string resolved = relative ? directory_ + "/" + url : url;
    auto [scheme, rest] = SplitScheme(resolved);
    if (scheme == kScheme) {
      return UnsupportedError("target " + RedactUrl(url) + " is itself a reference set");
    }
    if ((scheme == "http" || scheme == "https") &&
        rest.find_first_of("?#") != std::string_view::npos) {
      const std::string shown = RedactUrl(resolved);
      return UnsupportedError("target URL " + shown.substr(0, shown.find_first_of("?#")) +
                              "?... has a query or fragment, which HTTP stores do not take");
    }
    ZS_ASSIGN_OR_RETURN(auto split, SplitFileUrl(resolved));
    auto& [directory, name] = split;
    if (Status s = ValidateKey(name); !s.ok()) {
      return MetadataError("target " + RedactUrl(resolved) + ": " + s.message());
    }
    std::shared_ptr<Store> store;
    {
      std::lock_guard lock(mu_);
      std::shared_ptr<Store>& cached = stores_[directory];
      if (cached == nullptr) {
        Result<std::shared_ptr<Store>> opened = OpenStore(directory);
        if (!opened.ok()) {
          stores_.erase(directory);
          return opened.status().WithContext("opening the store of target " + RedactUrl(resolved));
        }
        cached = std::move(*opened);
      }
      store = cached;
    }
    std::string shown =
        scheme.empty() ? "file://" + std::filesystem::path(resolved).lexically_normal().string()
                       : RedactUrl(resolved);
    return Target{std::move(shown), std::move(store), std::move(name)};
  }

 private:
  std::mutex mu_;
  const std::string directory_;
  std::map<std::string, std::shared_ptr<Store>> stores_;  // by directory URL
};

// Builds a ReferenceStore's references and targets from a parsed reference set.
class ReferenceSetParser {
 public:
  explicit ReferenceSetParser(ReferenceStore* store) : store_(store) {}

  Status Parse(const json& document) {
    if (!document.is_object()) {
      return MetadataError("a reference set is a JSON object, not " + Describe(document));
    }
    auto version = document.find("version");
    if (version == document.end()) {  // version 0: the object is the references
      for (const auto& [key, value] : document.items()) {
        ZS_RETURN_IF_ERROR(AddReference(key, value, nullptr));
      }
      return Status::Ok();
    }
    if (!version->is_number_integer() || version->get<int64_t>() != 1) {
      return UnsupportedError("reference set version " + Describe(*version) +
                              " (versions 0 and 1 are read)");
    }
    TemplateLibrary templates;
    if (auto it = document.find("templates"); it != document.end() && !it->is_null()) {
      if (!it->is_object()) return MetadataError("\"templates\" is not an object");
      std::map<std::string, std::string> texts;
      for (const auto& [name, text] : it->items()) {
        if (!text.is_string()) {
          return MetadataError("templates['" + name + "'] is not a string: " + Describe(text));
        }
        texts[name] = text.get<std::string>();
      }
      ZS_ASSIGN_OR_RETURN(templates, TemplateLibrary::Parse(texts));
    }
    if (auto it = document.find("refs"); it != document.end() && !it->is_null()) {
      if (!it->is_object()) return MetadataError("\"refs\" is not an object");
      for (const auto& [key, value] : it->items()) {
        ZS_RETURN_IF_ERROR(AddReference(key, value, &templates));
      }
    }
    if (auto it = document.find("gen"); it != document.end() && !it->is_null()) {
      if (!it->is_array()) return MetadataError("\"gen\" is not a list");
      for (size_t i = 0; i < it->size(); ++i) {
        ZS_RETURN_IF_ERROR_CTX(AddGenerated((*it)[i], templates), "gen[" + std::to_string(i) + "]");
      }
    }
    return Status::Ok();
  }

 private:
  using Reference = ReferenceStore::Reference;

  Status AddReference(const std::string& key, const json& value, const TemplateLibrary* templates) {
    ZS_RETURN_IF_ERROR_CTX(AddReferenceUnchecked(key, value, templates), "key '" + key + "'");
    return Status::Ok();
  }

  Status AddReferenceUnchecked(const std::string& key, const json& value,
                               const TemplateLibrary* templates) {
    if (Status s = ValidateKey(key); !s.ok()) return MetadataError(s.message());
    Reference reference;
    if (value.is_string()) {
      const std::string& text = value.get_ref<const std::string&>();
      if (text.starts_with("base64:")) {
        Result<std::string> bytes = DecodeBase64(std::string_view(text).substr(7));
        if (!bytes.ok()) {
          return MetadataError("inline data after \"base64:\" is " + bytes.status().message());
        }
        reference.data = std::move(*bytes);
      } else {
        reference.data = text;
      }
    } else if (value.is_object()) {
      reference.data = value.dump();
    } else if (value.is_array() && (value.size() == 1 || value.size() == 3)) {
      if (!value[0].is_string()) {
        return MetadataError("the URL of reference " + Describe(value) +
                             " is not a string (a null URL, fsspec's default target, is not "
                             "supported)");
      }
      std::string url = value[0].get<std::string>();
      if (templates != nullptr && url.find("{{") != std::string::npos) {
        ZS_ASSIGN_OR_RETURN(ReferenceTemplate t, ReferenceTemplate::Parse(url));
        ZS_ASSIGN_OR_RETURN(url, t.Render({}, *templates));
      }
      ZS_ASSIGN_OR_RETURN(reference.target, TargetOf(url));
      if (value.size() == 1) {
        reference.whole_file = true;
      } else {
        std::optional<uint64_t> offset = AsByteCount(value[1]);
        std::optional<uint64_t> length = AsByteCount(value[2]);
        if (!offset || !length || *offset > UINT64_MAX - *length) {
          return MetadataError("reference " + Describe(value) +
                               ": offset and length must be byte counts");
        }
        reference.offset = *offset;
        reference.length = *length;
      }
    } else {
      return MetadataError("a reference is a string, [url] or [url, offset, length], not " +
                           Describe(value));
    }
    store_->references_.insert_or_assign(key, std::move(reference));
    return Status::Ok();
  }

  static std::optional<uint64_t> AsByteCount(const json& value) {
    if (value.is_number_unsigned()) return value.get<uint64_t>();
    if (value.is_number_integer() && value.get<int64_t>() >= 0) {
      return static_cast<uint64_t>(value.get<int64_t>());
    }
    return std::nullopt;
  }

  // The values one "gen" dimension takes.
  Result<std::vector<int64_t>> DimensionValues(const std::string& name, const json& spec,
                                               uint64_t budget) {
    std::vector<int64_t> values;
    auto error = [&](const std::string& what) {
      return MetadataError("dimensions['" + name + "']: " + what);
    };
    if (spec.is_array()) {
      if (spec.size() > budget) return error("more values than a reference set may generate");
      for (const json& v : spec) {
        if (!v.is_number_integer()) return error("the value " + Describe(v) + " is no integer");
        values.push_back(v.get<int64_t>());
      }
      return values;
    }
    if (!spec.is_object()) {
      return error("expected {\"start\", \"stop\", \"step\"} or a list of integers, got " +
                   Describe(spec));
    }
    auto field = [&](const char* field_name, int64_t fallback) -> Result<int64_t> {
      auto it = spec.find(field_name);
      if (it == spec.end()) {
        if (std::string_view(field_name) == "stop") return error("\"stop\" is required");
        return fallback;
      }
      if (!it->is_number_integer()) {
        return error(std::string("\"") + field_name + "\" is not an integer: " + Describe(*it));
      }
      return it->get<int64_t>();
    };
    ZS_ASSIGN_OR_RETURN(int64_t start, field("start", 0));
    ZS_ASSIGN_OR_RETURN(int64_t stop, field("stop", 0));
    ZS_ASSIGN_OR_RETURN(int64_t step, field("step", 1));
    if (step == 0) return error("\"step\" must not be 0");
    // As Python's range(start, stop, step). Differences in unsigned arithmetic, which cannot
    // overflow: the values lie between start and stop.
    const bool up = step > 0;
    if (up ? stop <= start : start <= stop) return values;
    const uint64_t span = up ? static_cast<uint64_t>(stop) - static_cast<uint64_t>(start)
                             : static_cast<uint64_t>(start) - static_cast<uint64_t>(stop);
    const uint64_t stride =
        up ? static_cast<uint64_t>(step) : uint64_t{0} - static_cast<uint64_t>(step);
    const uint64_t count = (span - 1) / stride + 1;
    if (count > budget) {
      return error("more values than a reference set may generate (" +
                   std::to_string(kMaxGeneratedKeys) + " keys)");
    }
    values.reserve(count);
    for (uint64_t i = 0; i < count; ++i) {
      values.push_back(
          static_cast<int64_t>(static_cast<uint64_t>(start) + i * static_cast<uint64_t>(step)));
    }
    return values;
  }

  Status AddGenerated(const json& gen, const TemplateLibrary& templates) {
    if (!gen.is_object())
      return MetadataError("a \"gen\" entry is an object, not " + Describe(gen));
    auto text_field = [&](const char* name, bool required) -> Result<std::optional<std::string>> {
      auto it = gen.find(name);
      if (it == gen.end()) {
        if (required) return MetadataError(std::string("\"") + name + "\" is required");
        return std::optional<std::string>();
      }
      if (it->is_number_integer())
        return std::optional<std::string>(std::to_string(it->get<int64_t>()));
      if (!it->is_string()) {
        return MetadataError(std::string("\"") + name + "\" is not a string: " + Describe(*it));
      }
      return std::optional<std::string>(it->get<std::string>());
    };
    ZS_ASSIGN_OR_RETURN(std::optional<std::string> key_text, text_field("key", true));
    ZS_ASSIGN_OR_RETURN(std::optional<std::string> url_text, text_field("url", true));
    ZS_ASSIGN_OR_RETURN(std::optional<std::string> offset_text, text_field("offset", false));
    ZS_ASSIGN_OR_RETURN(std::optional<std::string> length_text, text_field("length", false));
    if (offset_text.has_value() != length_text.has_value()) {
      return MetadataError("\"offset\" and \"length\" come together or not at all");
    }
    ZS_ASSIGN_OR_RETURN(ReferenceTemplate key_template, ReferenceTemplate::Parse(*key_text));
    ZS_ASSIGN_OR_RETURN(ReferenceTemplate url_template, ReferenceTemplate::Parse(*url_text));
    std::optional<ReferenceTemplate> offset_template, length_template;
    if (offset_text) {
      ZS_ASSIGN_OR_RETURN(offset_template, ReferenceTemplate::Parse(*offset_text));
      ZS_ASSIGN_OR_RETURN(length_template, ReferenceTemplate::Parse(*length_text));
    }
    auto dimensions = gen.find("dimensions");
    if (dimensions == gen.end() || !dimensions->is_object() || dimensions->empty()) {
      return MetadataError("\"dimensions\" is required: an object of one or more dimensions");
    }
    std::vector<std::string> names;
    std::vector<std::vector<int64_t>> values;
    uint64_t combinations = 1;
    for (const auto& [name, spec] : dimensions->items()) {
      ZS_ASSIGN_OR_RETURN(std::vector<int64_t> v,
                          DimensionValues(name, spec, kMaxGeneratedKeys - generated_));
      combinations = v.empty() ? 0 : combinations * v.size();
      if (combinations > kMaxGeneratedKeys - generated_) {
        return MetadataError("generates more keys than a reference set may (" +
                             std::to_string(kMaxGeneratedKeys) + ")");
      }
      names.push_back(name);
      values.push_back(std::move(v));
    }
    if (combinations == 0) return Status::Ok();
    generated_ += combinations;
    // Every combination, the last dimension varying fastest (itertools.product's order).
    std::vector<size_t> index(names.size(), 0);
    TemplateVariables variables;
    while (true) {
      for (size_t d = 0; d < names.size(); ++d) variables[names[d]] = values[d][index[d]];
      ZS_RETURN_IF_ERROR_CTX(AddGeneratedKey(key_template, url_template, offset_template,
                                             length_template, variables, templates),
                             DescribeVariables(variables));
      size_t d = names.size();
      while (d > 0 && ++index[d - 1] == values[d - 1].size()) index[--d] = 0;
      if (d == 0) break;
    }
    return Status::Ok();
  }

  static std::string DescribeVariables(const TemplateVariables& variables) {
    std::string out = "with";
    for (const auto& [name, value] : variables) {
      out += " " + name + "=" + std::to_string(std::get<int64_t>(value));
    }
    return out;
  }

  Status AddGeneratedKey(const ReferenceTemplate& key_template,
                         const ReferenceTemplate& url_template,
                         const std::optional<ReferenceTemplate>& offset_template,
                         const std::optional<ReferenceTemplate>& length_template,
                         const TemplateVariables& variables, const TemplateLibrary& templates) {
    ZS_ASSIGN_OR_RETURN(std::string key, key_template.Render(variables, templates));
    if (Status s = ValidateKey(key); !s.ok()) return MetadataError(s.message());
    ZS_ASSIGN_OR_RETURN(std::string url, url_template.Render(variables, templates));
    Reference reference;
    ZS_ASSIGN_OR_RETURN(reference.target, TargetOf(url));
    if (!offset_template) {
      reference.whole_file = true;
    } else {
      ZS_ASSIGN_OR_RETURN(reference.offset,
                          RenderByteCount(*offset_template, "offset", variables, templates));
      ZS_ASSIGN_OR_RETURN(reference.length,
                          RenderByteCount(*length_template, "length", variables, templates));
      if (reference.offset > UINT64_MAX - reference.length) {
        return MetadataError("offset + length overflows");
      }
    }
    store_->references_.insert_or_assign(std::move(key), std::move(reference));
    return Status::Ok();
  }

  static Result<uint64_t> RenderByteCount(const ReferenceTemplate& t, const char* what,
                                          const TemplateVariables& variables,
                                          const TemplateLibrary& templates) {
    ZS_ASSIGN_OR_RETURN(std::string text, t.Render(variables, templates));
    uint64_t value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || ptr != text.data() + text.size() || text.empty()) {
      return MetadataError(std::string(what) + " '" + t.text() + "' rendered '" + text +
                           "', which is not a byte count");
    }
    return value;
  }

  // The index of the target at `url`, added (and its store opened) on first use.
  Result<uint32_t> TargetOf(const std::string& url) {
    if (auto it = target_index_.find(url); it != target_index_.end()) return it->second;
    ZS_ASSIGN_OR_RETURN(uint32_t index, AddTarget(url));
    target_index_.emplace(url, index);
    return index;
  }

  Result<uint32_t> AddTarget(const std::string& url) {
    ZS_ASSIGN_OR_RETURN(ReferenceStore::Target target, store_->target_stores_->Resolve(url));
    if (IsRemoteStore(*target.store)) store_->has_remote_targets_ = true;
    if (store_->targets_.size() >= ReferenceStore::Reference::kMissing) {
      return MetadataError("too many distinct target files");
    }
    store_->targets_.push_back(std::move(target));
    return static_cast<uint32_t>(store_->targets_.size() - 1);
  }

  ReferenceStore* store_;
  std::unordered_map<std::string, uint32_t> target_index_;
  uint64_t generated_ = 0;
};

Result<std::shared_ptr<ReferenceStore>> ReferenceStore::Open(std::string_view url) {
  auto [scheme, location_view] = SplitScheme(url);
  if (scheme != kScheme) return InvalidArgumentError("not a reference:// URL: " + RedactUrl(url));
  if (location_view.empty()) {
    return InvalidArgumentError(
        "reference:// names no reference file (reference:///path/refs.json, "
        "reference://https://host/refs.json)");
  }
  // "#path": the store is rooted at that group or array of the set.
  std::string location(location_view.substr(0, location_view.find('#')));
  std::string path;
  if (const size_t hash = location_view.find('#'); hash != std::string_view::npos) {
    path = std::string(location_view.substr(hash + 1));
    while (!path.empty() && path.back() == '/') path.pop_back();
    while (!path.empty() && path.front() == '/') path.erase(0, 1);
    if (!path.empty()) {
      ZS_RETURN_IF_ERROR_CTX(ValidateKey(path), "the path after '#' in " + RedactUrl(url));
    }
  }
  if (location.empty()) {
    return InvalidArgumentError("reference:// names no reference file in " + RedactUrl(url));
  }
  if (!HasScheme(location)) {
    std::error_code ec;
    std::filesystem::path absolute = std::filesystem::absolute(location, ec);
    if (!ec) location = absolute.lexically_normal().string();
  } else if (SplitScheme(location).first == kScheme) {
    return InvalidArgumentError("reference set location " + RedactUrl(location) +
                                " is itself a reference:// URL");
  }
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<ReferenceStore> store, OpenLocation(location));
  if (!path.empty()) {
    store->prefix_ = path + "/";
    store->url_ += "#" + path;
  }
  return store;
}

Result<std::shared_ptr<ReferenceStore>> ReferenceStore::OpenLocation(const std::string& location) {
  // A directory is a Parquet reference set.
  auto [location_scheme, location_path] = SplitScheme(location);
  if (location.ends_with('/')) {
    std::string directory = location;
    while (directory.size() > 1 && directory.back() == '/') directory.pop_back();
    return OpenParquetDirectory(directory);
  }
  if (location_scheme.empty() || location_scheme == "file") {
    std::error_code ec;
    if (std::filesystem::is_directory(std::filesystem::path(location_path), ec)) {
      return OpenParquetDirectory(location);
    }
  }
  ZS_ASSIGN_OR_RETURN(auto split, SplitFileUrl(location));
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<Store> directory, OpenStore(split.first));
  Result<ByteBuffer> text = directory->ReadAll(split.second);
  if (!text.ok()) {
    const std::string shown = RedactUrl(location);
    if (text.status().code() == ErrorCode::kNotFound) {
      // An object store has no directories: a set there is a location with a .zmetadata under it.
      if (!location_scheme.empty() && location_scheme != "file") {
        ZS_ASSIGN_OR_RETURN(std::shared_ptr<Store> set, OpenStore(location));
        ZS_ASSIGN_OR_RETURN(std::optional<ByteBuffer> zmetadata, set->ReadIfExists(".zmetadata"));
        if (zmetadata) return FromParquet(location, std::move(set), zmetadata->view());
      }
      return NotFoundError("reference file " + shown + " does not exist (" +
                           text.status().message() + ")");
    }
    return text.status().WithContext("reading reference file " + shown);
  }
  if (split.second == ".zmetadata") return FromParquet(split.first, directory, text->view());
  return FromJson(location,
                  std::string_view(reinterpret_cast<const char*>(text->data()), text->size()));
}

Result<std::shared_ptr<ReferenceStore>> ReferenceStore::OpenParquetDirectory(
    const std::string& location) {
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<Store> directory, OpenStore(location));
  ZS_ASSIGN_OR_RETURN(std::optional<ByteBuffer> zmetadata, directory->ReadIfExists(".zmetadata"));
  if (!zmetadata) {
    return NotFoundError("reference set " + RedactUrl(location) +
                         " is a directory without a .zmetadata (a Parquet reference set has one)");
  }
  return FromParquet(location, std::move(directory), zmetadata->view());
}

Result<std::shared_ptr<ReferenceStore>> ReferenceStore::FromJson(std::string_view location,
                                                                 std::string_view json_text) {
  std::shared_ptr<ReferenceStore> store(new ReferenceStore());
  store->location_ = RedactUrl(location);
  store->url_ = std::string(kScheme) + "://" + store->location_;
  store->content_sha256_ = Sha256Hex(std::as_bytes(std::span(json_text)));
  const std::string context = "reference file " + store->location_;
  Result<json> document = ParseJsonDocument(json_text, context);
  if (!document.ok()) return document.status();
  std::string directory = ".";
  if (Result<std::pair<std::string, std::string>> split = SplitFileUrl(location); split.ok()) {
    directory = split->first;
  }
  store->target_stores_ = std::make_shared<TargetStores>(std::move(directory));
  ReferenceSetParser parser(store.get());
  ZS_RETURN_IF_ERROR_CTX(parser.Parse(*document), context);
  return store;
}

Future<uint64_t> ReferenceStore::Read(std::string_view key, std::span<const ByteRange> ranges,
                                      std::span<ByteBuffer> outs) {
  using R = Future<uint64_t>;
  if (ranges.size() != outs.size()) {
    return R::Ready(InternalError("ReferenceStore::Read: ranges/outs mismatch"));
  }
  const std::string full_key = prefix_.empty() ? std::string(key) : prefix_ + std::string(key);
  if (auto it = references_.find(full_key); it != references_.end()) {
    const Reference& reference = it->second;
    const Target* target =
        reference.target < targets_.size() ? &targets_[reference.target] : nullptr;
    return ReadReference(full_key, reference, target, ranges, outs);
  }
  if (Status s = ValidateKey(key); !s.ok()) return R::Ready(std::move(s));
  if (std::optional<std::pair<std::string_view, uint64_t>> chunk = ParquetChunk(full_key)) {
    const uint64_t record = chunk->second / record_size_;
    const uint64_t row = chunk->second % record_size_;
    Result<std::shared_ptr<const Record>> loaded = LoadRecord(chunk->first, record);
    if (!loaded.ok()) {
      return R::Ready(loaded.status().WithContext("key '" + full_key + "' of " + DescribeSet()));
    }
    const Record& rows = **loaded;
    if (!rows.exists) {  // no record file: all its chunks are missing
      return R::Ready(NotFoundError("no chunk '" + full_key + "' in " + DescribeSet() + " (" +
                                    RecordFile(chunk->first, record) + " does not exist)"));
    }
    if (row >= rows.rows.size()) {
      return R::Ready(MetadataError("key '" + full_key + "' of " + DescribeSet() +
                                    ": record file " + RecordFile(chunk->first, record) + " has " +
                                    std::to_string(rows.rows.size()) +
                                    " rows, and the chunk is in row " + std::to_string(row)));
    }
    const Reference& reference = rows.rows[row];
    const Target* target =
        reference.target < rows.targets.size() ? &rows.targets[reference.target] : nullptr;
    // The record (holding the reference and its target) may leave the cache once the read has
    // copied what it needs.
    return ReadReference(full_key, reference, target, ranges, outs);
  }
  return R::Ready(NotFoundError("no such key '" + full_key + "' in " + DescribeSet()));
}

std::string ReferenceStore::DescribeSet() const {
  return (is_parquet() ? "Parquet reference set " : "reference file ") + location_;
}

Future<uint64_t> ReferenceStore::ReadReference(const std::string& full_key,
                                               const Reference& reference, const Target* target,
                                               std::span<const ByteRange> ranges,
                                               std::span<ByteBuffer> outs) {
  const std::string key_context = "key '" + full_key + "' of " + DescribeSet();
  if (reference.target == Reference::kInline) {
    return Future<uint64_t>::Ready(
        ReadInlineBytes(std::as_bytes(std::span(reference.data)), ranges, outs, key_context));
  }
  if (reference.target == Reference::kMissing || target == nullptr) {
    return Future<uint64_t>::Ready(
        NotFoundError("no chunk '" + full_key + "' in " + DescribeSet() + " (its row is empty)"));
  }
  std::string what = reference.whole_file
                         ? target->url
                         : "bytes " + std::to_string(reference.offset) + ".." +
                               std::to_string(reference.offset + reference.length) + " of " +
                               target->url;
  return ReadReferencedBytes(target->store, target->key, reference.whole_file, reference.offset,
                             reference.length, ranges, outs, key_context, std::move(what));
}

std::optional<std::pair<std::string_view, uint64_t>> ReferenceStore::ParquetChunk(
    std::string_view key) const {
  const size_t slash = key.rfind('/');
  if (fields_.empty() || slash == std::string_view::npos) return std::nullopt;
  auto field = fields_.find(key.substr(0, slash));
  if (field == fields_.end()) return std::nullopt;
  // "i.j.k", one index per dimension, each inside the grid; C order.
  std::string_view rest = key.substr(slash + 1);
  uint64_t number = 0;
  for (size_t d = 0; d < field->second.grid.size(); ++d) {
    const size_t dot = rest.find('.');
    if ((dot == std::string_view::npos) != (d + 1 == field->second.grid.size()))
      return std::nullopt;
    const std::string_view text = rest.substr(0, dot);
    uint64_t index = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), index);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() ||
        index >= field->second.grid[d]) {
      return std::nullopt;
    }
    number = number * field->second.grid[d] + index;
    if (dot != std::string_view::npos) rest = rest.substr(dot + 1);
  }
  return std::make_pair(std::string_view(field->first), number);
}

std::string ReferenceStore::RecordFile(std::string_view field, uint64_t record) const {
  return std::string(field) + "/refs." + std::to_string(record) + ".parq";
}

Result<std::shared_ptr<const ReferenceStore::Record>> ReferenceStore::LoadRecord(
    std::string_view field, uint64_t record) {
  const std::string name = RecordFile(field, record);
  {
    std::lock_guard lock(records_mu_);
    if (auto it = record_index_.find(name); it != record_index_.end()) {
      records_.splice(records_.begin(), records_, it->second);
      return it->second->second;
    }
  }
  // Read without the lock: other records stay readable meanwhile (two threads may both read the
  // same record; the second one's copy replaces the first's).
  auto loaded = std::make_shared<Record>();
  Result<std::optional<ByteBuffer>> bytes = directory_->ReadIfExists(name);
  if (!bytes.ok()) return bytes.status().WithContext("reading record file " + name);
  if (*bytes) {
    ZS_ASSIGN_OR_RETURN(*loaded, DecodeRecord(field, record, name, (*bytes)->span()));
    loaded->exists = true;
  }
  loaded->memory_bytes += sizeof(Record) + name.size();
  std::lock_guard lock(records_mu_);
  if (auto it = record_index_.find(name); it != record_index_.end()) {
    records_bytes_ -= it->second->second->memory_bytes;
    records_.erase(it->second);
    record_index_.erase(it);
  }
  records_.emplace_front(name, loaded);
  record_index_.emplace(name, records_.begin());
  records_bytes_ += loaded->memory_bytes;
  while (records_.size() > 1 && records_bytes_ > kRecordCacheBytes) {
    records_bytes_ -= records_.back().second->memory_bytes;
    record_index_.erase(records_.back().first);
    records_.pop_back();
  }
  return std::shared_ptr<const Record>(std::move(loaded));
}

namespace {

// The error of row `row` of a record file, the chunk numbered `chunk` of `field`.
Status RowError(const std::string& file, uint64_t row, uint64_t chunk, std::string_view field,
                const std::string& what) {
  return MetadataError("Parquet file " + file + ", row " + std::to_string(row) + " (chunk " +
                       std::to_string(chunk) + " of '" + std::string(field) + "'): " + what);
}

// The number of chunks along each dimension of the array whose .zarray is `zarray`, as fsspec
// computes it (a scalar has one chunk); their product fits 64 bits.
Result<std::vector<uint64_t>> ChunkGrid(const json& zarray, const std::string& field,
                                        const std::string& context) {
  const auto error = [&](const std::string& what) {
    return MetadataError(context + ": array '" + field + "': " + what);
  };
  auto shape = zarray.find("shape");
  auto chunks = zarray.find("chunks");
  if (!zarray.is_object() || shape == zarray.end() || chunks == zarray.end() ||
      !shape->is_array() || !chunks->is_array() || shape->size() != chunks->size()) {
    return error(".zarray has no \"shape\" and \"chunks\" of one length");
  }
  if (auto separator = zarray.find("dimension_separator");
      separator != zarray.end() && *separator == "/") {
    return UnsupportedError(context + ": array '" + field +
                            "' has dimension_separator \"/\" (fsspec's Parquet references name "
                            "chunks \"i.j\")");
  }
  std::vector<uint64_t> grid;
  uint64_t product = 1;
  for (size_t d = 0; d < shape->size(); ++d) {
    const json& extent = (*shape)[d];
    const json& chunk = (*chunks)[d];
    if (!extent.is_number_unsigned() || !chunk.is_number_unsigned() || chunk.get<uint64_t>() == 0) {
      return error("\"shape\" and \"chunks\" must be counts (chunks above 0)");
    }
    const uint64_t n = extent.get<uint64_t>() / chunk.get<uint64_t>() +
                       (extent.get<uint64_t>() % chunk.get<uint64_t>() != 0 ? 1 : 0);
    if (n != 0 && product > UINT64_MAX / n) return error("too many chunks");
    product *= n;
    grid.push_back(n);
  }
  if (grid.empty()) grid.push_back(1);
  return grid;
}

}  // namespace

Result<ReferenceStore::Record> ReferenceStore::DecodeRecord(std::string_view field, uint64_t record,
                                                            std::string_view file_name,
                                                            std::span<const std::byte> bytes) {
  const std::string shown = location_ + "/" + std::string(file_name);
  ZS_ASSIGN_OR_RETURN(parquet::ParquetFile file,
                      parquet::ParquetFile::Parse(bytes, shown, record_size_));
  // The columns fsspec writes; any may be absent, as fsspec allows, but "offset" and "size" come
  // with "path".
  struct Wanted {
    const char* name;
    bool integer;
    std::optional<parquet::ColumnValues> values;
  };
  Wanted columns[] = {
      {"path", false, {}}, {"offset", true, {}}, {"size", true, {}}, {"raw", false, {}}};
  for (Wanted& column : columns) {
    const int index = file.FindColumn(column.name);
    if (index < 0) continue;
    const parquet::PhysicalType type = file.columns()[index].type;
    const bool ok = column.integer ? (type == parquet::PhysicalType::kInt64 ||
                                      type == parquet::PhysicalType::kInt32)
                                   : type == parquet::PhysicalType::kByteArray;
    Result<parquet::ColumnValues> values = file.ReadColumn(static_cast<size_t>(index));
    // pyarrow stores a column of nulls only (pandas' all-None object column) with Arrow's null
    // type, as INT32: of any type, such a column holds no values.
    const auto all_null = [](const parquet::ColumnValues& v) {
      return std::find(v.present.begin(), v.present.end(), 1) == v.present.end();
    };
    if (!ok && !(values.ok() && all_null(*values))) {
      return MetadataError("Parquet file " + shown + ": column '" + column.name + "' is " +
                           parquet::PhysicalTypeName(type) + ", not " +
                           (column.integer ? "INT64" : "BYTE_ARRAY (bytes or text)"));
    }
    if (!values.ok()) return values.status();
    column.values = std::move(*values);
  }
  const auto& [path, offset, size, raw] = columns;
  if (!path.values && !raw.values) {
    return MetadataError("Parquet file " + shown +
                         " has neither a 'path' nor a 'raw' column (not a reference record)");
  }
  if (path.values && (!offset.values || !size.values)) {
    return MetadataError("Parquet file " + shown +
                         " has a 'path' column without 'offset' and 'size' columns");
  }
  Record out;
  const uint64_t rows = file.num_rows();
  out.rows.resize(rows);
  std::unordered_map<std::string_view, uint32_t> target_index;
  const uint64_t first_chunk = record * record_size_;
  for (uint64_t r = 0; r < rows; ++r) {
    Reference& reference = out.rows[r];
    if (raw.values && !raw.values->is_null(r)) {
      reference.data = std::string(raw.values->bytes_of(r));
      out.memory_bytes += reference.data.size();
      continue;
    }
    if (!path.values || path.values->is_null(r)) {
      reference.target = Reference::kMissing;
      continue;
    }
    const auto row_error = [&](const std::string& what) {
      return RowError(shown, r, first_chunk + r, field, what);
    };
    const std::string_view url = path.values->bytes_of(r);
    auto [it, added] = target_index.try_emplace(url, static_cast<uint32_t>(out.targets.size()));
    if (added) {
      if (url.find("{{") != std::string_view::npos) {
        return row_error("the path '" + std::string(url) +
                         "' is a template, which Parquet reference sets do not render");
      }
      Result<Target> target = target_stores_->Resolve(std::string(url));
      if (!target.ok()) return row_error(target.status().message());
      if (IsRemoteStore(*target->store)) has_remote_targets_ = true;
      out.memory_bytes += target->url.size() + target->key.size() + sizeof(Target);
      out.targets.push_back(std::move(*target));
    }
    reference.target = it->second;
    if (offset.values->is_null(r) || size.values->is_null(r) || offset.values->ints[r] < 0 ||
        size.values->ints[r] < 0) {
      return row_error("offset and size must be byte counts");
    }
    const int64_t start = offset.values->ints[r];
    const int64_t length = size.values->ints[r];
    if (start == 0 && length == 0) {  // fsspec: the whole file
      reference.whole_file = true;
    } else {
      reference.offset = static_cast<uint64_t>(start);
      reference.length = static_cast<uint64_t>(length);
    }
  }
  out.memory_bytes += rows * sizeof(Reference);
  return out;
}

Result<std::shared_ptr<ReferenceStore>> ReferenceStore::FromParquet(
    std::string_view location, std::shared_ptr<Store> directory, std::string_view zmetadata) {
  std::shared_ptr<ReferenceStore> store(new ReferenceStore());
  store->location_ = RedactUrl(location);
  store->url_ = std::string(kScheme) + "://" + store->location_;
  store->content_sha256_ = Sha256Hex(std::as_bytes(std::span(zmetadata)));
  store->has_remote_targets_ = IsRemoteStore(*directory);
  store->directory_ = std::move(directory);
  const std::string context = store->DescribeSet() + ": .zmetadata";
  ZS_ASSIGN_OR_RETURN(json document, ParseJsonDocument(zmetadata, context));
  const auto error = [&](const std::string& what) { return MetadataError(context + ": " + what); };
  if (!document.is_object()) return error("expected a JSON object, got " + Describe(document));
  auto record_size = document.find("record_size");
  auto metadata = document.find("metadata");
  if (record_size == document.end() || metadata == document.end()) {
    return error(
        "no \"record_size\" and \"metadata\" (not the .zmetadata of a Parquet reference set)");
  }
  if (!record_size->is_number_integer() || record_size->get<int64_t>() <= 0) {
    return error("\"record_size\" is not a positive integer: " + Describe(*record_size));
  }
  if (record_size->get<uint64_t>() > kMaxRecordSize) {
    return UnsupportedError(context + ": a record_size of " + Describe(*record_size) +
                            " (at most " + std::to_string(kMaxRecordSize) + " is read)");
  }
  store->record_size_ = record_size->get<uint64_t>();
  if (!metadata->is_object()) return error("\"metadata\" is not an object");
  std::string parent = ".";
  if (Result<std::pair<std::string, std::string>> split = SplitFileUrl(location); split.ok()) {
    parent = split->first;
  }
  store->target_stores_ = std::make_shared<TargetStores>(std::move(parent));
  for (const auto& [key, value] : metadata->items()) {
    if (Status s = ValidateKey(key); !s.ok()) return error("key '" + key + "': " + s.message());
    Reference reference;
    reference.data = value.dump();  // as fsspec serves it
    store->references_.insert_or_assign(key, std::move(reference));
    if (!key.ends_with("/.zarray")) continue;
    // An array: its chunks are in record files.
    const std::string field = key.substr(0, key.size() - 8);
    Field grid;
    ZS_ASSIGN_OR_RETURN(grid.grid, ChunkGrid(value, field, context));
    grid.num_chunks = 1;
    for (uint64_t n : grid.grid) grid.num_chunks *= n;  // ChunkGrid checked the product
    store->fields_.insert_or_assign(field, std::move(grid));
  }
  // The first record file of the first array: a broken set fails here rather than at the first
  // read, and the targets it names tell whether reads go over the network.
  for (const auto& [field, grid] : store->fields_) {
    if (grid.num_chunks == 0) continue;
    ZS_RETURN_IF_ERROR(store->LoadRecord(field, 0).status());
    break;
  }
  return store;
}

Result<uint64_t> ReadInlineBytes(std::span<const std::byte> data, std::span<const ByteRange> ranges,
                                 std::span<ByteBuffer> outs, std::string_view context) {
  uint64_t total = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    uint64_t begin = 0, end = 0;
    if (Status s = ResolveByteRange(ranges[i], data.size(), &begin, &end); !s.ok()) {
      return std::move(s).WithContext(context);
    }
    outs[i].Assign(data.data() + begin, end - begin);
    total += end - begin;
  }
  return total;
}

Future<uint64_t> ReadReferencedBytes(const std::shared_ptr<Store>& store, std::string key,
                                     bool whole, uint64_t offset, uint64_t length,
                                     std::span<const ByteRange> ranges, std::span<ByteBuffer> outs,
                                     std::string context, std::string what) {
  // The ranges of the key become ranges of the target, inside the referenced bytes.
  auto target_ranges = std::make_shared<std::vector<ByteRange>>();
  target_ranges->reserve(ranges.size());
  for (const ByteRange& range : ranges) {
    if (whole) {
      target_ranges->push_back(range);
      continue;
    }
    uint64_t begin = 0, end = 0;
    if (Status s = ResolveByteRange(range, length, &begin, &end); !s.ok()) {
      return Future<uint64_t>::Ready(std::move(s).WithContext(context));
    }
    target_ranges->push_back(ByteRange::Bounded(offset + begin, end - begin));
  }
  // The key and ranges must outlive the read.
  auto target_key = std::make_shared<std::string>(std::move(key));
  Promise<uint64_t> promise;
  Future<uint64_t> future = promise.future();
  store->Read(*target_key, *target_ranges, outs)
      .OnReady([promise, store, target_key, target_ranges, context = std::move(context),
                what = std::move(what)](Result<uint64_t>& result) mutable {
        if (result.ok()) {
          promise.Set(*result);
          return;
        }
        const Status& s = result.status();
        if (s.code() == ErrorCode::kNotFound) {
          promise.Set(StorageError(context + " refers to " + what +
                                   ", which does not exist: " + s.message()));
        } else if (s.code() == ErrorCode::kCorruptChunk) {
          promise.Set(StorageError(context + " refers to " + what +
                                   ", past the end of that file: " + s.message()));
        } else {
          promise.Set(s.WithContext(context + ": reading " + what));
        }
      });
  return future;
}

namespace {

uint64_t SizeOf(const ReferenceStore::Reference& r) {
  return r.target == ReferenceStore::Reference::kInline ? r.data.size() : r.length;
}

}  // namespace

Status ReferenceStore::ListChunks(const std::string& field, std::vector<KeyInfo>* keys) {
  const Field& grid = fields_.find(field)->second;
  const uint64_t records = grid.num_chunks / record_size_ + (grid.num_chunks % record_size_ != 0);
  std::vector<uint64_t> index(grid.grid.size());
  for (uint64_t record = 0; record < records; ++record) {
    ZS_ASSIGN_OR_RETURN(std::shared_ptr<const Record> rows, LoadRecord(field, record));
    for (uint64_t r = 0; r < rows->rows.size(); ++r) {
      uint64_t number = record * record_size_ + r;
      if (number >= grid.num_chunks) break;
      const Reference& reference = rows->rows[r];
      if (reference.target == Reference::kMissing) continue;
      for (size_t d = grid.grid.size(); d-- > 0;) {
        index[d] = number % grid.grid[d];
        number /= grid.grid[d];
      }
      std::string key = field + "/";
      for (size_t d = 0; d < index.size(); ++d) {
        if (d > 0) key += '.';
        key += std::to_string(index[d]);
      }
      keys->push_back({key.substr(prefix_.size()), SizeOf(reference)});
    }
  }
  return Status::Ok();
}

Result<std::vector<KeyInfo>> ReferenceStore::List(std::string_view prefix) {
  const std::string dir = prefix_ + (prefix.empty() ? "" : std::string(prefix) + "/");
  std::vector<KeyInfo> keys;
  for (auto it = references_.lower_bound(dir); it != references_.end(); ++it) {
    if (it->first.compare(0, dir.size(), dir) != 0) break;
    keys.push_back({it->first.substr(prefix_.size()), SizeOf(it->second)});
  }
  // A Parquet set's chunks: every record file of the arrays below `prefix`.
  for (const auto& [field, grid] : fields_) {
    if ((field + "/").starts_with(dir)) {
      ZS_RETURN_IF_ERROR_CTX(ListChunks(field, &keys), "listing " + DescribeSet());
    }
  }
  return keys;
}

Result<DirectoryListing> ReferenceStore::ListDirectory(std::string_view prefix) {
  const std::string dir = prefix_ + (prefix.empty() ? "" : std::string(prefix) + "/");
  DirectoryListing listing;
  std::set<std::string> prefixes;
  for (auto it = references_.lower_bound(dir); it != references_.end(); ++it) {
    if (it->first.compare(0, dir.size(), dir) != 0) break;
    std::string_view rest = std::string_view(it->first).substr(dir.size());
    const size_t slash = rest.find('/');
    if (slash == std::string_view::npos) {
      listing.keys.push_back({it->first.substr(prefix_.size()), SizeOf(it->second)});
    } else {
      prefixes.insert(dir.substr(prefix_.size()) + std::string(rest.substr(0, slash)));
    }
  }
  if (!dir.empty()) {
    const std::string field = dir.substr(0, dir.size() - 1);
    if (fields_.contains(field)) {
      ZS_RETURN_IF_ERROR_CTX(ListChunks(field, &listing.keys), "listing " + DescribeSet());
    }
  }
  listing.prefixes.assign(prefixes.begin(), prefixes.end());
  return listing;
}

Status ReferenceStore::Put(std::string_view key, std::span<const std::byte> /*value*/) {
  return UnsupportedError("reference stores are read-only: cannot write key '" + std::string(key) +
                          "' of " + url_);
}

Status ReferenceStore::Delete(std::string_view key) {
  return UnsupportedError("reference stores are read-only: cannot delete key '" + std::string(key) +
                          "' of " + url_);
}

}  // namespace zarrstream
