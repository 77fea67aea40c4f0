// The nanobind module _zarrstream: thin bindings over the C++ API. The Python package
// (python/zarrstream) wraps these in numpy-friendly classes; the GIL is released while C++ reads.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "errors.h"
#include "zarrstream/array.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace zarrstream::python {
namespace {

OpenOptions MakeOptions(size_t num_threads, bool missing_chunks_are_errors) {
  OpenOptions options;
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
  Status status;
  {
    nb::gil_scoped_release release;
    status = array.Read(start, shape, data, strides);
  }
  ThrowIfError(status);
}

}  // namespace
}  // namespace zarrstream::python

NB_MODULE(_zarrstream, m) {
  using namespace zarrstream;
  using namespace zarrstream::python;
  RegisterErrorTranslator(m);

  nb::class_<Array>(m, "Array")
      .def_prop_ro("url", &Array::url)
      .def_prop_ro("path", &Array::path)
      .def_prop_ro("zarr_format", &Array::zarr_format)
      .def_prop_ro("shape", &Array::shape)
      .def_prop_ro("dtype", [](const Array& a) { return NumpyTypeString(a.dtype()); })
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
      .def("read_into", &ReadInto, "start"_a, "shape"_a, "out"_a.noconvert());

  nb::class_<Group>(m, "Group")
      .def_prop_ro("url", &Group::url)
      .def_prop_ro("path", &Group::path)
      .def_prop_ro("zarr_format", &Group::zarr_format)
      .def_prop_ro("attributes_json", &Group::attributes_json)
      .def_prop_ro("consolidated", &Group::consolidated)
      .def_prop_ro("array_names", &Group::array_names)
      .def_prop_ro("group_names", &Group::group_names)
      .def("open_array",
           [](const Group& g, const std::string& path) { return ValueOrThrow(g.OpenArray(path)); })
      .def("open_group",
           [](const Group& g, const std::string& path) { return ValueOrThrow(g.OpenGroup(path)); });

  m.def(
      "open_array",
      [](const std::string& url, size_t num_threads, bool missing_chunks_are_errors) {
        Result<Array> array = [&] {
          nb::gil_scoped_release release;
          return Array::Open(url, MakeOptions(num_threads, missing_chunks_are_errors));
        }();
        return ValueOrThrow(std::move(array));
      },
      "url"_a, "num_threads"_a = 0, "missing_chunks_are_errors"_a = false);
  m.def(
      "open_group",
      [](const std::string& url, size_t num_threads, bool missing_chunks_are_errors) {
        Result<Group> group = [&] {
          nb::gil_scoped_release release;
          return Group::Open(url, MakeOptions(num_threads, missing_chunks_are_errors));
        }();
        return ValueOrThrow(std::move(group));
      },
      "url"_a, "num_threads"_a = 0, "missing_chunks_are_errors"_a = false);
}
