#include "store/icechunk_store.h"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <ctime>
#include <filesystem>
#include <set>

#include "store/curl_transport.h"
#include "store/http_store.h"
#include "store/reference_store.h"
#include "store/store_registry.h"
#include "util/json_document.h"

namespace zarrstream {

namespace {

using icechunk::ChunkRef;
using icechunk::FileType;
using icechunk::ObjectId12;

constexpr std::string_view kDefaultBranch = "main";
constexpr std::string_view kRepoInfoKey = "repo";  // spec 2

std::string SpecOneBranchKey(std::string_view name) {
  return "refs/branch." + std::string(name) + "/ref.json";
}
std::string SpecOneTagKey(std::string_view name) {
  return "refs/tag." + std::string(name) + "/ref.json";
}

std::string_view AsText(const ByteBuffer& buffer) {
  return {reinterpret_cast<const char*>(buffer.data()), buffer.size()};
}

std::string FormatTime(uint64_t microseconds) {
  const std::time_t seconds = static_cast<std::time_t>(microseconds / 1'000'000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &tm);
  return std::string(text) + "Z";
}

// The snapshot id a spec 1 ref file names.
Result<ObjectId12> ParseRefFile(const ByteBuffer& bytes, const std::string& what) {
  ZS_ASSIGN_OR_RETURN(nlohmann::json document, ParseJsonDocument(AsText(bytes), what));
  auto it = document.find("snapshot");
  if (!document.is_object() || it == document.end() || !it->is_string()) {
    return MetadataError(what + ": expected {\"snapshot\": \"<id>\"}, got " + document.dump());
  }
  std::optional<std::vector<uint8_t>> id =
      icechunk::DecodeObjectId(it->get_ref<const std::string&>(), 12);
  if (!id) return MetadataError(what + ": '" + it->get<std::string>() + "' is no snapshot id");
  ObjectId12 out;
  std::copy(id->begin(), id->end(), out.begin());
  return out;
}

// The url_prefix of each virtual chunk container of a spec 1 config.yaml.
Result<std::vector<std::string>> VirtualPrefixesOfConfig(std::string_view text,
                                                         const std::string& what) {
  std::vector<std::string> prefixes;
  try {
    const YAML::Node config = YAML::Load(std::string(text));
    if (!config.IsMap()) return MetadataError(what + ": not a YAML mapping");
    const YAML::Node containers = config["virtual_chunk_containers"];
    if (!containers || containers.IsNull()) return prefixes;
    if (!containers.IsMap()) {
      return MetadataError(what + ": virtual_chunk_containers is not a mapping");
    }
    for (const auto& entry : containers) {
      const YAML::Node prefix = entry.second["url_prefix"];
      if (!prefix || !prefix.IsScalar()) {
        return MetadataError(what + ": virtual chunk container '" + entry.first.as<std::string>() +
                             "' has no url_prefix");
      }
      prefixes.push_back(prefix.as<std::string>());
    }
  } catch (const YAML::Exception& e) {
    return MetadataError(what + ": " + e.what());
  }
  return prefixes;
}

// Parses the coordinates of a chunk key's tail ("0/3/1").
std::optional<std::vector<uint32_t>> ParseCoordinates(std::string_view text) {
  std::vector<uint32_t> index;
  if (text.empty()) return index;
  size_t start = 0;
  while (true) {
    const size_t slash = text.find('/', start);
    const std::string_view part = text.substr(start, slash - start);
    uint32_t value = 0;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (part.empty() || ec != std::errc() || ptr != part.data() + part.size()) return std::nullopt;
    index.push_back(value);
    if (slash == std::string_view::npos) return index;
    start = slash + 1;
  }
}

std::string IndexKey(std::string_view prefix, std::span<const uint32_t> index) {
  std::string key = prefix.empty() ? "c" : std::string(prefix) + "/c";
  for (uint32_t i : index) key += "/" + std::to_string(i);
  return key;
}

}  // namespace

Result<bool> IcechunkStore::IsRepository(Store& store) {
  ZS_ASSIGN_OR_RETURN(std::optional<ByteBuffer> main,
                      store.ReadIfExists(SpecOneBranchKey(kDefaultBranch)));
  if (main) return true;
  // Spec 2's repo info is a binary file: its magic tells it from a Zarr key named "repo".
  ZS_ASSIGN_OR_RETURN(std::optional<ByteBuffer> repo, store.ReadIfExists(kRepoInfoKey));
  return repo && repo->size() >= icechunk::kHeaderSize &&
         AsText(*repo).starts_with("ICE\xF0\x9F\xA7\x8A");
}

Result<std::shared_ptr<IcechunkStore>> IcechunkStore::Open(const std::shared_ptr<Store>& repository,
                                                           std::string_view ref) {
  std::shared_ptr<IcechunkStore> store(new IcechunkStore());
  store->repository_ = repository;
  const std::string& url = repository->url();
  store->info_.ref = ref.empty() ? std::string(kDefaultBranch) : std::string(ref);
  const std::string& name = store->info_.ref;
  const std::string in_repository = "Icechunk repository " + url;
  if (name.find('/') != std::string::npos || name.find('\0') != std::string::npos) {
    return InvalidArgumentError("'" + EscapeNul(name) + "' is no branch, tag or snapshot id of " +
                                in_repository + " (ref names have no '/')");
  }

  ObjectId12 snapshot_id{};
  ZS_ASSIGN_OR_RETURN(std::optional<ByteBuffer> repo_info, repository->ReadIfExists(kRepoInfoKey));
  const bool spec_two = repo_info && AsText(*repo_info).starts_with("ICE\xF0\x9F\xA7\x8A");
  if (spec_two) {
    const std::string what = "the repo info file of " + in_repository;
    ZS_ASSIGN_OR_RETURN(icechunk::DecodedFile file,
                        icechunk::DecodeFile(repo_info->span(), FileType::kRepoInfo, what));
    ZS_ASSIGN_OR_RETURN(icechunk::RepoInfo info,
                        icechunk::ParseRepoInfo(file.flatbuffer, file.spec_version, what));
    auto find = [&](const std::vector<icechunk::RepoInfo::NamedSnapshot>& refs)
        -> const icechunk::RepoInfo::NamedSnapshot* {
      for (const auto& r : refs) {
        if (r.name == name) return &r;
      }
      return nullptr;
    };
    const bool tag_deleted = std::find(info.deleted_tags.begin(), info.deleted_tags.end(), name) !=
                             info.deleted_tags.end();
    if (const auto* branch = find(info.branches)) {
      store->info_.ref_kind = "branch";
      snapshot_id = branch->snapshot;
    } else if (const auto* tag = tag_deleted ? nullptr : find(info.tags)) {
      store->info_.ref_kind = "tag";
      snapshot_id = tag->snapshot;
    } else if (auto id = icechunk::DecodeObjectId(name, 12)) {
      store->info_.ref_kind = "snapshot";
      std::copy(id->begin(), id->end(), snapshot_id.begin());
    } else {
      std::string known;
      for (const auto& b : info.branches) known += (known.empty() ? "" : ", ") + b.name;
      std::string tags;
      for (const auto& t : info.tags) tags += (tags.empty() ? "" : ", ") + t.name;
      return NotFoundError("no branch, tag or snapshot '" + name + "' in " + in_repository +
                           (tag_deleted ? " (the tag was deleted)" : "") + " (branches: " + known +
                           "; tags: " + (tags.empty() ? "none" : tags) + ")");
    }
    for (const auto& [child, parent] : info.parents) {
      if (child == snapshot_id && parent)
        store->info_.parent_id = icechunk::EncodeObjectId(*parent);
    }
    store->virtual_prefixes_ = std::move(info.virtual_prefixes);
  } else {
    ZS_ASSIGN_OR_RETURN(std::optional<ByteBuffer> branch,
                        repository->ReadIfExists(SpecOneBranchKey(name)));
    std::optional<ByteBuffer> tag;
    if (!branch) {
      ZS_ASSIGN_OR_RETURN(tag, repository->ReadIfExists(SpecOneTagKey(name)));
      if (tag) {
        ZS_ASSIGN_OR_RETURN(std::optional<ByteBuffer> tombstone,
                            repository->ReadIfExists(SpecOneTagKey(name) + ".deleted"));
        if (tombstone) {
          return NotFoundError("tag '" + name + "' of " + in_repository + " was deleted");
        }
      }
    }
    if (branch || tag) {
      store->info_.ref_kind = branch ? "branch" : "tag";
      const std::string key = branch ? SpecOneBranchKey(name) : SpecOneTagKey(name);
      ZS_ASSIGN_OR_RETURN(snapshot_id,
                          ParseRefFile(branch ? *branch : *tag, key + " of " + in_repository));
    } else if (auto id = icechunk::DecodeObjectId(name, 12)) {
      store->info_.ref_kind = "snapshot";
      std::copy(id->begin(), id->end(), snapshot_id.begin());
    } else {
      std::string known;
      if (Result<DirectoryListing> refs = repository->ListDirectory("refs"); refs.ok()) {
        for (const std::string& p : refs->prefixes) {
          std::string_view entry = std::string_view(p).substr(p.rfind('/') + 1);
          if (entry.starts_with("branch.") || entry.starts_with("tag.")) {
            known += (known.empty() ? "" : ", ") + std::string(entry);
          }
        }
      }
      bool has_main = name == kDefaultBranch;
      if (!has_main) {
        Result<std::optional<ByteBuffer>> main =
            repository->ReadIfExists(SpecOneBranchKey(kDefaultBranch));
        has_main = main.ok() && main->has_value();
      }
      return NotFoundError("no branch, tag or snapshot '" + name + "' in " +
                           (has_main ? in_repository
                                     : url + " (no Icechunk repository there: it has no " +
                                           SpecOneBranchKey(kDefaultBranch) + " nor repo file)") +
                           (known.empty() ? "" : " (refs: " + known + ")"));
    }
    ZS_ASSIGN_OR_RETURN(std::optional<ByteBuffer> config, repository->ReadIfExists("config.yaml"));
    if (config) {
      ZS_ASSIGN_OR_RETURN(
          store->virtual_prefixes_,
          VirtualPrefixesOfConfig(AsText(*config), "config.yaml of " + in_repository));
    }
  }

  store->info_.id = icechunk::EncodeObjectId(snapshot_id);
  const std::string snapshot_what = "snapshot " + store->info_.id + " of " + in_repository;
  Result<ByteBuffer> bytes = repository->ReadAll("snapshots/" + store->info_.id);
  if (!bytes.ok()) {
    if (bytes.status().code() == ErrorCode::kNotFound) {
      return NotFoundError(snapshot_what + " (" + store->info_.ref_kind + " '" + name +
                           "') does not exist");
    }
    return bytes.status().WithContext("reading " + snapshot_what);
  }
  ZS_ASSIGN_OR_RETURN(icechunk::DecodedFile file,
                      icechunk::DecodeFile(bytes->span(), FileType::kSnapshot, snapshot_what));
  ZS_ASSIGN_OR_RETURN(store->snapshot_,
                      icechunk::ParseSnapshot(file.flatbuffer, file.spec_version, snapshot_what));
  if (store->snapshot_.id != snapshot_id) {
    return CorruptChunkError(snapshot_what + ": the file holds snapshot " +
                             icechunk::EncodeObjectId(store->snapshot_.id));
  }
  store->info_.spec_version = file.spec_version;
  store->info_.flushed_at_us = store->snapshot_.flushed_at_us;
  store->info_.message = store->snapshot_.message;
  if (store->snapshot_.parent_id) {
    store->info_.parent_id = icechunk::EncodeObjectId(*store->snapshot_.parent_id);
  }
  for (const icechunk::Node& node : store->snapshot_.nodes) {
    if (node.path.empty() || node.path.front() != '/') {
      return CorruptChunkError(snapshot_what + ": node path '" + node.path + "' is not absolute");
    }
    std::string prefix = node.path.substr(1);
    if (!prefix.empty()) ZS_RETURN_IF_ERROR_CTX(ValidateKey(prefix), snapshot_what);
    store->nodes_.emplace(std::move(prefix), &node);
  }
  // The repository's URL, so that it opens again (with the same ref) where a URL is handed on.
  store->url_ = url;
  return store;
}

bool IcechunkStore::is_remote() const {
  if (IsRemoteStore(*repository_)) return true;
  return std::any_of(virtual_prefixes_.begin(), virtual_prefixes_.end(),
                     [](const std::string& prefix) { return !prefix.starts_with("file://"); });
}

std::string IcechunkStore::Describe() const {
  std::string out = "Icechunk repository " + repository_->url();
  if (info_.ref_kind == "snapshot") return out + " at snapshot " + info_.id;
  return out + " at " + info_.ref_kind + " '" + info_.ref + "' (snapshot " + info_.id + ")";
}

Result<std::shared_ptr<const icechunk::Manifest>> IcechunkStore::GetManifest(const ObjectId12& id) {
  {
    std::lock_guard lock(mu_);
    if (auto it = manifests_.find(id); it != manifests_.end()) return it->second;
  }
  const std::string name = icechunk::EncodeObjectId(id);
  const std::string what = "manifest " + name + " of " + Describe();
  Result<ByteBuffer> bytes = repository_->ReadAll("manifests/" + name);
  if (!bytes.ok()) {
    if (bytes.status().code() == ErrorCode::kNotFound) {
      return StorageError(what + " does not exist (the snapshot refers to it)");
    }
    return bytes.status().WithContext("reading " + what);
  }
  ZS_ASSIGN_OR_RETURN(icechunk::DecodedFile file,
                      icechunk::DecodeFile(bytes->span(), FileType::kManifest, what));
  ZS_ASSIGN_OR_RETURN(
      std::shared_ptr<const icechunk::Manifest> manifest,
      icechunk::Manifest::Parse(std::move(file.flatbuffer), file.spec_version, what));
  if (manifest->id() != id) {
    return CorruptChunkError(what + ": the file holds manifest " +
                             icechunk::EncodeObjectId(manifest->id()));
  }
  std::lock_guard lock(mu_);
  return manifests_.emplace(id, std::move(manifest)).first->second;
}

Result<std::optional<ChunkRef>> IcechunkStore::FindChunk(const icechunk::Node& node,
                                                         std::span<const uint32_t> index,
                                                         std::shared_ptr<const void>* keep_alive) {
  for (const icechunk::ManifestRef& ref : node.manifests) {
    bool inside = ref.extents.size() == index.size();
    for (size_t d = 0; inside && d < index.size(); ++d) {
      inside = ref.extents[d].first <= index[d] && index[d] < ref.extents[d].second;
    }
    if (!inside) continue;
    ZS_ASSIGN_OR_RETURN(std::shared_ptr<const icechunk::Manifest> manifest, GetManifest(ref.id));
    ZS_ASSIGN_OR_RETURN(std::optional<ChunkRef> chunk, manifest->Find(node.id, index));
    if (chunk) {
      *keep_alive = manifest;
      return chunk;
    }
  }
  return std::optional<ChunkRef>();
}

Future<uint64_t> IcechunkStore::Read(std::string_view key, std::span<const ByteRange> ranges,
                                     std::span<ByteBuffer> outs) {
  using R = Future<uint64_t>;
  if (ranges.size() != outs.size()) {
    return R::Ready(InternalError("IcechunkStore::Read: ranges/outs mismatch"));
  }
  if (Status s = ValidateKey(key); !s.ok()) return R::Ready(std::move(s));
  const std::string context = "key '" + std::string(key) + "' of " + Describe();
  // Metadata: the node's zarr.json.
  if (key == "zarr.json" || key.ends_with("/zarr.json")) {
    const std::string_view prefix =
        key == "zarr.json" ? std::string_view() : key.substr(0, key.size() - 10);
    auto it = nodes_.find(prefix);
    if (it == nodes_.end()) {
      return R::Ready(
          NotFoundError("no group or array '" + std::string(prefix) + "' in " + Describe()));
    }
    return R::Ready(
        ReadInlineBytes(std::as_bytes(std::span(it->second->user_data)), ranges, outs, context));
  }
  // A chunk: "<array>/c/<i>/<j>...". The array's path may itself hold a segment "c": try each.
  const icechunk::Node* node = nullptr;
  std::vector<uint32_t> index;
  for (size_t pos = 0; pos != std::string_view::npos;) {
    const bool segment = (pos == 0 || key[pos - 1] == '/') && key.substr(pos).starts_with("c") &&
                         (pos + 1 == key.size() || key[pos + 1] == '/');
    if (segment) {
      const std::string_view prefix = key.substr(0, pos == 0 ? 0 : pos - 1);
      auto it = nodes_.find(prefix);
      if (it != nodes_.end() && it->second->is_array) {
        std::optional<std::vector<uint32_t>> coordinates =
            ParseCoordinates(pos + 1 >= key.size() ? "" : key.substr(pos + 2));
        if (coordinates && coordinates->size() == it->second->shape.size()) {
          node = it->second;
          index = std::move(*coordinates);
          break;
        }
      }
    }
    pos = key.find('c', pos + 1);
  }
  if (node == nullptr) return R::Ready(NotFoundError("no such key in " + context));
  std::shared_ptr<const void> manifest;
  Result<std::optional<ChunkRef>> found = FindChunk(*node, index, &manifest);
  if (!found.ok()) return R::Ready(found.status().WithContext("reading " + context));
  if (!found->has_value()) {
    return R::Ready(
        NotFoundError("chunk '" + std::string(key) + "' is not stored in " + Describe()));
  }
  const ChunkRef& ref = **found;
  switch (ref.kind) {
    case ChunkRef::Kind::kInline:
      return R::Ready(ReadInlineBytes(std::as_bytes(ref.inline_data), ranges, outs, context));
    case ChunkRef::Kind::kNative: {
      const std::string chunk = "chunks/" + icechunk::EncodeObjectId(ref.chunk_id);
      std::string what = "bytes " + std::to_string(ref.offset) + ".." +
                         std::to_string(ref.offset + ref.length) + " of " + chunk;
      return ReadReferencedBytes(repository_, chunk, false, ref.offset, ref.length, ranges, outs,
                                 context, std::move(what));
    }
    case ChunkRef::Kind::kVirtual:
      return ReadVirtual(ref, ranges, outs, context);
  }
  return R::Ready(InternalError("unknown chunk reference kind"));
}

Future<uint64_t> IcechunkStore::ReadVirtual(const ChunkRef& ref, std::span<const ByteRange> ranges,
                                            std::span<ByteBuffer> outs,
                                            const std::string& context) {
  using R = Future<uint64_t>;
  const std::string& location = ref.location;
  const std::string what = "virtual chunk reference to " + RedactUrl(location);
  // Locations are compared as text with the containers' prefixes: one that steps out of a
  // directory could pass the comparison and read elsewhere.
  if (location.find("/../") != std::string::npos || location.find("/./") != std::string::npos ||
      location.ends_with("/..") || location.find('?') != std::string::npos ||
      location.find('#') != std::string::npos) {
    return R::Ready(UnsupportedError(context + ": " + what +
                                     " has '.', '..', a query or a fragment in its path"));
  }
  bool allowed = false;
  for (const std::string& prefix : virtual_prefixes_) {
    allowed = allowed || location.starts_with(prefix);
  }
  if (!allowed) {
    std::string prefixes;
    for (const std::string& p : virtual_prefixes_) prefixes += (prefixes.empty() ? "" : ", ") + p;
    return R::Ready(InvalidArgumentError(
        context + ": " + what + ", which no virtual chunk container of the repository allows (" +
        (prefixes.empty() ? "it has none" : "their url_prefix: " + prefixes) +
        "); add a container for it to the repository's configuration"));
  }
  if (!ref.checksum_etag.empty()) {
    return R::Ready(UnsupportedError(context + ": " + what + " is checked by the ETag '" +
                                     ref.checksum_etag +
                                     "', which zarrstream cannot verify, so it does not read it"));
  }
  auto [scheme, rest] = SplitScheme(location);
  if (ref.checksum_last_modified != 0) {
    if (scheme != "file") {
      return R::Ready(
          UnsupportedError(context + ": " + what +
                           " is checked by its last-modified time, which zarrstream "
                           "verifies only for file:// locations, so it does not read it"));
    }
    struct stat st {};
    if (::stat(std::string(rest).c_str(), &st) != 0) {
      return R::Ready(StorageError(context + ": " + what + ", which does not exist"));
    }
    if (static_cast<uint64_t>(st.st_mtime) > ref.checksum_last_modified) {
      return R::Ready(StorageError(context + ": " + what + " was modified (at " +
                                   FormatTime(uint64_t(st.st_mtime) * 1'000'000) +
                                   ") after the reference was written (" +
                                   FormatTime(uint64_t(ref.checksum_last_modified) * 1'000'000) +
                                   "): its bytes may have moved"));
    }
  }
  Result<std::pair<std::string, std::string>> split = SplitFileUrl(location);
  if (!split.ok()) return R::Ready(split.status().WithContext(context + ": " + what));
  std::shared_ptr<Store> target;
  {
    std::lock_guard lock(mu_);
    target = virtual_stores_[split->first];
  }
  if (target == nullptr) {
    Result<std::shared_ptr<Store>> opened = OpenStore(split->first);
    if (!opened.ok()) {
      return R::Ready(opened.status().WithContext(context + ": opening the store of " + what));
    }
    std::lock_guard lock(mu_);
    std::shared_ptr<Store>& slot = virtual_stores_[split->first];
    if (slot == nullptr) slot = *opened;
    target = slot;
  }
  std::string range = "bytes " + std::to_string(ref.offset) + ".." +
                      std::to_string(ref.offset + ref.length) + " of " + RedactUrl(location);
  return ReadReferencedBytes(target, split->second, false, ref.offset, ref.length, ranges, outs,
                             context, std::move(range));
}

Result<std::vector<KeyInfo>> IcechunkStore::List(std::string_view prefix) {
  const std::string dir = prefix.empty() ? "" : std::string(prefix) + "/";
  std::vector<KeyInfo> keys;
  for (const auto& [path, node] : nodes_) {
    const std::string node_dir = path.empty() ? "" : path + "/";
    if (!node_dir.starts_with(dir)) continue;
    keys.push_back({node_dir + "zarr.json", node->user_data.size()});
    if (!node->is_array) continue;
    std::set<std::string> seen;
    const std::string& node_path = path;  // clang before 16 cannot capture a structured binding
    for (const icechunk::ManifestRef& ref : node->manifests) {
      ZS_ASSIGN_OR_RETURN(std::shared_ptr<const icechunk::Manifest> manifest, GetManifest(ref.id));
      ZS_RETURN_IF_ERROR(
          manifest->ForEach(node->id, [&](std::span<const uint32_t> index, const ChunkRef& chunk) {
            std::string key = IndexKey(node_path, index);
            if (!key.starts_with(dir) || !seen.insert(key).second) return;
            const uint64_t size =
                chunk.kind == ChunkRef::Kind::kInline ? chunk.inline_data.size() : chunk.length;
            keys.push_back({std::move(key), size});
          }));
    }
  }
  return keys;
}

Result<DirectoryListing> IcechunkStore::ListDirectory(std::string_view prefix) {
  const std::string dir = prefix.empty() ? "" : std::string(prefix) + "/";
  DirectoryListing listing;
  std::set<std::string> prefixes;
  if (auto it = nodes_.find(prefix); it != nodes_.end()) {
    listing.keys.push_back({dir + "zarr.json", it->second->user_data.size()});
    if (it->second->is_array && !it->second->manifests.empty()) prefixes.insert(dir + "c");
  }
  for (const auto& [path, node] : nodes_) {
    if (path.empty() || !path.starts_with(dir)) continue;
    const std::string_view rest = std::string_view(path).substr(dir.size());
    if (rest.empty()) continue;
    prefixes.insert(dir + std::string(rest.substr(0, rest.find('/'))));
  }
  listing.prefixes.assign(prefixes.begin(), prefixes.end());
  return listing;
}

Status IcechunkStore::Put(std::string_view key, std::span<const std::byte> /*value*/) {
  return UnsupportedError("Icechunk repositories are read-only here: cannot write key '" +
                          std::string(key) + "' of " + Describe());
}

Status IcechunkStore::Delete(std::string_view key) {
  return UnsupportedError("Icechunk repositories are read-only here: cannot delete key '" +
                          std::string(key) + "' of " + Describe());
}

}  // namespace zarrstream
