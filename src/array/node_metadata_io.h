// Reading node metadata from a store: v3 zarr.json first, then v2 .zarray/.zgroup (+ .zattrs,
// + .zmetadata for groups).
#pragma once

#include <string_view>

#include "metadata/array_metadata.h"
#include "store/store.h"

namespace zarrstream {

// Loads the metadata of the node at `path` ("" for the store root). A missing node is kNotFound
// ("no Zarr array or group at ..."). For v2 groups, a .zmetadata beside .zgroup is parsed into
// GroupMetadata::consolidated (paths relative to the group).
Result<NodeMetadata> LoadNodeMetadata(Store& store, std::string_view path);

// Whether the node at `path` is an array: its zarr.json says so, or (v2) a .zarray is there. A
// missing node is false; a zarr.json that does not parse is an error. Reads one or two keys.
Result<bool> IsArrayNode(Store& store, std::string_view path);

// `url` of the store joined with `path`.
std::string NodeUrl(const Store& store, std::string_view path);

}  // namespace zarrstream
