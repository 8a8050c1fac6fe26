// torch_openreg._C: the few runtime entry points the Python device module
// needs. Kernels, hooks, guard and allocator register themselves when this
// library is loaded; nothing here initializes a device.
#include <limits>
#include <unordered_map>

#include <torch/csrc/Event.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/Storage.h>
#include <torch/csrc/utils/device_lazy_init.h>
#include <torch/csrc/utils/pybind.h>

#include "aten/CudaContract.h"
#include "aten/Fallback.h"
#include "aten/StructuredDefaults.h"
#include "python/MemorySnapshot.h"
#include "distributed/ProcessGroupOpenRegPython.h"
#include "inductor/CompiledKernelCall.h"
#include "aten/FallbackControls.h"
#include "runtime/OpenRegDeviceAllocator.h"
#include "runtime/OpenRegException.h"
#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegGenerator.h"
#include "runtime/OpenRegHostAllocator.h"
#include "runtime/OpenRegMemPool.h"
#include "runtime/OpenRegMemorySnapshot.h"
#include "runtime/OpenRegIpc.h"
#include "runtime/OpenRegPluggableAllocator.h"
#include "runtime/OpenRegCaptureRules.h"
#include "runtime/OpenRegStream.h"
#include "runtime/OpenRegSyncDebug.h"
#include "runtime/OpenRegSynchronizingCall.h"
#include "runtime/Options.h"
#include "sanitizer/SanitizerTrace.h"

namespace {

namespace py = pybind11;
using namespace c10::openreg;

c10::DeviceIndex to_index(int index) {
  TORCH_CHECK(
      index >= -1 && index <= std::numeric_limits<c10::DeviceIndex>::max(), "Invalid openreg device index ", index);
  return static_cast<c10::DeviceIndex>(index);
}

// First device use: an invalid OPENREG_* value is reported here, never at
// import. Devices themselves start at first allocation.
void lazy_init() {
  validate_options();
  at::openreg::register_forced_fallbacks();
  // After a fork, the child must not use the parent's device memory: torch's
  // handler marks the child as in a bad fork and re-arms lazy init there.
  torch::utils::register_fork_handler_for_device_init(at::kPrivateUse1);
}

// Each binding turns c10 errors into their Python counterparts (RuntimeError,
// ValueError, NotImplementedError, ...), as torch's own bindings do.
#define BINDING(NAME, ARGS, BODY)    \
  auto NAME ARGS {                   \
    HANDLE_TH_ERRORS                 \
    BODY END_HANDLE_TH_ERRORS_PYBIND \
  }

BINDING(py_init, (), lazy_init();)
// As torch.cuda.device_count(): 0 and a warning when the runtime cannot start
// (is_available() is then False); the first device use raises the reason.
BINDING(py_device_count, (), {
  try {
    return static_cast<int>(device_count());
  } catch (const c10::Error& error) {
    TORCH_WARN("openreg initialization: ", error.msg());
    return 0;
  }
})
BINDING(py_current_device, (), return static_cast<int>(current_device());)
BINDING(py_set_device, (int index), set_device(to_index(index));)
BINDING(py_exchange_device, (int index), return static_cast<int>(maybe_exchange_device(to_index(index)));)
BINDING(py_synchronize, (int index), {
  on_synchronizing_call("device synchronize");
  synchronize_device(to_index(index));
})
// The device's default generator as a torch.Generator (the same object each
// time, as torch.cuda.default_generators holds).
BINDING(
    py_default_generator, (int index),
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(getDefaultGenerator(to_index(index))));)
BINDING(py_stream_priority, (int device_index, int64_t stream_id), {
  const c10::Stream stream(c10::Stream::UNSAFE, make_device(to_index(device_index)), stream_id);
  return OpenRegStream(stream).priority();
})
// torch.Event.elapsed_time accepts only exact torch.Event arguments; this
// times any two events, subclasses included (torch.openreg.Event).
BINDING(py_event_elapsed_time, (py::handle start, py::handle end), {
  TORCH_CHECK(THPEvent_Check(start.ptr()) && THPEvent_Check(end.ptr()), "elapsed_time expects two events");
  return reinterpret_cast<THPEvent*>(start.ptr())->event.elapsedTime(reinterpret_cast<THPEvent*>(end.ptr())->event);
})
BINDING(py_fallback_stats, (), {
  py::dict stats;
  for (const auto& [name, calls] : at::openreg::fallback_stats()) {
    stats[py::str(name)] = calls;
  }
  return stats;
})
BINDING(py_reset_fallback_stats, (), at::openreg::reset_fallback_stats();)
// The options table, for the test that keeps README's table in sync with it.
BINDING(py_options, (), {
  py::list table;
  for (const OptionDoc& option : option_table()) {
    table.append(py::make_tuple(option.name, option.default_value, option.meaning));
  }
  return table;
})
BINDING(py_sanitizer_option, (), return sanitizer_option();)
BINDING(py_set_sanitizer_enabled, (bool on), sanitizer::set_enabled(on);)
BINDING(py_sanitizer_stream_id, (int device_index, int64_t stream_id), {
  return sanitizer::stream_id(c10::Stream(c10::Stream::UNSAFE, make_device(to_index(device_index)), stream_id));
})
BINDING(py_sanitizer_block, (uintptr_t address), {
  const auto block = allocatedBlock(reinterpret_cast<void*>(address));
  return block ? py::object(py::make_tuple(block->first, sanitizer::stream_id(block->second))) : py::object(py::none());
})
// The CUDA contract's rules (torch_openreg/openreg/cuda_contract.py hands
// over cuda_contract.yaml before the first device use). dtypes by c10's
// names, as AT_DISPATCH's messages print them ("Long", "Half").
c10::ScalarType scalar_type_named(const std::string& name) {
  for (int i = 0; i < static_cast<int>(c10::ScalarType::NumOptions); ++i) {
    if (name == c10::toString(static_cast<c10::ScalarType>(i))) {
      return static_cast<c10::ScalarType>(i);
    }
  }
  TORCH_CHECK_VALUE(false, "openreg's CUDA contract: no dtype is named '", name, "'");
}
// (kind, argument, value, input), as cuda_contract.py spells a `when`.
at::openreg::RuleCondition condition_of(const py::tuple& when, const std::string& op) {
  using Kind = at::openreg::RuleCondition::Kind;
  static const std::unordered_map<std::string, Kind> kinds{
      {"always", Kind::Always},
      {"given", Kind::ArgumentIsNotNone},
      {"equals", Kind::ArgumentEquals},
      {"not_equals", Kind::ArgumentNotEquals},
      {"floating_or_complex", Kind::ArgumentIsFloatingOrComplex},
      {"result_floating_or_complex", Kind::ResultIsFloatingOrComplex},
      {"signal_size_not_power_of_two", Kind::SignalSizeNotPowerOfTwo},
  };
  const auto kind = kinds.find(when[0].cast<std::string>());
  TORCH_CHECK_VALUE(kind != kinds.end(), "openreg's CUDA contract: unknown condition for ", op);
  return {kind->second, when[1].cast<std::string>(), when[2].cast<std::string>(), when[3].cast<std::string>()};
}
at::openreg::DtypeRefusal refusal_of(const std::string& op, const py::dict& entry) {
  at::openreg::DtypeRefusal refusal;
  refusal.kernel = entry["kernel"].cast<std::string>();
  refusal.arguments = entry["arguments"].cast<std::vector<std::string>>();
  for (const std::string& name : entry["dtypes"].cast<std::vector<std::string>>()) {
    refusal.dtypes.push_back(scalar_type_named(name));
  }
  refusal.when = condition_of(entry["when"].cast<py::tuple>(), op);
  refusal.message = entry["message"].cast<std::string>();
  refusal.unless_empty = entry["unless_empty"].cast<bool>();
  refusal.unless_same_size = entry["unless_same_size"].cast<bool>();
  return refusal;
}
BINDING(
    py_cuda_contract_add_dtype_refusal, (const std::string& op, const py::dict& entry),
    at::openreg::add_dtype_refusal(op, refusal_of(op, entry));)
BINDING(
    py_cuda_contract_add_widening,
    (const std::string& op, const std::string& argument, const std::vector<std::string>& dtype_names,
     const std::string& computed_as),
    {
      at::openreg::DtypeWidening widening;
      widening.argument = argument;
      for (const std::string& name : dtype_names) {
        widening.dtypes.push_back(scalar_type_named(name));
      }
      widening.computed_as = scalar_type_named(computed_as);
      at::openreg::add_dtype_widening(op, std::move(widening));
    })
BINDING(
    py_cuda_contract_add_alert, (const std::string& op, const std::string& caller, const py::tuple& when),
    at::openreg::add_nondeterministic_alert(op, caller, condition_of(when, op));)
BINDING(py_cuda_contract_add_missing, (const std::string& op), at::openreg::add_operator_missing_on_cuda(op);)
BINDING(py_is_device_initialized, (int index), return is_device_initialized(to_index(index));)
BINDING(py_set_memory_fraction, (double fraction, int index), setMemoryFraction(fraction, to_index(index));)
BINDING(py_get_memory_fraction, (int index), return getMemoryFraction(to_index(index));)
BINDING(py_caching_allocator_alloc, (int64_t size, int device_index, int64_t stream_id), {
  TORCH_CHECK_VALUE(size >= 0, "caching_allocator_alloc: size must be non-negative, got ", size);
  const c10::Stream stream(c10::Stream::UNSAFE, make_device(to_index(device_index)), stream_id);
  return reinterpret_cast<uintptr_t>(raw_alloc(static_cast<size_t>(size), stream));
})
// change_current_allocator: the addresses of the user's functions, which
// OpenRegPluggableAllocator resolved with ctypes.
BINDING(py_change_current_allocator, (uintptr_t alloc_fn, uintptr_t free_fn), {
  changeCurrentAllocator(reinterpret_cast<PluggableAllocFn>(alloc_fn), reinterpret_cast<PluggableFreeFn>(free_fn));
})
BINDING(py_caching_allocator_delete, (uintptr_t ptr), raw_free(reinterpret_cast<void*>(ptr));)
// Stream.openreg_stream: the runtime handle (0 for the default stream).
BINDING(py_stream_handle, (int device_index, int64_t stream_id), {
  const c10::Stream stream(c10::Stream::UNSAFE, make_device(to_index(device_index)), stream_id);
  return reinterpret_cast<uintptr_t>(OpenRegStream(stream).handle());
})
// ExternalStream: wraps a runtime stream created outside PyTorch. The
// runtime validates the handle and says which device it belongs to.
BINDING(py_stream_from_external, (uintptr_t handle, int device_index), {
  TORCH_CHECK_VALUE(
      handle != 0,
      "ExternalStream: handle 0 is the default stream, not an external one; "
      "use torch.openreg.default_stream()");
  auto* const stream_handle = reinterpret_cast<orStream_t>(handle);
  int owner = -1;
  OPENREG_CHECK(orStreamGetDevice(stream_handle, &owner));
  TORCH_CHECK_VALUE(
      device_index < 0 || device_index == owner, "ExternalStream: stream handle ", stream_handle,
      " belongs to openreg:", owner, ", not openreg:", device_index);
  const c10::Stream stream = getStreamFromExternal(stream_handle, to_index(owner));
  return py::make_tuple(stream.id(), static_cast<int>(stream.device_index()), static_cast<int>(stream.device_type()));
})
// torch.openreg.profiler ranges, on the device's current stream.
BINDING(py_range_push, (const std::string& name, int device_index), {
  const c10::DeviceIndex index = to_index(device_index);
  check_device_index(index);
  OPENREG_CHECK(orRangePush(getCurrentOpenRegStream(index).handle(), name.c_str()));
})
BINDING(py_range_pop, (), OPENREG_CHECK(orRangePop());)
// torch.cuda.host_memory_stats' nested layout, from PyTorch's caching host
// allocator that openreg's pinned memory uses.
BINDING(py_host_memory_stats, (), {
  const at::HostStats stats = getHostAllocator()->get_stats();
  const auto stat = [](const c10::CachingAllocator::Stat& s) {
    py::dict d;
    d["current"] = s.current;
    d["peak"] = s.peak;
    d["allocated"] = s.allocated;
    d["freed"] = s.freed;
    return d;
  };
  const auto duration = [](const c10::CachingAllocator::DurationStat& s) {
    py::dict d;
    d["total"] = s.total;
    d["max"] = s.max;
    d["min"] = s.min;
    d["count"] = s.count;
    d["avg"] = s.count == 0 ? 0 : s.total / s.count;
    return d;
  };
  py::dict result;
  result["allocations"] = stat(stats.allocations);
  result["allocated_bytes"] = stat(stats.allocated_bytes);
  result["active_requests"] = stat(stats.active_requests);
  result["active_bytes"] = stat(stats.active_bytes);
  result["num_host_alloc"] = stats.num_host_alloc;
  result["num_host_free"] = stats.num_host_free;
  result["host_alloc_time"] = duration(stats.host_alloc_time);
  result["host_free_time"] = duration(stats.host_free_time);
  return result;
})
// torch.multiprocessing's reducer (torch_openreg/_multiprocessing_reductions.py):
// a storage as (device, memory handle, offset, nbytes, counter handle, counter
// offset), and back.
BINDING(py_ipc_share_storage, (py::handle storage), {
  TORCH_CHECK_TYPE(THPStorage_Check(storage.ptr()), "_ipc_share_storage expects an UntypedStorage");
  const SharedStorage shared = share_storage(*THPStorage_Unpack(storage.ptr()).unsafeGetStorageImpl());
  return py::make_tuple(
      static_cast<int>(shared.device), py::bytes(shared.memory), shared.offset, shared.nbytes,
      py::bytes(shared.counter), shared.counter_offset);
})
BINDING(
    py_ipc_open_storage,
    (int device, const std::string& memory, size_t offset, size_t nbytes, const std::string& counter,
     size_t counter_offset),
    {
      SharedStorage shared;
      shared.device = to_index(device);
      shared.memory = memory;
      shared.offset = offset;
      shared.nbytes = nbytes;
      shared.counter = counter;
      shared.counter_offset = counter_offset;
      return py::reinterpret_steal<py::object>(THPStorage_Wrap(c10::Storage(open_shared_storage(shared))));
    })
BINDING(
    py_ipc_release_reference, (const std::string& counter, size_t counter_offset),
    release_shared_reference(counter, counter_offset);)
BINDING(py_ipc_collect, (), ipc_collect();)
BINDING(py_reset_accumulated_host_memory_stats, (), getHostAllocator()->reset_accumulated_stats();)
BINDING(py_reset_peak_host_memory_stats, (), getHostAllocator()->reset_peak_stats();)
BINDING(
    py_record_memory_history,
    (std::optional<std::string> enabled, std::optional<std::string> context, const std::string& stacks,
     int64_t max_entries, bool clear_history, const std::vector<std::string>& skip_actions),
    recordMemoryHistory(parse_history_options(enabled, context, stacks, max_entries, clear_history, skip_actions));)
// Memory pools: a MemPool retains its pool on its device while it lives; a
// use_mem_pool context retains it too and routes this thread's allocations.
BINDING(py_mempool_new_id, (bool user_created), return new_mempool_id(user_created);)
BINDING(
    py_mempool_retain, (int device, c10::MempoolId_t id, bool no_split), retainMemPool(to_index(device), id, no_split);)
BINDING(py_mempool_release, (int device, c10::MempoolId_t id), releaseMemPool(to_index(device), id);)
BINDING(py_mempool_use_count, (int device, c10::MempoolId_t id), return memPoolUseCount(to_index(device), id);)
BINDING(py_mempool_begin, (int device, c10::MempoolId_t id), {
  retainMemPool(to_index(device), id, false);
  begin_allocate_to_pool(to_index(device), id);
})
BINDING(py_mempool_end, (int device, c10::MempoolId_t id), {
  end_allocate_to_pool(to_index(device), id);
  releaseMemPool(to_index(device), id);
})
BINDING(py_is_current_stream_capturing, (), return stream_is_capturing(getCurrentOpenRegStream().unwrap());)
BINDING(py_set_sync_debug_mode, (int mode), {
  TORCH_CHECK(mode >= 0 && mode <= 2, "invalid value of debug_mode, expected one of 0,1,2");
  set_sync_debug_mode(static_cast<SyncDebugMode>(mode));
})
BINDING(py_get_sync_debug_mode, (), return static_cast<int>(get_sync_debug_mode());)
BINDING(py_set_caching_enabled, (bool enabled), setCachingEnabled(enabled);)
BINDING(py_check_device_index, (int index), check_device_index(to_index(index));)
BINDING(py_memory_snapshot, (bool include_traces), return memory_snapshot_dict(include_traces);)

}  // namespace

PYBIND11_MODULE(_C, m) {
  at::openreg::route_structured_iterator_defaults();
  m.doc() = "openreg runtime bindings";
  m.def("_init", &py_init);
  m.def("_is_in_bad_fork", [] { return torch::utils::is_device_in_bad_fork(at::kPrivateUse1); });
  m.def("_device_count", &py_device_count);
  m.def("_device_count_non_throwing", [] { return static_cast<int>(device_count_ensure_non_throwing()); });
  m.def("_current_device", &py_current_device);
  m.def("_set_device", &py_set_device);
  m.def("_exchange_device", &py_exchange_device);
  m.def("_synchronize", &py_synchronize);
  m.def("_is_device_initialized", &py_is_device_initialized);
  m.def("_default_generator", &py_default_generator);
  m.def("_fallback_stats", &py_fallback_stats);
  m.def("_stream_priority", &py_stream_priority);
  m.def("_event_elapsed_time", &py_event_elapsed_time);
  m.def("_reset_fallback_stats", &py_reset_fallback_stats);
  m.def("_operators_routed_to_the_host", &at::openreg::operators_routed_to_the_host);
  m.def("_set_memory_fraction", &py_set_memory_fraction);
  m.def("_get_memory_fraction", &py_get_memory_fraction);
  m.def("_caching_allocator_alloc", &py_caching_allocator_alloc);
  m.def("_caching_allocator_delete", &py_caching_allocator_delete);
  m.def("_change_current_allocator", &py_change_current_allocator);
  m.def("_stream_handle", &py_stream_handle);
  m.def("_stream_from_external", &py_stream_from_external);
  m.def("_host_memory_stats", &py_host_memory_stats);
  m.def("_reset_accumulated_host_memory_stats", &py_reset_accumulated_host_memory_stats);
  m.def("_reset_peak_host_memory_stats", &py_reset_peak_host_memory_stats);
  m.def("_options", &py_options);
  m.def("_sanitizer_option", &py_sanitizer_option);
  m.def("_set_sanitizer_enabled", &py_set_sanitizer_enabled);
  m.def("_sanitizer_stream_id", &py_sanitizer_stream_id);
  m.def("_sanitizer_block", &py_sanitizer_block);
  m.def("_set_compiled_kernel_observer", [](const py::object& observer) {
    at::openreg::set_compiled_kernel_observer(observer.ptr());
  });
  m.def("_record_memory_history", &py_record_memory_history);
  m.def("_memory_snapshot", &py_memory_snapshot);
  m.def("_check_device_index", &py_check_device_index);
  m.def("_set_caching_enabled", &py_set_caching_enabled);
  m.def("_caching_enabled", [] { return cachingEnabled(); });
  m.def("_set_sync_debug_mode", &py_set_sync_debug_mode);
  m.def("_get_sync_debug_mode", &py_get_sync_debug_mode);
  m.def("_mempool_new_id", &py_mempool_new_id);
  m.def("_mempool_retain", &py_mempool_retain);
  m.def("_mempool_release", &py_mempool_release);
  m.def("_mempool_use_count", &py_mempool_use_count);
  m.def("_mempool_begin", &py_mempool_begin);
  m.def("_mempool_end", &py_mempool_end);
  m.def("_is_current_stream_capturing", &py_is_current_stream_capturing);
  c10d::openreg::bind_process_group(m);
  m.def("_ipc_share_storage", &py_ipc_share_storage);
  m.def("_ipc_open_storage", &py_ipc_open_storage);
  m.def("_ipc_release_reference", &py_ipc_release_reference);
  m.def("_ipc_collect", &py_ipc_collect);
  m.add_object(
      at::openreg::compiled_kernel_call_method.ml_name,
      py::reinterpret_steal<py::object>(
          PyCFunction_NewEx(&at::openreg::compiled_kernel_call_method, nullptr, m.ptr())));
  m.def("_cuda_contract_add_dtype_refusal", &py_cuda_contract_add_dtype_refusal);
  m.def("_cuda_contract_add_alert", &py_cuda_contract_add_alert);
  m.def("_cuda_contract_add_widening", &py_cuda_contract_add_widening);
  m.def("_cuda_contract_add_missing", &py_cuda_contract_add_missing);
  m.def("_set_cuda_contract_enabled", [](bool enabled) { at::openreg::set_cuda_contract_enabled(enabled); });
  m.def("_cuda_contract_enabled", [] { return at::openreg::cuda_contract_enabled(); });
  m.def("_range_push", &py_range_push);
  m.def("_range_pop", &py_range_pop);
}
