// The Python class of the openreg c10d backend,
// torch_openreg._C.ProcessGroupOpenReg: a subclass of torch's
// torch._C._distributed_c10d.Backend, so that
// torch.distributed.Backend.register_backend accepts what its creator returns
// and ProcessGroup can hold it as a c10::intrusive_ptr<c10d::Backend>.
#include "distributed/ProcessGroupOpenRegPython.h"

#include <utility>

#include <torch/csrc/utils/pybind.h>

#include "distributed/ProcessGroupOpenReg.h"

namespace {

namespace py = pybind11;

// torch binds c10d::Backend with a holder that drops its reference with the
// GIL released; a derived class needs a non-default holder as well, and the
// same care: the last reference tears down gloo's worker threads, which may
// be finishing work whose callbacks take the GIL.
template <typename T>
class ReleasingGilHolder {
 public:
  ReleasingGilHolder() = default;
  explicit ReleasingGilHolder(c10::intrusive_ptr<T> ptr) : ptr_(std::move(ptr)) {}
  // pybind11 wraps objects that something already owns.
  explicit ReleasingGilHolder(T* target) : ptr_(c10::intrusive_ptr<T>::reclaim_copy(target)) {}
  ReleasingGilHolder(const ReleasingGilHolder&) = default;
  ReleasingGilHolder& operator=(const ReleasingGilHolder&) = default;
  ~ReleasingGilHolder() {
    if (ptr_ && PyGILState_Check()) {
      py::gil_scoped_release no_gil;
      ptr_.reset();
    }
  }
  T* get() const {
    return ptr_.get();
  }

 private:
  c10::intrusive_ptr<T> ptr_;
};

}  // namespace

PYBIND11_DECLARE_HOLDER_TYPE(T, ReleasingGilHolder<T>, true)

namespace c10d::openreg {

void bind_process_group(py::module& m) {
  // Registers c10d's Python types (torch.distributed imports it with torch).
  py::module_::import("torch._C._distributed_c10d");
  py::class_<ProcessGroupOpenReg, Backend, ReleasingGilHolder<ProcessGroupOpenReg>> cls(
      m, "ProcessGroupOpenReg", "gloo's collectives on zero-copy host views of openreg tensors");
  cls.def(
         py::init([](c10::intrusive_ptr<Store> store, c10::intrusive_ptr<Backend> gloo, int rank, int size) {
           return ReleasingGilHolder<ProcessGroupOpenReg>(
               c10::make_intrusive<ProcessGroupOpenReg>(std::move(store), std::move(gloo), rank, size));
         }),
         py::arg("store"), py::arg("gloo"), py::arg("rank"), py::arg("size"))
      .def_property_readonly("gloo", &ProcessGroupOpenReg::gloo, "the gloo backend the collectives run on");
  cls.attr("NAME") = ProcessGroupOpenReg::kName;
}

}  // namespace c10d::openreg
