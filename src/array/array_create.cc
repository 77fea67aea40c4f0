// Creating Zarr v3 arrays and groups (their zarr.json documents), replacing an array's attributes,
// and consolidating a group's metadata inline. Region writes are in array_write.cc.
//
// Metadata is validated and the codec chain prepared before anything is written, so a bad spec
// leaves the store untouched. Replacing a node (CreateOptions::overwrite) removes every key below
// it first, as zarr-python's mode "w" does: stale chunks of an old array must never be read as
// chunks of the new one.
//
// An array's folder holds its chunks ("c/0/1", "0.1", "0/1"), so no node may be made inside an
// array at any depth: the new node's keys would be the array's chunk keys, and replacing it would
// delete them. Every ancestor of the new node is checked (v3 and v2) up to the group it is made
// in, and for a node made at a URL, the folders above the store root (local and object stores).
// An array is also refused over keys that are no node's metadata (an implicit group's members,
// stray files) unless overwrite is passed: they would read as chunks.
#include <array>

#include "array/array_state.h"
#include "array/node_metadata_io.h"
#include "codec/codec_chain.h"
#include "codec/compressor_spec.h"
// For the same grid and depth limits the parsers apply to stored metadata.
#include "metadata/metadata_parsing.h"
#include "metadata/v3_metadata.h"
#include "store/store_registry.h"
#include "util/format.h"

namespace zarrstream {
namespace {

using nlohmann::json;

// The documents that make a path a Zarr node (v3, or v2 array / group).
constexpr std::array<std::string_view, 3> kNodeDocuments = {"zarr.json", ".zarray", ".zgroup"};
// Everything a node may keep beside its chunks; removed on overwrite when the store cannot list.
constexpr std::array<std::string_view, 5> kMetadataDocuments = {"zarr.json", ".zarray", ".zgroup",
                                                                ".zattrs", ".zmetadata"};

std::string CreatingWhat(std::string_view kind, const std::string& url) {
  std::string context = "creating ";
  context += kind;
  context += " at ";
  context += url;
  return context;
}

// Parses caller-supplied JSON (`what` names it in errors).
Result<json> ParseCallerJson(std::string_view text, std::string_view what) {
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    std::string message(what);
    message += " is not valid JSON: '";
    message += text.substr(0, 200);
    message += "'";
    return InvalidArgumentError(std::move(message));
  }
  return value;
}

Result<json> ParseAttributesJson(std::string_view text) {
  ZS_ASSIGN_OR_RETURN(json attributes, ParseCallerJson(text, "attributes"));
  if (!attributes.is_object()) return InvalidArgumentError("attributes must be a JSON object");
  return attributes;
}

// Checks one extent list against the array's rank: same rank, no zero extent.
Status CheckExtents(std::span<const uint64_t> extents, std::string_view name, size_t rank) {
  if (extents.size() != rank) {
    std::string message(name);
    message += " ";
    message += FormatIndex(extents);
    message += " has ";
    message += std::to_string(extents.size());
    message += " dimensions, the shape ";
    message += std::to_string(rank);
    return InvalidArgumentError(std::move(message));
  }
  for (size_t d = 0; d < rank; ++d) {
    if (extents[d] == 0) {
      std::string message(name);
      message += " ";
      message += FormatIndex(extents);
      message += " is zero in dimension ";
      message += std::to_string(d);
      return InvalidArgumentError(std::move(message));
    }
  }
  return Status::Ok();
}

// The v3 metadata `spec` describes. Errors are kInvalidArgument (the caller's spec is wrong).
Result<ArrayMetadata> MetadataForSpec(const ArraySpec& spec) {
  const size_t rank = spec.shape.size();
  ArrayMetadata metadata;
  metadata.zarr_format = 3;
  metadata.shape = spec.shape;
  metadata.data_type = spec.dtype;
  ZS_RETURN_IF_ERROR(CheckExtents(spec.chunks, "chunks", rank));
  metadata.chunk_shape = spec.chunks;
  if (spec.shard_shape) {
    ZS_RETURN_IF_ERROR(CheckExtents(*spec.shard_shape, "shard shape", rank));
    for (size_t d = 0; d < rank; ++d) {
      if ((*spec.shard_shape)[d] % spec.chunks[d] != 0) {
        std::string message = "shard shape ";
        message += FormatIndex(*spec.shard_shape);
        message += " is not a multiple of the chunks ";
        message += FormatIndex(spec.chunks);
        message += " in dimension ";
        message += std::to_string(d);
        return InvalidArgumentError(std::move(message));
      }
    }
    metadata.chunk_shape = *spec.shard_shape;
  }
  Status grid = ValidateRegularGrid(metadata.shape, metadata.chunk_shape, metadata.data_type,
                                    "shape", spec.shard_shape ? "shard shape" : "chunks");
  if (!grid.ok()) return InvalidArgumentError(grid.message());

  if (!spec.dims.empty() && spec.dims.size() != rank) {
    return InvalidArgumentError(std::to_string(spec.dims.size()) +
                                " dimension names for an array of " + std::to_string(rank) +
                                " dimensions");
  }
  metadata.dimension_names = spec.dims;

  const std::string_view compressor = spec.compressor;
  const size_t first = compressor.find_first_not_of(" \t\r\n");
  const bool codecs_list = first != std::string_view::npos && compressor[first] == '[';
  if (codecs_list) {
    if (spec.shard_shape) {
      return InvalidArgumentError(
          "a codecs JSON list replaces the whole chain: leave the shard shape unset and put "
          "sharding_indexed in the list");
    }
    ZS_ASSIGN_OR_RETURN(json codecs, ParseCallerJson(compressor, "codecs"));
    Result<std::vector<CodecSpec>> parsed = ParseV3Codecs(codecs, "codecs");
    if (!parsed.ok()) return InvalidArgumentError(parsed.status().message());
    metadata.codecs = std::move(parsed).value();
  } else if (spec.shard_shape) {
    ZS_ASSIGN_OR_RETURN(
        metadata.codecs,
        MakeCodecChainSpecs(compressor, spec.dtype, std::span<const uint64_t>(spec.chunks)));
  } else {
    ZS_ASSIGN_OR_RETURN(metadata.codecs, MakeCodecChainSpecs(compressor, spec.dtype));
  }

  ZS_ASSIGN_OR_RETURN(json fill_value, ParseCallerJson(spec.fill_value_json, "fill_value"));
  if (fill_value.is_null()) {
    metadata.fill_value.assign(DataTypeSize(spec.dtype), std::byte{0});
  } else {
    Result<std::vector<std::byte>> bytes = ParseV3FillValue(fill_value, spec.dtype);
    if (!bytes.ok()) return InvalidArgumentError(bytes.status().message());
    metadata.fill_value = std::move(bytes).value();
  }
  ZS_ASSIGN_OR_RETURN(metadata.attributes, ParseAttributesJson(spec.attributes_json));
  if (codecs_list) {
    // Store the chain as the codecs understood it, every configuration complete ({"name": "zstd"}
    // becomes level 0, checksum false): other readers (zarr-python) insist on configurations.
    ChunkRepresentation chunk{metadata.data_type, metadata.chunk_shape, metadata.fill_value};
    Result<std::shared_ptr<const CodecChain>> chain = CodecChain::Make(metadata.codecs, chunk);
    if (!chain.ok()) return InvalidArgumentError(chain.status().message());
    Result<std::vector<CodecSpec>> complete = ParseV3Codecs((*chain)->ToJson(), "codecs");
    if (!complete.ok()) return InternalError(complete.status().message());
    metadata.codecs = std::move(complete).value();
  }
  return metadata;
}

enum class NodeKind { kArray, kGroup };

// The error for a node to be made inside the array at `array_url`.
Status InsideArrayError(const std::string& array_url) {
  return InvalidArgumentError(array_url +
                              " is an array: no node can be made inside it (its chunks live "
                              "there, and replacing the node would delete them)");
}

// Refuses to make a node at `path` when an ancestor of it strictly below `known_path` (the group
// it is made in, known to be a group; "" with `path` "" for a node at a store root) is an array.
Status CheckNoArrayAbove(Store& store, std::string_view known_path, std::string_view path) {
  for (size_t slash = path.find('/', known_path.empty() ? 0 : known_path.size() + 1);
       slash != std::string_view::npos; slash = path.find('/', slash + 1)) {
    const std::string_view ancestor = path.substr(0, slash);
    ZS_ASSIGN_OR_RETURN(bool is_array, IsArrayNode(store, ancestor));
    if (is_array) return InsideArrayError(NodeUrl(store, ancestor));
  }
  return Status::Ok();
}

// The same for the folders above a store's root: a node made at "data/t/c" must not land in the
// chunks of an array at "data/t". Checked for local and object stores (memory store names are not
// paths; HTTP stores are read-only). A folder that cannot be read cannot be told apart and is
// passed over: credentials scoped to a prefix may not read the levels above it.
Status CheckNoArrayAboveRoot(const Store& store) {
  auto [scheme, rest] = SplitScheme(store.url());
  if (scheme != "file" && scheme != "s3" && scheme != "gs") return Status::Ok();
  for (size_t slash = rest.rfind('/'); slash != std::string_view::npos && slash > 0;
       slash = rest.rfind('/', slash - 1)) {
    std::string parent_url(scheme);
    parent_url += "://";
    parent_url += rest.substr(0, slash);
    Result<std::shared_ptr<Store>> parent = OpenStore(parent_url);
    if (!parent.ok()) continue;
    Result<bool> is_array = IsArrayNode(**parent, "");
    if (is_array.ok() && *is_array) return InsideArrayError(parent_url);
  }
  return Status::Ok();
}

// Makes `path` ready for a new node: an existing node is an error unless `overwrite`, which
// removes the node and every key below it (and nothing else). Without `overwrite`, an array is
// also refused over any keys below `path`, which it would read as chunks.
Status ClearNodePath(Store& store, const std::string& path, NodeKind kind, bool overwrite,
                     ThreadPool* pool) {
  for (std::string_view document : kNodeDocuments) {
    const std::string key = JoinKey(path, document);
    ZS_ASSIGN_OR_RETURN(auto existing, store.ReadIfExists(key));
    if (!existing) continue;
    if (!overwrite) {
      std::string message = "a Zarr node already exists there (";
      message += key;
      message += "); pass overwrite to replace it";
      return InvalidArgumentError(std::move(message));
    }
    break;
  }
  if (!overwrite) {
    if (kind == NodeKind::kGroup) return Status::Ok();  // members below become its members
    Result<DirectoryListing> below = store.ListDirectory(path);
    if (below.status().code() == ErrorCode::kUnsupported) return Status::Ok();
    ZS_RETURN_IF_ERROR_CTX(below.status(), "listing what is below the new array");
    // Names starting with '.' are never chunk keys (a tool's state beside the node, such as an
    // interrupted rechunk's; v2 documents): only the others would be read as chunks.
    auto hidden = [](std::string_view key) { return key[key.rfind('/') + 1] == '.'; };
    std::string first;
    for (const std::string& prefix : below->prefixes) {
      if (first.empty() && !hidden(prefix)) first = prefix;
    }
    for (const KeyInfo& key : below->keys) {
      if (first.empty() && !hidden(key.key)) first = key.key;
    }
    if (!first.empty()) {
      return InvalidArgumentError(
          "there are keys below it already (" + first +
          ": members of a group, or other data), which the array would read as its chunks; "
          "pass overwrite to replace them");
    }
    return Status::Ok();
  }
  Result<std::vector<KeyInfo>> keys = store.List(path);
  if (keys.status().code() == ErrorCode::kUnsupported) {
    // A store that cannot list (plain HTTP) keeps its stale chunks; the metadata goes.
    for (std::string_view document : kMetadataDocuments) {
      ZS_RETURN_IF_ERROR(store.Delete(JoinKey(path, document)));
    }
    return Status::Ok();
  }
  ZS_RETURN_IF_ERROR_CTX(keys.status(), "listing the keys of the node to replace");
  const std::vector<KeyInfo>& stale = *keys;
  return ParallelFor(pool, stale.size(),
                     [&](size_t i) -> Status { return store.Delete(stale[i].key); });
}

Status PutDocument(Store& store, const std::string& path, const json& document) {
  const std::string text = document.dump(2);
  return store.Put(JoinKey(path, "zarr.json"),
                   std::as_bytes(std::span<const char>(text.data(), text.size())));
}

// Creates the array at `path` of `store`, in the group at `known_path` ("" with `path` "" for the
// store's root).
Result<std::shared_ptr<const internal::ArrayState>> CreateArrayAt(
    std::shared_ptr<Store> store, std::string_view known_path, std::string path,
    const ArraySpec& spec, const CreateOptions& create, std::shared_ptr<ThreadPool> pool,
    const OpenOptions& options) {
  const std::string context = CreatingWhat("array", NodeUrl(*store, path));
  ZS_ASSIGN_OR_RETURN_CTX(ArrayMetadata metadata, MetadataForSpec(spec), context);
  // Preparing the codec chain checks every codec's configuration before anything is written.
  ZS_ASSIGN_OR_RETURN_CTX(auto state,
                          internal::MakeArrayState(std::move(store), std::move(path),
                                                   std::move(metadata), std::move(pool), options),
                          context);
  Store& target = *state->store;
  ZS_RETURN_IF_ERROR_CTX(CheckNoArrayAbove(target, known_path, state->path), context);
  if (state->path.empty()) ZS_RETURN_IF_ERROR_CTX(CheckNoArrayAboveRoot(target), context);
  ZS_RETURN_IF_ERROR_CTX(
      ClearNodePath(target, state->path, NodeKind::kArray, create.overwrite, state->pool.get()),
      context);
  ZS_RETURN_IF_ERROR_CTX(PutDocument(target, state->path, ArrayMetadataToV3Json(state->metadata)),
                         context);
  return state;
}

Result<std::shared_ptr<const internal::GroupState>> CreateGroupAt(
    std::shared_ptr<Store> store, std::string_view known_path, std::string path,
    std::string_view attributes_json, const CreateOptions& create, std::shared_ptr<ThreadPool> pool,
    const OpenOptions& options) {
  const std::string context = CreatingWhat("group", NodeUrl(*store, path));
  GroupMetadata metadata;
  ZS_ASSIGN_OR_RETURN_CTX(metadata.attributes, ParseAttributesJson(attributes_json), context);
  ZS_RETURN_IF_ERROR_CTX(CheckNoArrayAbove(*store, known_path, path), context);
  if (path.empty()) ZS_RETURN_IF_ERROR_CTX(CheckNoArrayAboveRoot(*store), context);
  ZS_RETURN_IF_ERROR_CTX(
      ClearNodePath(*store, path, NodeKind::kGroup, create.overwrite, pool.get()), context);
  ZS_RETURN_IF_ERROR_CTX(PutDocument(*store, path, GroupMetadataToV3Json(metadata)), context);
  return internal::MakeGroupState(std::move(store), std::move(path), std::move(metadata),
                                  std::move(pool), options);
}

// Adds the v3 nodes below the group at `group_path` to `nodes`, keyed relative to `root_path`.
// Descends into groups only: an array's folder holds chunks, not nodes. Folders without zarr.json
// (zarr v3 has no implicit groups) and v2 nodes are not members of a v3 hierarchy.
Status CollectMembers(Store& store, const std::string& root_path, const std::string& group_path,
                      int depth, ConsolidatedMetadata* nodes) {
  ZS_ASSIGN_OR_RETURN_CTX(DirectoryListing listing, store.ListDirectory(group_path),
                          "listing " + NodeUrl(store, group_path));
  for (const std::string& prefix : listing.prefixes) {
    ZS_ASSIGN_OR_RETURN(auto document, store.ReadIfExists(JoinKey(prefix, "zarr.json")));
    if (!document) continue;
    ZS_ASSIGN_OR_RETURN_CTX(NodeMetadata node, ParseV3Metadata(document->view()),
                            "reading " + NodeUrl(store, prefix) + "/zarr.json");
    const std::string relative = root_path.empty() ? prefix : prefix.substr(root_path.size() + 1);
    if (auto* group = std::get_if<GroupMetadata>(&node)) {
      group->consolidated.reset();
      if (depth + 1 >= kMaxNodePathDepth) {
        return InvalidArgumentError("group hierarchy below " + NodeUrl(store, root_path) +
                                    " is deeper than " + std::to_string(kMaxNodePathDepth));
      }
      nodes->emplace(relative, std::move(node));
      ZS_RETURN_IF_ERROR(CollectMembers(store, root_path, prefix, depth + 1, nodes));
    } else {
      nodes->emplace(relative, std::move(node));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<Array> Array::Create(std::string_view url, const ArraySpec& spec,
                            const CreateOptions& create, const OpenOptions& options) {
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<Store> store, OpenStore(url));
  ZS_ASSIGN_OR_RETURN(auto state, CreateArrayAt(std::move(store), "", "", spec, create,
                                                internal::PoolFor(options), options));
  return Array(std::move(state));
}

Status Array::SetAttributes(std::string_view attributes_json) const {
  const std::string context = "setting the attributes of " + state_->Describe();
  ZS_ASSIGN_OR_RETURN_CTX(json attributes, ParseAttributesJson(attributes_json), context);
  if (state_->metadata.zarr_format != 3) {
    return UnsupportedError(context + ": only Zarr v3 arrays can be changed");
  }
  // Start from the stored document, not this handle's copy, so that nothing else written since
  // the array was opened is lost.
  ZS_ASSIGN_OR_RETURN_CTX(NodeMetadata node, LoadNodeMetadata(*state_->store, state_->path),
                          context);
  auto* metadata = std::get_if<ArrayMetadata>(&node);
  if (metadata == nullptr || metadata->zarr_format != 3) {
    return InvalidArgumentError(context + ": the node is no longer a Zarr v3 array");
  }
  metadata->attributes = std::move(attributes);
  return PutDocument(*state_->store, state_->path, ArrayMetadataToV3Json(*metadata))
      .WithContext(context);
}

Status Group::SetAttributes(std::string_view attributes_json) const {
  const std::string context = "setting the attributes of group " + state_->url;
  ZS_ASSIGN_OR_RETURN_CTX(json attributes, ParseAttributesJson(attributes_json), context);
  // From the stored document, so that members consolidated since this handle opened stay listed.
  ZS_ASSIGN_OR_RETURN_CTX(NodeMetadata node, LoadNodeMetadata(*state_->store, state_->path),
                          context);
  auto* metadata = std::get_if<GroupMetadata>(&node);
  if (metadata == nullptr || metadata->zarr_format != 3) {
    return UnsupportedError(context + ": only Zarr v3 groups can be changed");
  }
  metadata->attributes = std::move(attributes);
  return PutDocument(*state_->store, state_->path, GroupMetadataToV3Json(*metadata))
      .WithContext(context);
}

Result<Group> Group::Create(std::string_view url, std::string_view attributes_json,
                            const CreateOptions& create, const OpenOptions& options) {
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<Store> store, OpenStore(url));
  ZS_ASSIGN_OR_RETURN(auto state, CreateGroupAt(std::move(store), "", "", attributes_json, create,
                                                internal::PoolFor(options), options));
  return Group(std::move(state));
}

Result<Array> Group::CreateArray(std::string_view path, const ArraySpec& spec,
                                 const CreateOptions& create) const {
  ZS_RETURN_IF_ERROR_CTX(ValidateKey(path), CreatingWhat("array in group", state_->url));
  ZS_ASSIGN_OR_RETURN(auto state,
                      CreateArrayAt(state_->store, state_->path, JoinKey(state_->path, path), spec,
                                    create, state_->pool, state_->options));
  return Array(std::move(state));
}

Result<Group> Group::CreateGroup(std::string_view path, std::string_view attributes_json,
                                 const CreateOptions& create) const {
  ZS_RETURN_IF_ERROR_CTX(ValidateKey(path), CreatingWhat("group in group", state_->url));
  ZS_ASSIGN_OR_RETURN(auto state,
                      CreateGroupAt(state_->store, state_->path, JoinKey(state_->path, path),
                                    attributes_json, create, state_->pool, state_->options));
  return Group(std::move(state));
}

Status Group::ConsolidateMetadata() const {
  const std::string context = "consolidating the metadata of group at " + state_->url;
  ZS_ASSIGN_OR_RETURN_CTX(NodeMetadata node, LoadNodeMetadata(*state_->store, state_->path),
                          context);
  auto* group = std::get_if<GroupMetadata>(&node);
  if (group == nullptr || group->zarr_format != 3) {
    return InvalidArgumentError(context + ": not a Zarr v3 group");
  }
  auto members = std::make_shared<ConsolidatedMetadata>();
  ZS_RETURN_IF_ERROR_CTX(
      CollectMembers(*state_->store, state_->path, state_->path, 0, members.get()), context);
  group->consolidated = std::move(members);
  return PutDocument(*state_->store, state_->path, GroupMetadataToV3Json(*group))
      .WithContext(context);
}

}  // namespace zarrstream
