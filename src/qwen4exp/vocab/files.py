"""Reading a file that must be a regular file (a tokenizer.json, a command's
input): anything else (a FIFO, a device, a socket, a directory) is refused
with one line, instead of blocking on a FIFO nobody writes or reading a
device forever. Every file qwen4exp reads is opened here (tests/test_file_readers.py
lists the few justified exceptions: package data, files it wrote itself)."""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

from qwen4exp.errors import Qwen4ExpError

__all__ = ["NotRegularFileError", "FileTooLargeError", "kind_of", "open_regular_file", "read_regular_file"]


class NotRegularFileError(Qwen4ExpError):
    """A path that should name a regular file names a FIFO, a device, a socket
    or a directory."""


class FileTooLargeError(Qwen4ExpError):
    """A file past the size its reader accepts (a bound on what reading it
    allocates)."""


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


def open_regular_file(path: str) -> BinaryIO:
    """The regular file `path` (symbolic links followed) open for reading in
    binary mode, for a reader that streams it.

    OSError when it cannot be opened (missing, permission denied, a loop of
    links); NotRegularFileError when it is not a regular file. The kind is
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
        f = os.fdopen(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise
    return f


def read_regular_file(path: str, limit: int | None = None) -> bytes:
    """The bytes of the regular file `path` (see open_regular_file), at most
    `limit` of them: a larger file is a FileTooLargeError, before its bytes
    are read when its size says so (a sparse file of terabytes is refused at
    once), else once the read passes the limit (a file that grew)."""
    with open_regular_file(path) as f:
        if limit is None:
            return f.read()
        if os.fstat(f.fileno()).st_size > limit:
            raise FileTooLargeError(f"{path} is larger than {limit:,} bytes, the most it may be")
        data = f.read(limit + 1)
        if len(data) > limit:
            raise FileTooLargeError(f"{path} is larger than {limit:,} bytes, the most it may be")
        return data
