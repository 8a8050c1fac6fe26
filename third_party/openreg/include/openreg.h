// openreg: a simulated accelerator runtime with a CUDA-runtime-shaped C API.
//
// The runtime knows nothing of PyTorch. Each device owns an arena of
// OPENREG_DEVICE_MEMORY bytes that is mapped twice: a "user view" whose
// addresses orMalloc hands out (PROT_NONE when memory protection is on, so a
// host dereference of a device pointer faults as it would on real hardware)
// and a "host view" of the same pages through which the runtime itself, and
// callers inside a scoped access (orMemAccessBegin/End), read and write.
//
// Environment, read once at first use:
//   OPENREG_DEVICE_COUNT       number of devices, 1..16 (default 2)
//   OPENREG_DEVICE_MEMORY      capacity per device, bytes with an optional
//                              K/M/G suffix (default 8G)
//   OPENREG_MEMORY_PROTECTION  0 maps the user view read-write (default 1)
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum orError_t {
  orSuccess = 0,
  // An argument is out of range (null out-pointer, unknown copy kind, ...).
  orErrorInvalidValue = 1,
  // Not enough free device (or host) memory for the request.
  orErrorMemoryAllocation = 2,
  // The OPENREG_* environment is invalid; every call fails with this code.
  orErrorInitializationError = 3,
  // Device index outside [0, device count).
  orErrorInvalidDevice = 4,
  // Pointer (or range) is not inside a live allocation of the expected kind.
  orErrorInvalidDevicePointer = 5,
  // Pointers do not match the direction named by the orMemcpyKind.
  orErrorInvalidMemcpyDirection = 6,
  // orFree of an allocation that still has open host accesses, or
  // orMemAccessEnd without a matching orMemAccessBegin.
  orErrorIllegalState = 7,
  // Queued work has not completed yet (orStreamQuery, orEventQuery,
  // orEventElapsedTime on an event that has not completed).
  orErrorNotReady = 8,
  // A stream or event handle that is not live, or an event created with
  // orEventDisableTiming passed to orEventElapsedTime, or one never recorded,
  // or two events last recorded on different devices; an IPC handle whose
  // exporting process has exited.
  orErrorInvalidResourceHandle = 9,
  // Completion checks (orSetCompletionChecks) found that the host wrote into
  // the source of an asynchronous copy after issuing it and before the copy
  // ran; the message names the range, the stream and the first changed byte.
  orErrorHostWriteDuringCopy = 10,
} orError_t;

typedef enum orMemcpyKind {
  orMemcpyHostToHost = 0,
  orMemcpyHostToDevice = 1,
  orMemcpyDeviceToHost = 2,
  orMemcpyDeviceToDevice = 3,
} orMemcpyKind;

typedef enum orMemoryType {
  orMemoryTypeUnregistered = 0,  // ordinary (pageable) host memory
  orMemoryTypeHost = 1,  // allocated by orMallocHost
  orMemoryTypeDevice = 2,  // inside a live orMalloc allocation
} orMemoryType;

typedef struct orPointerAttributes {
  orMemoryType type;
  int device;  // owning device for device memory, -1 otherwise
  void* basePointer;  // start of the containing allocation (NULL if none)
  size_t allocationSize;  // size of the containing allocation (0 if none)
} orPointerAttributes;

// Devices. The current device is per thread and starts at 0.
orError_t orGetDeviceCount(int* count);
orError_t orSetDevice(int device);
orError_t orGetDevice(int* device);
// Blocks until all work queued on the current device's streams has finished.
orError_t orDeviceSynchronize(void);
// 1 if the device's memory arena has been created (first allocation), else 0.
orError_t orDeviceIsInitialized(int device, int* initialized);

// Device memory, on the current device. Allocations are page-granular and
// page-aligned; size 0 yields NULL and succeeds. orFree(NULL) succeeds.
// orFree first waits for the work queued on the device's streams (as cudaFree
// synchronizes), so no queued copy can touch freed memory, and returns once
// no synchronous copy another thread started on the allocation is still
// running: after orFree returns, every entry point refuses the pointer.
// Copies, scoped accesses and attribute queries take no lock; orMalloc and
// orFree serialize per device (docs/design.md, section 1).
orError_t orMalloc(void** devPtr, size_t size);
orError_t orFree(void* devPtr);
// Free and total bytes of the current device.
orError_t orMemGetInfo(size_t* freeBytes, size_t* totalBytes);

// Page-locked host memory.
orError_t orMallocHost(void** ptr, size_t size);
orError_t orFreeHost(void* ptr);

// Synchronous copy. Every device pointer must lie, with its whole range,
// inside one live allocation; host pointers must not be device pointers.
orError_t orMemcpy(void* dst, const void* src, size_t count, orMemcpyKind kind);

orError_t orPointerGetAttributes(orPointerAttributes* attributes, const void* ptr);

// Scoped host access to device memory. [devPtr, devPtr + size) must lie inside
// one live allocation; *hostPtr receives the host-view address of devPtr, valid
// until the matching orMemAccessEnd(devPtr). Accesses are counted per
// allocation: several threads may hold them at once, and an allocation cannot
// be freed while any is open.
orError_t orMemAccessBegin(const void* devPtr, size_t size, void** hostPtr);
orError_t orMemAccessEnd(const void* devPtr);
// The same for several ranges of one device at once, as a kernel launch
// opens its arguments: count orMemAccessBegin(devPtrs[i], sizes[i],
// &hostPtrs[i]) calls (or count orMemAccessEnd(devPtrs[i]) calls) made
// against one snapshot of the device's allocation table, with one atomic
// update per run of pointers into one allocation, so they cost little more
// than one. All pointers must belong to one device (orErrorInvalidValue
// otherwise). All or nothing: on any error no access has been opened (or
// ended), and the message names the failing devPtrs[i]. count 0 succeeds and
// does nothing; the arrays may then be NULL.
orError_t orMemAccessBeginBatch(size_t count, const void* const* devPtrs, const size_t* sizes, void** hostPtrs);
orError_t orMemAccessEndBatch(size_t count, const void* const* devPtrs);

// Inter-process sharing of device memory, shaped like CUDA's cudaIpc*.
// orIpcGetMemHandle describes the whole live allocation containing devPtr as
// plain bytes that any channel may carry to another process of the same user
// on this machine. orIpcOpenMemHandle there maps that allocation into the
// process, on the same device index, and returns its base: a device pointer
// like any other (copies, scoped host access under memory protection, pointer
// attributes naming the device). Opening the same allocation again returns
// the same pointer and counts; each open needs one orIpcCloseMemHandle, and
// the last one waits for queued copies touching it (as orFree does), then
// unmaps it. The exporter must keep the allocation (and itself) alive until
// the importer has opened it; once opened, the pages stay valid in the
// importer even if the exporter exits. Memory opened from a handle cannot be
// exported again, orFree'd, or opened by the process that exported it. As
// with orFree, a host function must not close memory of its own stream's
// device (the last close waits for that stream).
enum { OR_IPC_HANDLE_SIZE = 64 };
typedef struct orIpcMemHandle_t {
  char reserved[OR_IPC_HANDLE_SIZE];
} orIpcMemHandle_t;
orError_t orIpcGetMemHandle(orIpcMemHandle_t* handle, void* devPtr);
// flags must be 0.
orError_t orIpcOpenMemHandle(void** devPtr, orIpcMemHandle_t handle, unsigned int flags);
orError_t orIpcCloseMemHandle(void* devPtr);

// Streams. Work submitted to a stream (asynchronous copies, host functions,
// event records, waits) runs in submission order on that stream's own worker
// thread, asynchronously to the caller. A NULL stream means the current
// device's default stream, which is an ordinary in-order stream (it does not
// implicitly synchronize with other streams). Priorities follow CUDA: lower
// numbers are higher priority, within orDeviceGetStreamPriorityRange.
typedef struct orStream* orStream_t;
typedef struct orEvent* orEvent_t;

orError_t orStreamCreate(orStream_t* stream);
orError_t orStreamCreateWithPriority(orStream_t* stream, unsigned int flags, int priority);
// Waits for the stream's queued work, then releases it. The default stream
// cannot be destroyed.
orError_t orStreamDestroy(orStream_t stream);
// orSuccess if all work submitted so far has completed, orErrorNotReady if not
// (under completion checks, it completes the work first).
orError_t orStreamQuery(orStream_t stream);
orError_t orStreamSynchronize(orStream_t stream);
// Work submitted to `stream` after this call waits until `event` completes
// (its most recent record at the time of this call). flags must be 0.
orError_t orStreamWaitEvent(orStream_t stream, orEvent_t event, unsigned int flags);
orError_t orStreamGetDevice(orStream_t stream, int* device);
orError_t orStreamGetPriority(orStream_t stream, int* priority);
orError_t orDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority);
// Runs fn(userData) on the stream's worker, in order with its other work.
// fn must not wait for work queued behind it: orStreamSynchronize or
// orStreamDestroy of its own stream, or orDeviceSynchronize or orFree on that
// stream's device, called from fn, deadlock (as cudaLaunchHostFunc warns).
orError_t orLaunchHostFunc(orStream_t stream, void (*fn)(void*), void* userData);
// Validates like orMemcpy when called; copies when the stream reaches it.
orError_t orMemcpyAsync(void* dst, const void* src, size_t count, orMemcpyKind kind, orStream_t stream);

// Events, recorded into streams. orEventDisableTiming as in CUDA.
enum { orEventDefault = 0x0, orEventDisableTiming = 0x2 };
orError_t orEventCreate(orEvent_t* event);
orError_t orEventCreateWithFlags(orEvent_t* event, unsigned int flags);
// Captures the work submitted to `stream` so far; the event completes (and
// takes its timestamp) when the stream reaches this point.
orError_t orEventRecord(orEvent_t event, orStream_t stream);
// orSuccess if the last record completed (or there was none), else NotReady
// (under completion checks, it completes the record first).
orError_t orEventQuery(orEvent_t event);
orError_t orEventSynchronize(orEvent_t event);
// Milliseconds between two completed, timed events, last recorded on streams
// of the same device.
orError_t orEventElapsedTime(float* ms, orEvent_t start, orEvent_t end);
orError_t orEventDestroy(orEvent_t event);

// Completion checks: a mode that makes missing synchronization show every
// time instead of when a stream's worker happens to be late. Off by default;
// process-wide. While it is on, work queued on a stream does not start until
// something needs it complete: orStreamSynchronize or orStreamDestroy of that
// stream; orEventSynchronize of an event recorded on it (which completes the
// work up to that record only); orDeviceSynchronize, orFree or the last
// orIpcCloseMemHandle on its device; another stream reaching an
// orStreamWaitEvent on such an event. orStreamQuery and orEventQuery answer
// orErrorNotReady while such work is held back and do not start it, as a busy
// device would answer; a caller that polls must synchronize at some point. A
// host function that waits for another stream's work by its own means rather
// than through an event waits forever, since nothing the runtime sees needs
// that work. orEventElapsedTime needs
// nothing complete: synchronize the end event first.
// Asynchronous copies issued while the mode is on check their host ends:
// - A host destination (DeviceToHost, HostToHost) is filled with 0xFF bytes
//   at the call (NaN as every floating-point type, -1 as every signed
//   integer) and receives the data when the copy completes, so a host read
//   before synchronizing sees that poison. A destination that overlaps the
//   host source of a checked copy still queued is left alone: that copy must
//   still read it.
// - A host source (HostToDevice, HostToHost) is snapshotted at the call. The
//   copy still reads the source when it runs, and compares it with the
//   snapshot first: a difference means the host wrote into it in between.
//   The first of the calls above to observe the copy complete then returns
//   orErrorHostWriteDuringCopy, for that copy once (orFree and
//   orIpcCloseMemHandle leave it to the next; orStreamDestroy returns it
//   after destroying the stream). Bytes that an earlier checked copy writes
//   into the source are the stream's own, not the host's; bytes a host
//   function writes count as the host's.
// Changing the mode lets all work queued so far run as it would have, and
// copies issued while the mode is off are not checked. A copy that fails to
// queue may leave its destination poisoned. enabled must be 0 or 1.
orError_t orSetCompletionChecks(int enabled);
orError_t orGetCompletionChecks(int* enabled);

// Activity records: a CUPTI-like account of the work executed on streams,
// for profilers. While recording is enabled, the runtime records one activity
// per piece of work: each host-executed kernel (bracketed by orKernelBegin /
// orKernelEnd), each copy (orMemcpy, orMemcpyAsync), each host function
// (orLaunchHostFunc) and each range (orRangePush / orRangePop), with its start
// and end time, device, stream and the external correlation id the launching
// thread had pushed. When recording is off, each of these paths costs one
// relaxed atomic load.
typedef enum orActivityKind {
  orActivityKindKernel = 0,
  orActivityKindMemcpy = 1,
  orActivityKindHostFunc = 2,
  orActivityKindRange = 3,
} orActivityKind;

typedef struct orActivity {
  orActivityKind kind;
  // The kernel's or range's name as given; "Memcpy HtoD" (and DtoH, DtoD,
  // HtoH) for copies; "Host function" for host functions. Valid during the
  // orActivityFlush callback only.
  const char* name;
  int device;
  // The stream the work ran on: NULL for the device's default stream, which
  // is also where synchronous copies (orMemcpy) are recorded.
  orStream_t stream;
  // The innermost external correlation id the launching thread had pushed
  // when it launched the work; 0 if none.
  uint64_t correlationId;
  // Nanoseconds since the Unix epoch (CLOCK_REALTIME, the clock of
  // std::chrono::system_clock); end >= start.
  int64_t start;
  int64_t end;
  orMemcpyKind memcpyKind;  // copies only
  size_t bytes;  // copies only, else 0
} orActivity;

// Recording is on while at least one consumer has enabled it. orActivityDisable
// without a matching orActivityEnable fails with orErrorIllegalState.
orError_t orActivityEnable(void);
orError_t orActivityDisable(void);
// Hands every completed record to fn, oldest first, and forgets them. Work
// still queued on a stream is recorded when it completes: synchronize first.
orError_t orActivityFlush(void (*fn)(const orActivity* activity, void* userData), void* userData);
// A per-thread stack of external correlation ids (as cupti's): work the thread
// launches is tagged with the innermost one. Popping an empty stack fails with
// orErrorIllegalState; id may be NULL.
orError_t orActivityPushExternalCorrelationId(uint64_t id);
orError_t orActivityPopExternalCorrelationId(uint64_t* id);

// Host-executed kernels. A kernel of this device runs on the thread that
// launches it, after that thread has waited for the work queued on `stream`;
// bracketing it with these calls records it as work of `stream`. *kernel is
// NULL when recording is off (orKernelEnd(NULL) does nothing), so the bracket
// costs one relaxed atomic load then; stream and name are checked only while
// recording. The name is nameLength bytes, copied.
// orKernelEnd must be called on the thread that began the kernel: orMemcpy
// calls that thread makes in between are part of the kernel's record.
typedef struct orKernelActivity* orKernelActivity_t;
orError_t orKernelBegin(orStream_t stream, const char* name, size_t nameLength, orKernelActivity_t* kernel);
orError_t orKernelEnd(orKernelActivity_t kernel);

// Ranges: named intervals of a stream's timeline, like NVTX ranges but shown
// on the stream itself. A range opens when `stream` reaches the push and
// closes when it reaches the matching pop (at once when the stream is idle).
// Ranges nest per thread; orRangePop closes the thread's innermost one and
// fails with orErrorIllegalState if none is open. A range is recorded if
// recording was on when it was pushed.
orError_t orRangePush(orStream_t stream, const char* name);
orError_t orRangePop(void);

const char* orGetErrorName(orError_t error);
const char* orGetErrorString(orError_t error);
// Detail of the last failed call on this thread (names sizes, devices and
// pointers); "" if none failed yet.
const char* orGetLastErrorMessage(void);

#ifdef __cplusplus
}  // extern "C"
#endif
