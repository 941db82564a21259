"""Where `qwen4exp batch` results go: OUT (a `Sink`: Parquet, or JSONL plain
or gzip-compressed, by OUT's extension or --format) and the errors file, each written to a temporary file beside it and renamed into place only
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

import io
from abc import ABC, abstractmethod
import os
import stat
from typing import Any

import numpy as np

from qwen4exp.encode import batch_schema
from qwen4exp.vocab.files import kind_of
from qwen4exp.encode.arrow import int_array, joined_rows
from qwen4exp.errors import Qwen4ExpError
from qwen4exp.cli.common import InputError, OutputError, UsageError, need_module
from qwen4exp.cli.sources import JSONL_EXT, PARQUET_EXT

__all__ = ["Sink", "ParquetSink", "JsonlSink", "SINKS", "sink_for", "ErrorsFile", "write_errors", "check_paths",
           "same_file", "flatten", "output_target"]


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


class Sink(ABC):
    """OUT in one file format: written to a temporary file beside OUT (or
    beside the file a link at OUT points to) chunk by chunk (`write`), and
    renamed into place by `commit` (or removed by `discard`). A subclass is
    one format: its `name` (--format), its `extensions` (OUT's name picks
    it: `sink_for`), `require()` (its optional modules) and the three steps
    `_open(fd)`, `_write(...)`, `_close()`. Its columns are
    qwen4exp.encode.batch_schema's: index, the token columns, then the carried ones."""

    name: str = ""
    extensions: tuple[str, ...] = ()

    @classmethod
    def require(cls) -> None:
        """UsageError, before any work, when a module the format needs is missing."""

    def __init__(self, out: str, extra=None):
        from qwen4exp.cli.columns import ExtraColumns

        self.out = out
        self.extra = extra if extra is not None else ExtraColumns(False, False)
        self.target = output_target("OUT", out)
        fd, self.tmp = _temp_beside(self.target, "OUT")
        self.rows = 0
        try:
            self._open(fd)
        except BaseException:
            self.discard()
            raise

    def write(self, index, lengths, flat, offsets, ids_list=None, masks=None, kept=None) -> None:
        """One chunk: the columns of flatten() (ids_list, the ids per record, is
        not needed), and for the extra columns the chunk's mask arrays and
        kept fields (columns.py)."""
        try:
            self._write(index, flat, offsets, masks, kept)
        except OSError as exc:  # disk full, file too large, I/O error
            raise OutputError(f"cannot write {self.out}: {exc.strerror or exc}") from None
        self.rows += len(index)

    def commit(self) -> None:
        try:
            self._close()
            _replace(self.tmp, self.target, "OUT")
        except OSError as exc:
            raise OutputError(f"cannot write {self.out}: {exc.strerror or exc}") from None
        self.tmp = None

    def discard(self) -> None:
        if self.tmp is None:
            return
        try:
            self._abandon()
        except Exception:  # noqa: BLE001 - we are throwing it away
            pass
        try:
            os.unlink(self.tmp)
        except OSError:
            pass
        self.tmp = None

    @abstractmethod
    def _open(self, fd: int) -> None:
        """Start writing the format to the temporary file `fd`."""

    @abstractmethod
    def _write(self, index, flat, offsets, masks, kept) -> None:
        """Write one chunk's rows."""

    @abstractmethod
    def _close(self) -> None:
        """Finish the temporary file and make it durable (fsync)."""

    def _abandon(self) -> None:
        """Close the temporary file without finishing it."""


class ParquetSink(Sink):
    """Parquet: the schema's Arrow types; with carried JSONL fields, fixed by
    the first chunk (the writer opens at the first write)."""

    name, extensions = "parquet", PARQUET_EXT

    @classmethod
    def require(cls) -> None:
        need_module("pyarrow.parquet")

    def _open(self, fd: int) -> None:
        os.close(fd)
        self._pa, self._pq = need_module("pyarrow"), need_module("pyarrow.parquet")
        self._writer: Any = None  # a pyarrow ParquetWriter once the first rows come

    def _write(self, index, flat, offsets, masks, kept) -> None:
        pa = self._pa
        if self._writer is None:
            self._open_writer(kept, index)
        columns = ([int_array(pa, index, pa.int64())]
                   + batch_schema.token_arrays(pa, offsets, flat, masks if self.extra.masks else None)
                   + self.extra.kept_arrays(pa, kept, index))
        table = pa.Table.from_arrays(columns, schema=self.schema)
        try:
            self._writer.write_table(table)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            self._unstorable(exc)

    def _open_writer(self, kept, index=()) -> None:
        pa = self._pa
        self.schema = self.extra.schema(pa, kept, index)
        try:
            self._writer = self._pq.ParquetWriter(self.tmp, self.schema)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            self._unstorable(exc)

    def _unstorable(self, exc: Exception) -> None:
        """Arrow refused to write: the carried columns' doing (InputError), or a bug (raised again)."""
        if not self.extra.keep:
            raise exc
        raise InputError(f"--keep-columns: Parquet cannot store the carried columns ({exc}): write JSONL") from None

    def _close(self) -> None:
        if self._writer is None:  # no rows: the columns the first one would have had
            self._open_writer([])
        self._writer.close()
        self._writer = None
        fd = os.open(self.tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _abandon(self) -> None:
        if getattr(self, "_writer", None) is not None:
            self._writer.close()


class JsonlSink(Sink):
    """JSONL, one object a line: {"index": i, "ids": [...], "length": n, ...};
    gzip-compressed when OUT's name ends in .gz. The lines are written
    natively from the flat ids (pyx/_jsonl.pyx)."""

    name, extensions = "jsonl", JSONL_EXT

    def _open(self, fd: int) -> None:
        self._raw = os.fdopen(fd, "wb")
        self._file: io.BufferedIOBase = self._raw
        if self.target.lower().endswith(".gz"):
            import gzip

            self._file = gzip.GzipFile(fileobj=self._raw, mode="wb", compresslevel=6)

    def _write(self, index, flat, offsets, masks, kept) -> None:
        from qwen4exp._native._jsonl import write_jsonl_rows

        ends = [e.encode("utf-8") for e in self.extra.json_suffixes(offsets, masks, kept)] if self.extra else None
        write_jsonl_rows(self._file, np.ascontiguousarray(index, dtype=np.int64),
                         np.ascontiguousarray(offsets, dtype=np.int32), np.ascontiguousarray(flat, dtype=np.int32), ends)

    def _close(self) -> None:
        if self._file is not self._raw:
            self._file.close()  # the gzip trailer
        self._raw.flush()
        os.fsync(self._raw.fileno())
        self._raw.close()

    def _abandon(self) -> None:
        self._raw.close()


# The formats OUT can have, by --format name; OUT's extension picks one (sink_for).
SINKS = {cls.name: cls for cls in (ParquetSink, JsonlSink)}


def sink_for(path: str, given: str | None = None) -> type[Sink]:
    """The Sink class of OUT: --format's (`given`), else the one whose
    extensions OUT's name ends with; UsageError when none does."""
    if given:
        return SINKS[given]
    low = path.lower()
    for cls in SINKS.values():
        if low.endswith(cls.extensions):
            return cls
    raise UsageError(f"cannot tell the output format from {path!r}: name it "
                     f"{' or '.join(cls.extensions[0] for cls in SINKS.values())}, or pass --format")


def flatten(indexes, ids):
    """(index, lengths, flat, offsets, total): the columns Sink.write takes, of
    records numbered `indexes` with token ids `ids` (arrays or lists)."""
    try:
        offsets, flat = joined_rows(ids, np.int32)
    except Qwen4ExpError as exc:
        raise InputError(f"a chunk is too large: {exc}: use a smaller --chunk-size") from None
    index = np.fromiter(indexes, dtype=np.int64, count=len(ids))
    return index, np.diff(offsets), flat, offsets, int(offsets[-1])


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
        assert self.tmp is not None  # written
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
