#include "Error.h"

#include <cstdarg>
#include <cstdio>
#include <string>

namespace openreg::runtime {

namespace {
thread_local std::string lastErrorMessage;
}  // namespace

orError_t fail(orError_t code, const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list sizing;
  va_copy(sizing, args);
  const int length = std::vsnprintf(nullptr, 0, format, sizing);
  va_end(sizing);
  std::string message(length > 0 ? static_cast<size_t>(length) : 0, '\0');
  // vsnprintf writes the terminating NUL at message[length], which std::string
  // guarantees to be addressable.
  std::vsnprintf(message.data(), message.size() + 1, format, args);
  va_end(args);
  lastErrorMessage = std::move(message);
  return code;
}

}  // namespace openreg::runtime

const char* orGetErrorName(orError_t error) {
  switch (error) {
    case orSuccess:
      return "orSuccess";
    case orErrorInvalidValue:
      return "orErrorInvalidValue";
    case orErrorMemoryAllocation:
      return "orErrorMemoryAllocation";
    case orErrorInitializationError:
      return "orErrorInitializationError";
    case orErrorInvalidDevice:
      return "orErrorInvalidDevice";
    case orErrorInvalidDevicePointer:
      return "orErrorInvalidDevicePointer";
    case orErrorInvalidMemcpyDirection:
      return "orErrorInvalidMemcpyDirection";
    case orErrorIllegalState:
      return "orErrorIllegalState";
    case orErrorNotReady:
      return "orErrorNotReady";
    case orErrorInvalidResourceHandle:
      return "orErrorInvalidResourceHandle";
    case orErrorHostWriteDuringCopy:
      return "orErrorHostWriteDuringCopy";
  }
  return "unrecognized error code";
}

const char* orGetErrorString(orError_t error) {
  switch (error) {
    case orSuccess:
      return "no error";
    case orErrorInvalidValue:
      return "an argument is invalid or out of range";
    case orErrorMemoryAllocation:
      return "out of memory";
    case orErrorInitializationError:
      return "the OPENREG_* environment is invalid; the runtime cannot be initialized";
    case orErrorInvalidDevice:
      return "invalid device index";
    case orErrorInvalidDevicePointer:
      return "the pointer or range is not inside a live device allocation";
    case orErrorInvalidMemcpyDirection:
      return "the pointers do not match the direction of the memcpy kind";
    case orErrorIllegalState:
      return "the operation is not allowed in the allocation's current state";
    case orErrorNotReady:
      return "queued work has not completed yet";
    case orErrorInvalidResourceHandle:
      return "the stream or event handle is not live, or the event cannot be used this way";
    case orErrorHostWriteDuringCopy:
      return "the host wrote into the source of an asynchronous copy before the copy ran";
  }
  return "unrecognized error code";
}

const char* orGetLastErrorMessage(void) {
  return openreg::runtime::lastErrorMessage.c_str();
}
