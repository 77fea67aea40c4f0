// The URL → store registry. Backends register a factory for their URL schemes; OpenStore picks one.
// Plain paths and file:// URLs open a FileStore; memory:// names a process-wide MemoryStore
// (tests); reference://<location of a reference file> opens a ReferenceStore (Kerchunk
// references, reference_store.h).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "store/store.h"

namespace zarrstream {

using StoreFactory = std::function<Result<std::shared_ptr<Store>>(std::string_view url)>;

// Registers `factory` for URLs beginning with "<scheme>://". Thread-safe; later registrations of
// the same scheme replace earlier ones.
void RegisterStoreScheme(std::string scheme, StoreFactory factory);

// Opens the store rooted at `url`. A URL containing a NUL byte is kInvalidArgument, whatever its
// scheme (factories never see one).
Result<std::shared_ptr<Store>> OpenStore(std::string_view url);

// Splits "scheme://rest" (no scheme: "" and the whole string).
std::pair<std::string_view, std::string_view> SplitScheme(std::string_view url);

}  // namespace zarrstream
