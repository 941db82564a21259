"""Reading a file that must be a regular file (a tokenizer.json, a command's
input): anything else (a FIFO, a device, a socket, a directory) is refused
with one line, instead of blocking on a FIFO nobody writes or reading a
device forever."""

from __future__ import annotations

import os
import stat

from qwen4exp.errors import Qwen4ExpError

__all__ = ["NotRegularFileError", "kind_of", "read_regular_file"]


class NotRegularFileError(Qwen4ExpError):
    """A path that should name a regular file names a FIFO, a device, a socket
    or a directory."""


_KINDS = (
    (stat.S_ISDIR, "directory"),
    (stat.S_ISFIFO, "FIFO"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISLNK, "symbolic link"),
)


def kind_of(mode: int) -> str:
    """"regular file", "directory", "FIFO", "character device", ... for a st_mode."""
    if stat.S_ISREG(mode):
        return "regular file"
    return next((name for test, name in _KINDS if test(mode)), "special file")


def read_regular_file(path: str) -> bytes:
    """The bytes of the regular file `path` (symbolic links followed).

    OSError when it cannot be opened or read (missing, permission denied,
    I/O error); NotRegularFileError when it is not a regular file. The kind is
    checked before opening (opening a device can have effects of its own) and
    again on the open descriptor, which is opened non-blocking: a FIFO swapped
    in between cannot block the call."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise NotRegularFileError(f"{path} is a {kind_of(mode)}, not a regular file")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFileError(f"{path} is a {kind_of(mode)}, not a regular file")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=True) as f:
            fd = -1
            return f.read()
    finally:
        if fd >= 0:
            os.close(fd)
