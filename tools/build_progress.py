"""The build's progress in lines a person reads: one per compiled file, one per linked library.

BuildExtension runs ninja verbosely, which prints every compile command in full
(a few kilobytes a file), and setuptools prints every link command (the one of
torch_openreg._C names every object: about ten kilobytes). setup.py runs the
compiles and links inside ``one_line_per_step``, which shows the step instead:
"[12/85] compiling csrc/aten/Copy.cpp", "linking build/.../_C....so".
"""

import contextlib
import os
import re
import sys
import threading

_COMPILE = re.compile(r"^(\[\d+/\d+\]) .* -c (\S+) -o ")
# distutils' link command: the linker, -shared, the objects, then -o and the library.
_LINK = re.compile(r"^\S+ .*-shared .*? -o (\S+)")


def progress_line(line, root):
    """The line shown for one line of the build's output (paths relative to ``root``); other lines as they are."""
    step = _COMPILE.match(line)
    if step:
        return f"{step[1]} compiling {os.path.relpath(step[2], root)}\n"
    link = _LINK.match(line)
    if link:
        return f"linking {os.path.relpath(link[1], root)}\n"
    return line


@contextlib.contextmanager
def one_line_per_step(root):
    """Inside this, standard output (file descriptor 1, which ninja inherits) shows ``progress_line``'s lines."""
    sys.stdout.flush()
    read_end, write_end = os.pipe()
    saved_stdout = os.dup(1)
    os.dup2(write_end, 1)
    os.close(write_end)

    def forward():
        with open(read_end, errors="replace") as lines, open(os.dup(saved_stdout), "w") as out:
            for line in lines:
                out.write(progress_line(line, root))
                out.flush()

    forwarder = threading.Thread(target=forward)
    forwarder.start()
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved_stdout, 1)  # closes the pipe's last write end: the forwarder ends
        os.close(saved_stdout)
        forwarder.join()
