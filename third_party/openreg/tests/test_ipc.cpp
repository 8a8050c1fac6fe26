// Inter-process sharing (orIpc*): three forked children export, import and
// release one allocation.
#include <poll.h>
#include <signal.h>

#include <initializer_list>
#include <tuple>

#include "harness.h"

namespace openreg_test {
namespace {

// A one-way pipe between two of the children below. Each process keeps only
// the end it uses, so a reader sees end-of-file once its writer exits.
struct Pipe {
  int read = -1, write = -1;
  Pipe() {
    int ends[2];
    if (pipe(ends) == 0)
      std::tie(read, write) = std::tie(ends[0], ends[1]);
  }
};

void closeAll(std::initializer_list<int> fds) {
  for (int fd : fds)
    close(fd);
}

// Reads exactly `bytes`; false on end-of-file, an error, or 10 s without data,
// so a child whose peer died fails instead of hanging.
bool receive(int fd, void* data, size_t bytes) {
  auto* cursor = static_cast<char*>(data);
  while (bytes > 0) {
    pollfd ready{fd, POLLIN, 0};
    if (poll(&ready, 1, 10000) != 1)
      return false;
    const ssize_t got = ::read(fd, cursor, bytes);
    if (got <= 0)
      return false;
    cursor += got;
    bytes -= static_cast<size_t>(got);
  }
  return true;
}

bool send(int fd, const void* data, size_t bytes) {
  return ::write(fd, data, bytes) == static_cast<ssize_t>(bytes);
}

// Forks a child that runs body with env (before any API call) and exits.
pid_t startChild(const Environment& env, const std::function<void()>& body) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    for (const char* name : kEnvironment)
      unsetenv(name);
    for (const auto& [name, value] : env)
      setenv(name, value, 1);
    body();
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(0);
  }
  return pid;
}

// Waits up to 20 s for the child, then kills it; returns its wait status.
int reap(pid_t pid) {
  int status = 0;
  for (int i = 0; i < 2000; ++i) {
    if (waitpid(pid, &status, WNOHANG) == pid)
      return status;
    std::this_thread::sleep_for(10ms);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return status;
}

}  // namespace

// One exporter and two importers, the processes a CUDA IPC test would use.
void testIpc() {
  constexpr size_t kSize = 3 * kPage;
  const std::vector<unsigned char> exported = pattern(kSize, 11);
  const std::vector<unsigned char> imported = pattern(kSize, 12);
  Pipe handleToImporter, handleToSmallImporter, importerWrote, exporterChecked;
  const Environment twoDevices{{"OPENREG_DEVICE_COUNT", "2"}};

  const pid_t exporter = startChild(twoDevices, [&] {
    closeAll({handleToImporter.read, handleToSmallImporter.read, importerWrote.write, exporterChecked.read});
    CHECK_OK(orSetDevice(1));
    void* ptr = nullptr;
    CHECK_OK(orMalloc(&ptr, kSize));
    CHECK_OK(orMemcpy(ptr, exported.data(), kSize, orMemcpyHostToDevice));
    orIpcMemHandle_t handle{};
    CHECK_ERR(orIpcGetMemHandle(nullptr, ptr), orErrorInvalidValue);
    int local = 0;
    CHECK_ERR(orIpcGetMemHandle(&handle, &local), orErrorInvalidDevicePointer);
    orIpcMemHandle_t inner{};
    CHECK_OK(orIpcGetMemHandle(&inner, offset(ptr, kPage + 5)));  // the whole allocation
    CHECK_OK(orIpcGetMemHandle(&handle, ptr));
    CHECK(std::memcmp(&inner, &handle, sizeof handle) == 0);
    void* self = nullptr;
    CHECK_ERR(orIpcOpenMemHandle(&self, handle, 0), orErrorInvalidValue);
    CHECK_MESSAGE_HAS("exported by this process");
    CHECK(send(handleToImporter.write, &handle, sizeof handle));
    CHECK(send(handleToSmallImporter.write, &handle, sizeof handle));
    char signal = 0;
    CHECK(receive(importerWrote.read, &signal, 1));
    CHECK(readBack(ptr, kSize) == imported);  // the importer's writes
    CHECK(send(exporterChecked.write, &signal, 1));
  });

  const pid_t smallImporter = startChild({{"OPENREG_DEVICE_COUNT", "1"}}, [&] {
    closeAll(
        {handleToImporter.read, handleToImporter.write, handleToSmallImporter.write, importerWrote.read,
         importerWrote.write, exporterChecked.read, exporterChecked.write});
    orIpcMemHandle_t handle{};
    CHECK(receive(handleToSmallImporter.read, &handle, sizeof handle));
    void* ptr = nullptr;
    CHECK_ERR(orIpcOpenMemHandle(&ptr, handle, 0), orErrorInvalidDevice);
    CHECK_MESSAGE_HAS("exported from device 1 of process");
    CHECK_MESSAGE_HAS("this process has 1 device");
  });

  const pid_t importer = startChild(twoDevices, [&] {
    closeAll(
        {handleToImporter.write, handleToSmallImporter.read, handleToSmallImporter.write, importerWrote.read,
         exporterChecked.write});
    orIpcMemHandle_t handle{};
    CHECK(receive(handleToImporter.read, &handle, sizeof handle));
    void* ptr = nullptr;
    CHECK_ERR(orIpcOpenMemHandle(nullptr, handle, 0), orErrorInvalidValue);
    CHECK_ERR(orIpcOpenMemHandle(&ptr, handle, 1), orErrorInvalidValue);
    CHECK_ERR(orIpcOpenMemHandle(&ptr, orIpcMemHandle_t{}, 0), orErrorInvalidValue);
    CHECK_MESSAGE_HAS("not made by orIpcGetMemHandle");

    CHECK_OK(orIpcOpenMemHandle(&ptr, handle, 0));
    void* again = nullptr;
    CHECK_OK(orIpcOpenMemHandle(&again, handle, 0));
    CHECK(again == ptr);  // mapped once, counted
    orPointerAttributes attributes{};
    CHECK_OK(orPointerGetAttributes(&attributes, offset(ptr, kPage)));
    CHECK(attributes.type == orMemoryTypeDevice && attributes.device == 1);
    CHECK(attributes.basePointer == ptr && attributes.allocationSize == kSize);
    CHECK(readBack(ptr, kSize) == exported);

    // Protected like the importer's own device memory.
    const pid_t reader = fork();
    if (reader == 0) {
      rlimit noCore{0, 0};
      setrlimit(RLIMIT_CORE, &noCore);
      _exit(*static_cast<volatile unsigned char*>(ptr));
    }
    const int status = reap(reader);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV);

    // Scoped access, copies in every direction, and the rules of device memory.
    void* host = nullptr;
    CHECK_OK(orMemAccessBegin(offset(ptr, kPage), kPage, &host));
    CHECK(std::memcmp(host, exported.data() + kPage, kPage) == 0);
    CHECK_OK(orIpcCloseMemHandle(ptr));  // one of two opens
    CHECK_ERR(orIpcCloseMemHandle(ptr), orErrorIllegalState);
    CHECK_MESSAGE_HAS("open host access");
    CHECK_OK(orMemAccessEnd(offset(ptr, kPage)));
    CHECK_OK(orMemcpy(ptr, imported.data(), kSize, orMemcpyHostToDevice));
    void* local = nullptr;
    CHECK_OK(orMalloc(&local, kSize));  // device 0
    CHECK_OK(orMemcpy(local, ptr, kSize, orMemcpyDeviceToDevice));
    CHECK(readBack(local, kSize) == imported);
    CHECK_OK(orMemcpyAsync(local, ptr, kSize, orMemcpyDeviceToDevice, nullptr));
    CHECK_OK(orStreamSynchronize(nullptr));
    std::vector<unsigned char> bytes(kSize);
    CHECK_ERR(orMemcpy(bytes.data(), ptr, kSize, orMemcpyHostToHost), orErrorInvalidMemcpyDirection);
    CHECK_ERR(orFree(ptr), orErrorInvalidDevicePointer);
    CHECK_MESSAGE_HAS("orIpcCloseMemHandle");
    orIpcMemHandle_t reexported{};
    CHECK_ERR(orIpcGetMemHandle(&reexported, ptr), orErrorInvalidValue);
    CHECK_MESSAGE_HAS("only the process that allocated it");
    char signal = 1;
    CHECK(send(importerWrote.write, &signal, 1));
    CHECK(receive(exporterChecked.read, &signal, 1));

    // The exporter exits (end-of-file); the opened pages stay valid.
    CHECK(!receive(exporterChecked.read, &signal, 1));
    CHECK(readBack(ptr, kSize) == imported);
    CHECK_OK(orIpcCloseMemHandle(ptr));
    CHECK_ERR(orIpcCloseMemHandle(ptr), orErrorInvalidDevicePointer);
    CHECK_OK(orPointerGetAttributes(&attributes, ptr));
    CHECK(attributes.type == orMemoryTypeUnregistered);
    CHECK_ERR(orIpcOpenMemHandle(&ptr, handle, 0), orErrorInvalidResourceHandle);
    CHECK_MESSAGE_HAS("has exited");
    CHECK_OK(orFree(local));
  });

  closeAll(
      {handleToImporter.read, handleToImporter.write, handleToSmallImporter.read, handleToSmallImporter.write,
       importerWrote.read, importerWrote.write, exporterChecked.read, exporterChecked.write});
  for (const pid_t pid : {exporter, smallImporter, importer}) {
    CHECK_CHILD_EXITED_CLEANLY(reap(pid));
  }
}

}  // namespace openreg_test
