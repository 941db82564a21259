"""Where `qwen4exp batch` results go: OUT (Parquet or JSONL) and the errors
file, each written to a temporary file beside it and renamed into place only
on success; the checks that each is (or will be) a regular file and that no
written path aliases a path the run reads; and the columnar form (`flatten`)
of one chunk's results.

A written path that is a symbolic link is followed: the file it points to is
replaced and the link stays. A path that is (or points to) anything but a
regular file (a FIFO, a device such as /dev/null or /dev/stdout, a socket, a
directory) is refused before any work (exit 2): the rename would replace the
node itself with a regular file. A failure to write (a full disk, a file-size
limit, an I/O error) is an OutputError (exit 4) and leaves neither file.
"""

from __future__ import annotations

import os
import stat

import numpy as np

from .._files import kind_of
from ..arrow import int_array, list_array
from .common import InputError, OutputError, UsageError, need_module

__all__ = ["Sink", "ErrorsFile", "write_errors", "check_paths", "same_file", "flatten", "output_target"]


def output_target(name: str, path: str) -> str:
    """The file `batch` writes for the path `path` given as `name` (OUT, the
    errors file): `path` itself, or the file a symbolic link there points to.
    UsageError (before any work) when that exists and is not a regular file,
    or when its directory does not exist."""
    try:
        mode = os.stat(path).st_mode  # follows symbolic links
    except FileNotFoundError:
        mode = None  # not there yet (or a link to a file not there yet)
    except OSError as exc:
        raise UsageError(f"{name} {path}: {exc.strerror or exc}") from None
    if mode is not None and not stat.S_ISREG(mode):
        link = "a symbolic link to " if os.path.islink(path) else ""
        raise UsageError(
            f"{name} {path} is {link}a {kind_of(mode)}: batch writes a temporary file and renames it "
            f"into place, which would replace it; name a regular file"
        )
    target = os.path.realpath(path)
    directory = os.path.dirname(target)
    if not os.path.isdir(directory):
        raise UsageError(f"{name}'s directory {directory} does not exist")
    return target


def _replace(tmp: str, target: str, name: str) -> None:
    """Rename tmp over target, unless target became something other than a
    regular file since the checks (then OutputError: nothing is replaced)."""
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        raise OutputError(f"{name} {target} became a {kind_of(mode)} during the run: not replaced")
    os.replace(tmp, target)


def _temp_beside(target: str, name: str):
    """(fd, path) of a new temporary file in target's directory, with the mode a new file gets."""
    import tempfile

    directory = os.path.dirname(target)
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(target)}.", suffix=".tmp")
    except OSError as exc:
        raise OutputError(f"cannot write {name} in {directory}: {exc.strerror or exc}") from None
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp makes 0600; the file gets the usual mode
    except OSError:
        pass
    return fd, tmp


class Sink:
    """Writes to a temporary file beside OUT (or beside the file a link at OUT
    points to); `commit` renames it into place."""

    def __init__(self, out: str, fmt: str, extra=None):
        self.out = out
        self.fmt = fmt
        self.extra = extra  # columns.ExtraColumns: the columns after index, ids, length
        self.target = output_target("OUT", out)
        fd, self.tmp = _temp_beside(self.target, "OUT")
        self.rows = 0
        self._writer = None
        try:
            if fmt == "parquet":
                os.close(fd)
                pa = need_module("pyarrow")
                pq = need_module("pyarrow.parquet")
                self._pa, self._pq = pa, pq
                self.schema = pa.schema(
                    [("index", pa.int64()), ("ids", pa.list_(pa.int32())), ("length", pa.int32())]
                )
                if not self.extra:  # else opened at the first write, when the extra columns' types are known
                    self._writer = pq.ParquetWriter(self.tmp, self.schema)
            else:
                self._file = os.fdopen(fd, "wb")
        except BaseException:
            self.discard()
            raise

    def write(self, index, lengths, flat, offsets, ids_list=None, masks=None, kept=None) -> None:
        """One chunk: the columns of flatten() (ids_list, the ids per record, is
        not needed), and for the extra columns the chunk's mask arrays and
        kept fields (columns.py)."""
        try:
            self._write(index, lengths, flat, offsets, ids_list, masks, kept)
        except OSError as exc:  # disk full, file too large, I/O error
            raise OutputError(f"cannot write {self.out}: {exc.strerror or exc}") from None
        self.rows += len(index)

    def _write(self, index, lengths, flat, offsets, ids_list, masks, kept) -> None:
        extra = self.extra
        if self.fmt == "parquet":
            pa = self._pa
            if self._writer is None:
                self._open_writer(kept)
            ids = list_array(pa, offsets, flat)
            columns = [int_array(pa, index, pa.int64()), ids, int_array(pa, lengths, pa.int32())]
            if extra:
                columns += extra.arrays(pa, offsets, masks, kept)
            self._writer.write_table(pa.Table.from_arrays(columns, schema=self.schema))
        else:  # the lines are written natively from the flat ids (pyx/_jsonl.pyx)
            from .._jsonl import jsonl_rows

            ends = [e.encode("utf-8") for e in extra.json_suffixes(offsets, masks, kept)] if extra else None
            self._file.write(jsonl_rows(np.ascontiguousarray(index, dtype=np.int64),
                                        np.ascontiguousarray(offsets, dtype=np.int32),
                                        np.ascontiguousarray(flat, dtype=np.int32), ends))

    def _open_writer(self, kept) -> None:
        if self.extra:
            self.schema = self.extra.schema(self._pa, self.schema, kept)
        self._writer = self._pq.ParquetWriter(self.tmp, self.schema)

    def commit(self) -> None:
        try:
            self._commit()
        except OSError as exc:
            raise OutputError(f"cannot write {self.out}: {exc.strerror or exc}") from None

    def _commit(self) -> None:
        if self.fmt == "parquet":
            if self._writer is None:  # no rows: the columns the first one would have had
                self._open_writer([])
            self._writer.close()
            self._writer = None
            fd = os.open(self.tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        else:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
        _replace(self.tmp, self.target, "OUT")
        self.tmp = None

    def discard(self) -> None:
        if self.tmp is None:
            return
        try:
            if self._writer is not None:
                self._writer.close()
            elif getattr(self, "_file", None) is not None:
                self._file.close()
        except Exception:  # noqa: BLE001 - we are throwing it away
            pass
        try:
            os.unlink(self.tmp)
        except OSError:
            pass
        self.tmp = None


def flatten(indexes, ids):
    """(index, lengths, flat, offsets, total): the columns Sink.write takes, of
    records numbered `indexes` with token ids `ids` (arrays or lists)."""
    import itertools

    import numpy as np

    index = np.fromiter(indexes, dtype=np.int64, count=len(ids))
    lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
    offsets = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    if total > 2**31 - 1:
        raise InputError("a chunk holds more than 2**31 tokens: use a smaller --chunk-size")
    if ids and all(isinstance(x, np.ndarray) for x in ids):
        flat = np.concatenate(ids).astype(np.int32, copy=False)
    else:
        flat = np.fromiter(
            itertools.chain.from_iterable(x.tolist() if isinstance(x, np.ndarray) else x for x in ids),
            dtype=np.int32,
            count=total,
        )
    return index, lengths.astype(np.int32), flat, offsets.astype(np.int32), total


def same_file(a: str, b: str) -> bool:
    """True if paths a and b name one file: the same inode when both exist
    (symlinks, hard links, ./ and ../ spellings), else the same resolved path
    (a symlink to a file that does not exist yet)."""
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
    except OSError:
        pass
    return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))


def check_paths(input_path: str, output: str, errors, tokenizer=None) -> None:
    """Refuse a run that would write over one of its own inputs or outputs:
    OUT and the errors file are replaced by rename, so aliasing IN, the
    --tokenizer file or each other would destroy data."""
    writes = [("OUT", output)] + ([("the errors file", errors)] if errors else [])
    reads = [("the input file", input_path)] if input_path != "-" else []
    if tokenizer:
        reads.append(("the --tokenizer file", tokenizer))
    for k, (wname, wpath) in enumerate(writes):
        output_target(wname, wpath)  # a regular file (or none yet) in a directory that exists
        for oname, opath in reads + writes[k + 1:]:
            if same_file(wpath, opath):
                raise UsageError(f"{wname} {wpath} is {oname} ({opath}): refusing to write over it")


class ErrorsFile:
    """The errors file (JSONL: line, index, error, message), written to a
    temporary file beside it by `write` and renamed into place by `commit`."""

    def __init__(self, path: str):
        self.path = path
        self.target = output_target("the errors file", path)
        self.tmp = None

    def write(self, failures) -> None:
        fd, self.tmp = _temp_beside(self.target, "the errors file")
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
                for fl in failures:
                    f.write(fl.json() + "\n")
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:  # disk full, file too large, I/O error
            self.discard()
            raise OutputError(f"cannot write the errors file {self.path}: {exc.strerror or exc}") from None

    def commit(self) -> None:
        try:
            _replace(self.tmp, self.target, "the errors file")
        except OSError as exc:
            self.discard()
            raise OutputError(f"cannot write the errors file {self.path}: {exc.strerror or exc}") from None
        self.tmp = None

    def discard(self) -> None:
        if self.tmp is not None:
            try:
                os.unlink(self.tmp)
            except OSError:
                pass
            self.tmp = None


def write_errors(path: str, failures) -> None:
    """Write the errors file atomically (see ErrorsFile)."""
    errors = ErrorsFile(path)
    errors.write(failures)
    errors.commit()
