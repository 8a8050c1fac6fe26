#include "distributed/CollectiveFailure.h"

#include <cerrno>
#include <fstream>

#include <signal.h>
#include <unistd.h>

#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>

#include "distributed/ProcessGroupOpenReg.h"

namespace c10d::openreg {

namespace {

std::string key(int rank) {
  return "orccl_process_" + std::to_string(rank);
}

std::string host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

// An exited process that its parent has not reaped yet is a zombie: gone.
bool running(pid_t pid) {
  if (::kill(pid, 0) != 0) {
    return errno != ESRCH;
  }
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t name_end = line.rfind(") ");
  return name_end == std::string::npos || (line[name_end + 2] != 'Z' && line[name_end + 2] != 'X');
}

}  // namespace

PeerProcesses::PeerProcesses(const c10::intrusive_ptr<Store>& store, int rank, int size) {
  const std::string host = host_name();
  const std::string mine = host + "\n" + std::to_string(::getpid());
  store->set(key(rank), std::vector<uint8_t>(mine.begin(), mine.end()));
  local_pids_.assign(size, 0);
  for (int peer = 0; peer < size; ++peer) {
    const std::vector<uint8_t> value = store->get(key(peer));
    const std::string text(value.begin(), value.end());
    const size_t newline = text.find('\n');
    if (peer != rank && newline != std::string::npos && text.substr(0, newline) == host) {
      local_pids_[peer] = static_cast<pid_t>(std::stoll(text.substr(newline + 1)));
    }
  }
}

std::string PeerProcesses::failure(const char* op, int rank, c10::Device device) const {
  std::string text = c10::str(ProcessGroupOpenReg::kName, " ", op, " on rank ", rank, " (", device, ") failed");
  for (size_t peer = 0; peer < local_pids_.size(); ++peer) {
    if (local_pids_[peer] != 0 && !running(local_pids_[peer])) {
      text += c10::str("; rank ", peer, " (process ", local_pids_[peer], " on this host) is no longer running");
    }
  }
  return text;
}

void rethrow_with(const std::string& context) {
  try {
    throw;
  } catch (c10::Error& error) {
    error.add_context(context);
    throw;
  } catch (const std::exception& error) {
    TORCH_CHECK_WITH(DistBackendError, false, error.what(), "\n", context);
  }
}

}  // namespace c10d::openreg
