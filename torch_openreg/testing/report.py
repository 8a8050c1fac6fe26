"""Result collection: per-case records grouped by operator / module / optimizer, counts, JSON report."""

import json
import os
from collections import Counter

STATUSES = ("passed", "failed", "skipped", "xfail")


class Report:
    """Collects case results; prints failures as they come and the counts at the end."""

    def __init__(self, path=None, verbose=False, write_every=25):
        self.path = path
        self.verbose = verbose
        self.write_every = write_every
        self.groups = {}
        self.counts = Counter()
        self.jobs_done = 0
        self.summary = None  # a suite's own totals, written to the JSON report when set

    def add(self, case):
        group = self.groups.setdefault(case["name"], {"suite": case["suite"], "counts": Counter(), "cases": []})
        group["counts"][case["status"]] += 1
        group["cases"].append(case)
        self.counts[case["status"]] += 1
        if case["status"] == "failed" or self.verbose:
            print(f"{case['status'].upper()} {case_id(case)}: {case.get('message', '')}", flush=True)

    def job_finished(self, total_jobs):
        self.jobs_done += 1
        if self.jobs_done % self.write_every == 0:
            print(f"[{self.jobs_done}/{total_jobs} jobs] {self.counts_line()}", flush=True)
            self.write()

    def counts_line(self):
        return ", ".join(f"{self.counts[status]} {status}" for status in STATUSES[:3])

    def write(self):
        if self.path is None:
            return
        document = {
            "counts": {status: self.counts[status] for status in STATUSES},
            **({"summary": self.summary} if self.summary is not None else {}),
            "groups": {name: {**group, "counts": dict(group["counts"])} for name, group in self.groups.items()},
        }
        temporary = self.path + ".tmp"
        with open(temporary, "w") as file:
            json.dump(document, file, indent=1)
        os.replace(temporary, self.path)

    def close(self):
        """Writes the report and prints the closing lines: ``xfail: N``, then the counts."""
        self.write()
        print(f"xfail: {self.counts['xfail']}")
        print(self.counts_line())
        return self.counts["failed"] == 0


def case_id(case):
    """``suite:name:variant:dtype:sample``, the name used in output and expected-failures discussions."""
    return ":".join(str(case.get(key)) for key in ("suite", "name", "variant", "dtype", "sample"))
