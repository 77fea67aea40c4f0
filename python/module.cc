// The nanobind module _zarrstream: thin bindings over the C++ API. The Python package
// (python/zarrstream) wraps these in numpy-friendly classes; the GIL is released while C++ reads,
// writes or creates.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <sys/mman.h>

#include <cstdint>

#include "array/array_state.h"
#include "dataset/cf_decoding.h"
#include "errors.h"
#include "gil.h"
#include "job_bindings.h"
#include "loader_bindings.h"
#include "store/icechunk_store.h"
#include "store_bindings.h"
#include "util/block_cache.h"
#include "zarrstream/array.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace zarrstream::python {
namespace {

// The Icechunk snapshot id `store` reads, or "" when it is no repository: what a pickled array or
// group reopens at, so that a branch that moved since does not change its data.
std::string SnapshotOf(const Store& store) {
  const auto* snapshot = dynamic_cast<const IcechunkStore*>(&store);
  return snapshot == nullptr ? "" : snapshot->snapshot().id;
}

OpenOptions MakeOptions(size_t num_threads, bool missing_chunks_are_errors, std::string ref = "") {
  OpenOptions options;
  options.ref = std::move(ref);
  options.num_threads = num_threads;
  options.missing_chunks_are_errors = missing_chunks_are_errors;
  return options;
}

// Reads [start, start + shape) of `array` into `out`, a writable numpy array of that shape whose
// item size matches the array's data type.
void ReadInto(const Array& array, const std::vector<uint64_t>& start,
              const std::vector<uint64_t>& shape, nb::ndarray<nb::numpy, nb::device::cpu> out) {
  if (out.ndim() != shape.size()) {
    throw StatusError(InvalidArgumentError("output has " + std::to_string(out.ndim()) +
                                           " dimensions, the region " +
                                           std::to_string(shape.size())));
  }
  const size_t item = out.itemsize();
  if (item != DataTypeSize(array.dtype())) {
    throw StatusError(InvalidArgumentError("output item size does not match the array's dtype"));
  }
  std::vector<int64_t> strides(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (static_cast<uint64_t>(out.shape(d)) != shape[d]) {
      throw StatusError(InvalidArgumentError("output shape does not match the region"));
    }
    strides[d] = out.stride(d) * static_cast<int64_t>(item);
  }
  void* data = out.data();
  ThrowIfError(WithoutGil([&] { return array.Read(start, shape, data, strides); }));
}

// Writes `data` (any strides, native byte order, item size of the array's data type) to the
// region of its shape at `start`.
void WriteFrom(const Array& array, const std::vector<uint64_t>& start,
               nb::ndarray<nb::ro, nb::device::cpu> data) {
  if (data.ndim() != array.rank()) {
    throw StatusError(InvalidArgumentError("data has " + std::to_string(data.ndim()) +
                                           " dimensions, the array " +
                                           std::to_string(array.rank())));
  }
  const size_t item = data.itemsize();
  if (item != DataTypeSize(array.dtype())) {
    throw StatusError(InvalidArgumentError("data item size does not match the array's dtype"));
  }
  std::vector<uint64_t> shape(data.ndim());
  std::vector<int64_t> strides(data.ndim());
  for (size_t d = 0; d < shape.size(); ++d) {
    shape[d] = static_cast<uint64_t>(data.shape(d));
    strides[d] = data.stride(d) * static_cast<int64_t>(item);
  }
  const void* bytes = data.data();
  ThrowIfError(WithoutGil([&] { return array.Write(start, shape, bytes, strides); }));
}

ArraySpec MakeSpec(std::vector<uint64_t> shape, const std::string& dtype,
                   std::vector<uint64_t> chunks, std::optional<std::vector<uint64_t>> shards,
                   std::string compressor, std::vector<std::string> dims,
                   std::string fill_value_json, std::string attributes_json) {
  ArraySpec spec;
  spec.shape = std::move(shape);
  spec.dtype = ValueOrThrow(ParseDataTypeName(dtype));
  spec.chunks = std::move(chunks);
  spec.shard_shape = std::move(shards);
  spec.compressor = std::move(compressor);
  spec.dims = std::move(dims);
  spec.fill_value_json = std::move(fill_value_json);
  spec.attributes_json = std::move(attributes_json);
  return spec;
}

// A writable uint8 numpy array of `nbytes`, uninitialised, whose memory comes from the process's
// block cache (util/block_cache.h) and goes back to it once no view of it is left (the capsule
// owns it). Read outputs made again and again then take pages touched before instead of fresh
// ones the kernel zeroes as the decoders first write them: a fifth of a whole-array read's CPU
// time on 2 cores. Blocks of 4 MiB or more are advised onto 2 MiB pages (numpy's np.empty does
// the same), which a block taken from the cache already has.
nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>> ReusableBytes(size_t nbytes) {
  struct Block {
    std::byte* data;
    size_t bytes;
  };
  auto* block = new Block{nullptr, 0};
  block->data = internal::AllocateBlock(nbytes, block->bytes);
  constexpr uintptr_t kPage = 4096;
  if (nbytes >= (size_t{4} << 20)) {
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(block->data) + kPage - 1) & ~(kPage - 1);
    const uintptr_t end = (reinterpret_cast<uintptr_t>(block->data) + nbytes) & ~(kPage - 1);
    (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);  // advice
  }
  nb::capsule owner(block, [](void* p) noexcept {
    auto* b = static_cast<Block*>(p);
    internal::FreeBlock(b->data, b->bytes);
    delete b;
  });
  const size_t shape[1] = {nbytes};
  return nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>>(block->data, 1, shape, owner);
}

CreateOptions MakeCreateOptions(bool overwrite) {
  CreateOptions create;
  create.overwrite = overwrite;
  return create;
}

}  // namespace
}  // namespace zarrstream::python

NB_MODULE(_zarrstream, m) {
  using namespace zarrstream;
  using namespace zarrstream::python;
  RegisterErrorTranslator(m);
  RegisterInterpreterExit(m);
  RegisterStoreBindings(m);
  RegisterLoaderBindings(m);
  RegisterJobBindings(m);

  nb::class_<Array>(m, "Array")
      .def_prop_ro("url", &Array::url)
      .def_prop_ro("icechunk_snapshot", [](const Array& a) { return SnapshotOf(*a.state().store); })
      .def_prop_ro("path", &Array::path)
      .def_prop_ro("zarr_format", &Array::zarr_format)
      .def_prop_ro("shape", &Array::shape)
      .def_prop_ro("dtype", [](const Array& a) { return NumpyTypeString(a.dtype()); })
      .def_prop_ro("numpy_dtype", &Array::numpy_dtype)
      .def_prop_ro("text_kind",
                   [](const Array& a) -> std::string {
                     if (!a.extended_type() || !a.extended_type()->is_text()) return "";
                     switch (a.extended_type()->kind) {
                       case ExtendedType::Kind::kString:
                         return "string";
                       case ExtendedType::Kind::kJson:
                         return "json";
                       case ExtendedType::Kind::kFixedUtf32:
                         return "fixed_utf32";
                       case ExtendedType::Kind::kFixedBytes:
                         return "fixed_bytes";
                       default:
                         return "bytes";
                     }
                   })
      .def_prop_ro("text_fill_value",
                   [](const Array& a) {
                     const std::string& v = a.text_fill_value();
                     return nb::bytes(v.data(), v.size());
                   })
      .def("read_text",
           [](const Array& a, const std::vector<uint64_t>& start,
              const std::vector<uint64_t>& shape) {
             Result<std::vector<std::string>> elements =
                 WithoutGil([&] { return a.ReadText(start, shape); });
             ThrowIfError(elements.status());
             nb::list out;
             for (const std::string& e : *elements) out.append(nb::bytes(e.data(), e.size()));
             return out;
           })
      .def_prop_ro("chunks", &Array::chunks)
      .def_prop_ro("shard_shape", &Array::shard_shape)
      .def_prop_ro("grid_shape", &Array::grid_shape)
      .def_prop_ro("dims", &Array::dims)
      .def_prop_ro("attributes_json", &Array::attributes_json)
      .def_prop_ro("fill_value_bytes",
                   [](const Array& a) {
                     auto v = a.fill_value();
                     return nb::bytes(reinterpret_cast<const char*>(v.data()), v.size());
                   })
      .def_prop_ro("fill_value_is_null", &Array::fill_value_is_null)
      .def_prop_ro("codecs_json", &Array::codecs_json)
      .def_prop_ro("metadata_json", &Array::metadata_json)
      // The CF decoding open_array(decode_cf=True) applies (dataset/cf_decoding.h): None when
      // nothing is decoded, else the numpy types read and decoded to, scale_factor and add_offset
      // (None when absent) and the fill values (in the decoded type).
      .def("cf_decoding",
           [](const Array& a) -> nb::object {
             const CfDecoding cf = ValueOrThrow(CfDecodingOf(a));
             if (!cf.decode && cf.source == a.dtype()) return nb::none();
             nb::dict out;
             out["source"] = NumpyTypeString(cf.source);
             out["decoded"] =
                 cf.decode ? nb::object(nb::str(NumpyTypeString(cf.decoded).c_str())) : nb::none();
             out["scale_factor"] =
                 cf.has_scale_factor ? nb::object(nb::float_(cf.scale_factor)) : nb::none();
             out["add_offset"] =
                 cf.has_add_offset ? nb::object(nb::float_(cf.add_offset)) : nb::none();
             nb::list fills;
             for (uint32_t k = 0; k < cf.num_fill_values; ++k) {
               fills.append(nb::float_(cf.fill_values[k]));
             }
             out["fill_values"] = fills;
             return out;
           })
      .def("read_into", &ReadInto, "start"_a, "shape"_a, "out"_a.noconvert())
      .def("write_from", &WriteFrom, "start"_a, "data"_a.noconvert())
      .def("set_attributes", [](const Array& a, const std::string& attributes_json) {
        ThrowIfError(WithoutGil([&] { return a.SetAttributes(attributes_json); }));
      });

  nb::class_<Group>(m, "Group")
      .def_prop_ro("url", &Group::url)
      .def_prop_ro("icechunk_snapshot", [](const Group& g) { return SnapshotOf(*g.state().store); })
      .def_prop_ro("path", &Group::path)
      .def_prop_ro("zarr_format", &Group::zarr_format)
      .def_prop_ro("attributes_json", &Group::attributes_json)
      .def_prop_ro("consolidated", &Group::consolidated)
      .def_prop_ro("array_names", &Group::array_names)
      .def_prop_ro("group_names", &Group::group_names)
      .def("open_array",
           [](const Group& g, const std::string& path) { return ValueOrThrow(g.OpenArray(path)); })
      .def("open_group",
           [](const Group& g, const std::string& path) { return ValueOrThrow(g.OpenGroup(path)); })
      .def(
          "create_array",
          [](const Group& g, const std::string& path, std::vector<uint64_t> shape,
             const std::string& dtype, std::vector<uint64_t> chunks,
             std::optional<std::vector<uint64_t>> shards, std::string compressor,
             std::vector<std::string> dims, std::string fill_value_json,
             std::string attributes_json, bool overwrite) {
            ArraySpec spec = MakeSpec(std::move(shape), dtype, std::move(chunks), std::move(shards),
                                      std::move(compressor), std::move(dims),
                                      std::move(fill_value_json), std::move(attributes_json));
            return ValueOrThrow(WithoutGil(
                [&] { return g.CreateArray(path, spec, MakeCreateOptions(overwrite)); }));
          },
          "path"_a, "shape"_a, "dtype"_a, "chunks"_a, "shards"_a.none(), "compressor"_a, "dims"_a,
          "fill_value_json"_a, "attributes_json"_a, "overwrite"_a)
      .def(
          "create_group",
          [](const Group& g, const std::string& path, const std::string& attributes_json,
             bool overwrite) {
            return ValueOrThrow(WithoutGil([&] {
              return g.CreateGroup(path, attributes_json, MakeCreateOptions(overwrite));
            }));
          },
          "path"_a, "attributes_json"_a, "overwrite"_a)
      .def("reopen",
           [](const Group& g) { return ValueOrThrow(WithoutGil([&] { return g.Reopen(); })); })
      .def("consolidate_metadata", [](const Group& g) {
        ThrowIfError(WithoutGil([&] { return g.ConsolidateMetadata(); }));
      });

  m.def("reusable_bytes", &ReusableBytes, "nbytes"_a);
  m.def(
      "open_array",
      [](const std::string& url, size_t num_threads, bool missing_chunks_are_errors,
         std::string ref) {
        return ValueOrThrow(WithoutGil([&] {
          return Array::Open(url,
                             MakeOptions(num_threads, missing_chunks_are_errors, std::move(ref)));
        }));
      },
      "url"_a, "num_threads"_a = 0, "missing_chunks_are_errors"_a = false, "ref"_a = "");
  m.def(
      "open_group",
      [](const std::string& url, size_t num_threads, bool missing_chunks_are_errors,
         std::string ref) {
        return ValueOrThrow(WithoutGil([&] {
          return Group::Open(url,
                             MakeOptions(num_threads, missing_chunks_are_errors, std::move(ref)));
        }));
      },
      "url"_a, "num_threads"_a = 0, "missing_chunks_are_errors"_a = false, "ref"_a = "");
  m.def(
      "create_array",
      [](const std::string& url, std::vector<uint64_t> shape, const std::string& dtype,
         std::vector<uint64_t> chunks, std::optional<std::vector<uint64_t>> shards,
         std::string compressor, std::vector<std::string> dims, std::string fill_value_json,
         std::string attributes_json, bool overwrite, size_t num_threads) {
        ArraySpec spec = MakeSpec(std::move(shape), dtype, std::move(chunks), std::move(shards),
                                  std::move(compressor), std::move(dims),
                                  std::move(fill_value_json), std::move(attributes_json));
        return ValueOrThrow(WithoutGil([&] {
          return Array::Create(url, spec, MakeCreateOptions(overwrite),
                               MakeOptions(num_threads, false));
        }));
      },
      "url"_a, "shape"_a, "dtype"_a, "chunks"_a, "shards"_a.none(), "compressor"_a, "dims"_a,
      "fill_value_json"_a, "attributes_json"_a, "overwrite"_a, "num_threads"_a = 0);
  m.def(
      "create_group",
      [](const std::string& url, const std::string& attributes_json, bool overwrite,
         size_t num_threads) {
        return ValueOrThrow(WithoutGil([&] {
          return Group::Create(url, attributes_json, MakeCreateOptions(overwrite),
                               MakeOptions(num_threads, false));
        }));
      },
      "url"_a, "attributes_json"_a, "overwrite"_a, "num_threads"_a = 0);
}
