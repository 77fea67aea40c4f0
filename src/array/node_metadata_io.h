// Reading node metadata from a store: v3 zarr.json first, then v2 .zarray/.zgroup (+ .zattrs,
// + .zmetadata for groups).
#pragma once

#include <memory>
#include <string_view>
#include <utility>

#include "metadata/array_metadata.h"
#include "store/store.h"

namespace zarrstream {

// Loads the metadata of the node at `path` ("" for the store root). A missing node is kNotFound
// ("no Zarr array or group at ..."). For v2 groups, a .zmetadata beside .zgroup is parsed into
// GroupMetadata::consolidated (paths relative to the group). The metadata's documents_sha256 is the
// SHA-256 of the documents found (each as its key, its length and its bytes, in the order read:
// zarr.json; or .zattrs, .zarray; or .zattrs, .zgroup, .zmetadata).
Result<NodeMetadata> LoadNodeMetadata(Store& store, std::string_view path);

// Whether the node at `path` is an array: its zarr.json says so, or (v2) a .zarray is there. A
// missing node is false; a zarr.json that does not parse is an error. Reads one or two keys.
Result<bool> IsArrayNode(Store& store, std::string_view path);

// `url` of the store joined with `path`.
std::string NodeUrl(const Store& store, std::string_view path);

// Opens the store at `url` and the metadata at its root. An Icechunk repository there (recognised
// by its layout when the URL holds no Zarr metadata, icechunk_store.h) opens as the snapshot that
// `ref` names (empty: branch "main"); a non-empty `ref` for a URL that is not a repository is an
// error.
Result<std::pair<std::shared_ptr<Store>, NodeMetadata>> OpenRootNode(std::string_view url,
                                                                     std::string_view ref);

}  // namespace zarrstream
