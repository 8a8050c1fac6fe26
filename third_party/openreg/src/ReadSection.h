// Read sections: lock-free readers of data that writers replace and reclaim
// (read-copy-update).
//
// A reader brackets its use of shared data with a ReadSection; a writer
// publishes the new version, calls waitForReaders(), and only then reclaims
// the old one: every section that could have seen it has ended by then.
// Entering and leaving a section costs two plain stores to a per-thread slot
// and no locked instruction: the store-load ordering that a reader would
// otherwise need (its slot store before its data loads, against the writer's
// publication before its slot scan) is supplied by the writer, with a
// process-wide membarrier(2) that acts as a full fence on every running thread.
// Readers fence themselves until the process is registered for it (in the
// background, from the first use on) and wherever the kernel refuses it.
#pragma once

namespace openreg::runtime {

struct ReaderSlot;

class ReadSection {
 public:
  ReadSection();
  ~ReadSection();
  ReadSection(const ReadSection&) = delete;
  ReadSection& operator=(const ReadSection&) = delete;

 private:
  ReaderSlot* slot_;  // null in a nested section: the outer one covers it
};

// Returns once every ReadSection that began before the call has ended. Must
// not be called inside a ReadSection (it would wait for itself), nor while
// holding a lock that a reader may take inside one.
void waitForReaders();

}  // namespace openreg::runtime
