#include "array/node_metadata_io.h"

#include "metadata/v2_metadata.h"
#include "metadata/v3_metadata.h"
#include "store/icechunk_store.h"
#include "store/sigv4.h"
#include "store/store_registry.h"

namespace zarrstream {

namespace {

// The documents a node's metadata was read from, framed so that no two sets of documents give the
// same bytes: key, NUL, length, NUL, bytes.
class DocumentDigest {
 public:
  void Add(std::string_view key, const std::optional<ByteBuffer>& document) {
    if (!document) return;
    framed_ += key;
    framed_ += '\0';
    framed_ += std::to_string(document->size());
    framed_ += '\0';
    framed_ += document->view();
  }
  std::string Sha256() const { return Sha256Hex(std::as_bytes(std::span(framed_))); }

 private:
  std::string framed_;
};

}  // namespace

std::string NodeUrl(const Store& store, std::string_view path) {
  if (path.empty()) return store.url();
  return store.url() + "/" + std::string(path);
}

Result<bool> IsArrayNode(Store& store, std::string_view path) {
  ZS_ASSIGN_OR_RETURN(auto v3, store.ReadIfExists(JoinKey(path, "zarr.json")));
  if (v3) {
    ZS_ASSIGN_OR_RETURN_CTX(NodeMetadata node, ParseV3Metadata(v3->view()),
                            "reading " + NodeUrl(store, path) + "/zarr.json");
    return std::holds_alternative<ArrayMetadata>(node);
  }
  ZS_ASSIGN_OR_RETURN(auto zarray, store.ReadIfExists(JoinKey(path, ".zarray")));
  return zarray.has_value();
}

Result<NodeMetadata> LoadNodeMetadata(Store& store, std::string_view path) {
  const std::string where = NodeUrl(store, path);
  ZS_ASSIGN_OR_RETURN(auto v3, store.ReadIfExists(JoinKey(path, "zarr.json")));
  DocumentDigest digest;
  if (v3) {
    ZS_ASSIGN_OR_RETURN_CTX(NodeMetadata node, ParseV3Metadata(v3->view()),
                            "reading " + where + "/zarr.json");
    digest.Add("zarr.json", v3);
    std::visit([&](auto& metadata) { metadata.documents_sha256 = digest.Sha256(); }, node);
    return node;
  }
  ZS_ASSIGN_OR_RETURN(auto zattrs, store.ReadIfExists(JoinKey(path, ".zattrs")));
  digest.Add(".zattrs", zattrs);
  std::optional<std::string_view> attrs;
  if (zattrs) attrs = zattrs->view();
  ZS_ASSIGN_OR_RETURN(auto zarray, store.ReadIfExists(JoinKey(path, ".zarray")));
  if (zarray) {
    ZS_ASSIGN_OR_RETURN_CTX(ArrayMetadata array, ParseV2ArrayMetadata(zarray->view(), attrs),
                            "reading " + where + "/.zarray");
    digest.Add(".zarray", zarray);
    array.documents_sha256 = digest.Sha256();
    return NodeMetadata(std::move(array));
  }
  ZS_ASSIGN_OR_RETURN(auto zgroup, store.ReadIfExists(JoinKey(path, ".zgroup")));
  ZS_ASSIGN_OR_RETURN(auto zmetadata, store.ReadIfExists(JoinKey(path, ".zmetadata")));
  if (!zgroup && !zmetadata) {
    return NotFoundError("no Zarr array or group at " + where +
                         " (none of zarr.json, .zarray, .zgroup found)");
  }
  GroupMetadata group;
  group.zarr_format = 2;
  if (zgroup) {
    ZS_ASSIGN_OR_RETURN_CTX(group, ParseV2GroupMetadata(zgroup->view(), attrs),
                            "reading " + where + "/.zgroup");
  }
  if (zmetadata) {
    ZS_ASSIGN_OR_RETURN_CTX(auto consolidated, ParseV2ConsolidatedMetadata(zmetadata->view()),
                            "reading " + where + "/.zmetadata");
    if (!zgroup) {
      auto root = consolidated.find("");
      if (root != consolidated.end() && std::holds_alternative<GroupMetadata>(root->second)) {
        group = std::get<GroupMetadata>(root->second);
      }
    }
    consolidated.erase("");
    group.consolidated = std::make_shared<const ConsolidatedMetadata>(std::move(consolidated));
  }
  digest.Add(".zgroup", zgroup);
  digest.Add(".zmetadata", zmetadata);
  group.documents_sha256 = digest.Sha256();
  return NodeMetadata(std::move(group));
}

Result<std::pair<std::shared_ptr<Store>, NodeMetadata>> OpenRootNode(std::string_view url,
                                                                     std::string_view ref) {
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<Store> store, OpenStore(url));
  if (!ref.empty()) {
    ZS_ASSIGN_OR_RETURN(bool repository, IcechunkStore::IsRepository(*store));
    if (!repository) {
      return InvalidArgumentError("ref '" + std::string(ref) + "' given, but " + store->url() +
                                  " is no Icechunk repository (no refs/branch.main/ref.json nor "
                                  "repo file there)");
    }
  } else {
    Result<NodeMetadata> node = LoadNodeMetadata(*store, "");
    if (node.ok() || node.status().code() != ErrorCode::kNotFound) {
      if (!node.ok()) return node.status();
      return std::make_pair(std::move(store), std::move(*node));
    }
    // No Zarr metadata at the root: an Icechunk repository, or the error stands.
    Result<bool> repository = IcechunkStore::IsRepository(*store);
    if (!repository.ok() || !*repository) return node.status();
  }
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<IcechunkStore> snapshot, IcechunkStore::Open(store, ref));
  ZS_ASSIGN_OR_RETURN(NodeMetadata node, LoadNodeMetadata(*snapshot, ""));
  return std::make_pair(std::shared_ptr<Store>(std::move(snapshot)), std::move(node));
}

}  // namespace zarrstream
