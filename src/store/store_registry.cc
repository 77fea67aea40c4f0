#include "store/store_registry.h"

#include <map>
#include <mutex>

#include "store/file_store.h"
#include "store/http_store.h"
#include "store/memory_store.h"
#include "store/reference_store.h"
#include "store/s3_store.h"
#include "util/fork_safety.h"

namespace zarrstream {

namespace {

struct Registry {
  ForkSafeMutex mutex;
  std::map<std::string, StoreFactory, std::less<>> factories;
  std::map<std::string, std::shared_ptr<Store>, std::less<>> memory_stores;
};

Registry& GetRegistry() {
  static Registry* registry = [] {
    auto* r = new Registry;  // never destroyed: stores may be opened during static destruction
    r->factories["file"] = [](std::string_view url) -> Result<std::shared_ptr<Store>> {
      return std::shared_ptr<Store>(
          std::make_shared<FileStore>(std::string(SplitScheme(url).second)));
    };
    r->factories["memory"] = [r](std::string_view url) -> Result<std::shared_ptr<Store>> {
      std::string name(SplitScheme(url).second);
      std::lock_guard<ForkSafeMutex> lock(r->mutex);
      auto it = r->memory_stores.find(name);
      if (it == r->memory_stores.end()) {
        it = r->memory_stores.emplace(name, std::make_shared<MemoryStore>(name)).first;
      }
      return it->second;
    };
    // Remote stores share one HTTP transport (its I/O threads and connections); options come
    // from the environment (see curl_transport.h and http_store.h).
    r->factories["http"] =
        r->factories["https"] = [](std::string_view url) -> Result<std::shared_ptr<Store>> {
      ZS_ASSIGN_OR_RETURN(auto transport, CurlTransport::Shared());
      ZS_ASSIGN_OR_RETURN(auto options, HttpStoreOptions::FromEnvironment());
      ZS_ASSIGN_OR_RETURN(auto store, HttpStore::Open(url, std::move(transport), options));
      return std::shared_ptr<Store>(std::move(store));
    };
    r->factories["s3"] = r->factories["gs"] = OpenS3StoreFromUrl;
    r->factories["reference"] = [](std::string_view url) -> Result<std::shared_ptr<Store>> {
      ZS_ASSIGN_OR_RETURN(auto store, ReferenceStore::Open(url));
      return std::shared_ptr<Store>(std::move(store));
    };
    return r;
  }();
  return *registry;
}

}  // namespace

std::pair<std::string_view, std::string_view> SplitScheme(std::string_view url) {
  size_t pos = url.find("://");
  if (pos == std::string_view::npos) return {"", url};
  return {url.substr(0, pos), url.substr(pos + 3)};
}

void RegisterStoreScheme(std::string scheme, StoreFactory factory) {
  Registry& r = GetRegistry();
  std::lock_guard<ForkSafeMutex> lock(r.mutex);
  r.factories[std::move(scheme)] = std::move(factory);
}

Result<std::shared_ptr<Store>> OpenStore(std::string_view url) {
  if (url.empty()) return InvalidArgumentError("empty store URL");
  // A NUL would cut the path short where it reaches the operating system: "victim\0.zarr" would
  // open (and, with overwrite, replace) "victim".
  if (url.find('\0') != std::string_view::npos) {
    return InvalidArgumentError("store URL '" + RedactUrl(EscapeNul(url)) +
                                "' contains a NUL byte: paths and URLs cannot contain one");
  }
  auto [scheme, rest] = SplitScheme(url);
  if (scheme.empty()) return std::shared_ptr<Store>(std::make_shared<FileStore>(std::string(url)));
  Registry& r = GetRegistry();
  StoreFactory factory;
  {
    std::lock_guard<ForkSafeMutex> lock(r.mutex);
    auto it = r.factories.find(scheme);
    if (it == r.factories.end()) {
      return UnsupportedError("no store backend for URL scheme '" + std::string(scheme) +
                              "://' (in '" + std::string(scheme) + "://...')");
    }
    factory = it->second;
  }
  return factory(url);  // outside the lock: factories may lock the registry themselves
}

}  // namespace zarrstream
