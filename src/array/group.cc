// Group handles: opening, member discovery (consolidated metadata or listing), opening members.
#include <algorithm>
#include <set>

#include "array/array_state.h"
#include "array/node_metadata_io.h"
#include "store/store_registry.h"

namespace zarrstream {

namespace {

using internal::GroupState;

// Consolidated metadata of the sub-tree under `prefix` (a member group), re-keyed relative to it.
std::shared_ptr<const ConsolidatedMetadata> SubTree(const ConsolidatedMetadata& all,
                                                    const std::string& prefix) {
  auto sub = std::make_shared<ConsolidatedMetadata>();
  const std::string dir = prefix + "/";
  for (const auto& [path, node] : all) {
    if (path.compare(0, dir.size(), dir) == 0) sub->emplace(path.substr(dir.size()), node);
  }
  return sub;
}

}  // namespace

namespace internal {

Result<std::shared_ptr<const GroupState>> MakeGroupState(std::shared_ptr<Store> store,
                                                         std::string path, GroupMetadata metadata,
                                                         std::shared_ptr<ThreadPool> pool,
                                                         const OpenOptions& options) {
  auto state = std::make_shared<GroupState>();
  state->url = NodeUrl(*store, path);
  state->store = std::move(store);
  state->path = std::move(path);
  state->consolidated = metadata.consolidated;
  state->metadata = std::move(metadata);
  state->pool = std::move(pool);
  state->options = options;
  std::set<std::string> arrays, groups;
  if (state->consolidated) {
    for (const auto& [member, node] : *state->consolidated) {
      if (member.empty() || member.find('/') != std::string::npos) continue;
      (std::holds_alternative<ArrayMetadata>(node) ? arrays : groups).insert(member);
    }
  } else {
    ZS_ASSIGN_OR_RETURN_CTX(DirectoryListing listing, state->store->ListDirectory(state->path),
                            "listing members of group at " + state->url);
    for (const std::string& prefix : listing.prefixes) {
      std::string name = prefix.substr(prefix.rfind('/') + 1);
      Result<NodeMetadata> node = LoadNodeMetadata(*state->store, prefix);
      if (node.ok()) {
        (std::holds_alternative<ArrayMetadata>(*node) ? arrays : groups).insert(std::move(name));
      } else if (node.status().code() != ErrorCode::kNotFound) {
        // A member whose metadata is broken must not make its siblings unreachable: list it
        // (opening it reports the error) under the kind its metadata file suggests.
        ZS_ASSIGN_OR_RETURN(auto v3, state->store->ReadIfExists(JoinKey(prefix, "zarr.json")));
        bool looks_like_group = false;
        if (v3) {
          looks_like_group = v3->view().find("\"group\"") != std::string_view::npos;
        } else {
          ZS_ASSIGN_OR_RETURN(auto zarray, state->store->ReadIfExists(JoinKey(prefix, ".zarray")));
          looks_like_group = !zarray;
        }
        (looks_like_group ? groups : arrays).insert(std::move(name));
      }
    }
  }
  state->array_names.assign(arrays.begin(), arrays.end());
  state->group_names.assign(groups.begin(), groups.end());
  return std::shared_ptr<const GroupState>(std::move(state));
}

}  // namespace internal

Result<Group> Group::Open(std::string_view url, const OpenOptions& options) {
  ZS_ASSIGN_OR_RETURN(auto root, OpenRootNode(url, options.ref));
  auto& [store, node] = root;
  if (!std::holds_alternative<GroupMetadata>(node)) {
    return InvalidArgumentError(store->url() + " is an array, not a group (use open_array)");
  }
  ZS_ASSIGN_OR_RETURN(auto state,
                      internal::MakeGroupState(store, "", std::get<GroupMetadata>(std::move(node)),
                                               internal::PoolFor(options), options));
  return Group(std::move(state));
}

const std::string& Group::url() const { return state_->url; }
const std::string& Group::path() const { return state_->path; }
int Group::zarr_format() const { return state_->metadata.zarr_format; }
std::string Group::attributes_json() const { return state_->metadata.attributes.dump(); }
bool Group::consolidated() const { return state_->consolidated != nullptr; }
const std::vector<std::string>& Group::array_names() const { return state_->array_names; }
const std::vector<std::string>& Group::group_names() const { return state_->group_names; }

namespace {

// The metadata of member `relative` of `group`: from consolidated metadata, or read from the store.
Result<NodeMetadata> MemberMetadata(const GroupState& group, std::string_view relative) {
  ZS_RETURN_IF_ERROR(ValidateKey(relative));
  if (group.consolidated) {
    auto it = group.consolidated->find(std::string(relative));
    if (it == group.consolidated->end()) {
      return NotFoundError("no member '" + std::string(relative) + "' in group at " + group.url +
                           " (according to its consolidated metadata)");
    }
    return it->second;
  }
  return LoadNodeMetadata(*group.store, JoinKey(group.path, relative));
}

}  // namespace

Result<Array> Group::OpenArray(std::string_view path) const {
  ZS_ASSIGN_OR_RETURN(NodeMetadata node, MemberMetadata(*state_, path));
  if (!std::holds_alternative<ArrayMetadata>(node)) {
    return InvalidArgumentError("'" + std::string(path) + "' in group at " + state_->url +
                                " is a group, not an array");
  }
  ZS_ASSIGN_OR_RETURN(
      auto state, internal::MakeArrayState(state_->store, JoinKey(state_->path, path),
                                           std::get<ArrayMetadata>(std::move(node)), state_->pool,
                                           state_->options));
  return Array(std::move(state));
}

Result<Group> Group::OpenGroup(std::string_view path) const {
  ZS_ASSIGN_OR_RETURN(NodeMetadata node, MemberMetadata(*state_, path));
  if (!std::holds_alternative<GroupMetadata>(node)) {
    return InvalidArgumentError("'" + std::string(path) + "' in group at " + state_->url +
                                " is an array, not a group");
  }
  GroupMetadata metadata = std::get<GroupMetadata>(std::move(node));
  if (state_->consolidated && !metadata.consolidated) {
    metadata.consolidated = SubTree(*state_->consolidated, std::string(path));
  }
  ZS_ASSIGN_OR_RETURN(auto state,
                      internal::MakeGroupState(state_->store, JoinKey(state_->path, path),
                                               std::move(metadata), state_->pool, state_->options));
  return Group(std::move(state));
}

Result<Group> Group::Reopen() const {
  ZS_ASSIGN_OR_RETURN(NodeMetadata node, LoadNodeMetadata(*state_->store, state_->path));
  if (!std::holds_alternative<GroupMetadata>(node)) {
    return InvalidArgumentError(state_->url + " is no longer a group");
  }
  ZS_ASSIGN_OR_RETURN(auto state, internal::MakeGroupState(state_->store, state_->path,
                                                           std::get<GroupMetadata>(std::move(node)),
                                                           state_->pool, state_->options));
  return Group(std::move(state));
}

}  // namespace zarrstream
