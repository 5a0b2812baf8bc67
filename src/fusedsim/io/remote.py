"""Image files named by URI (``s3://bucket/a.png``, ``gs://...``, ``hdfs://...``, ``file:///...``), read where
they are: the reader of :mod:`fusedsim.io.images` takes a URI wherever it takes a path, so a Ray cluster's nodes
read their pairs from an object store without a shared file system.

The bytes come through pyarrow's file systems (``pyarrow.fs.FileSystem.from_uri``: S3, GCS, HDFS and local files
built in; credentials from the usual environment variables and files of each service), else through fsspec
(``fsspec.open``: any scheme it has an implementation for, e.g. ``s3fs`` or ``gcsfs`` when installed). Neither is a
dependency of fusedsim: a URI without either raises an error naming the URI and what to install.
"""

from __future__ import annotations

import re

__all__ = ["is_uri", "read_bytes"]

_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+://")  # two letters at least: a Windows drive (C:/) is a path


def is_uri(path: object) -> bool:
    """Whether ``path`` is a ``scheme://`` string (not a local path)."""
    return isinstance(path, str) and bool(_URI.match(path))


def read_bytes(uri: str, name: str = "image") -> bytes:
    """The whole object at ``uri``; ``FileNotFoundError`` when there is none, ``ValueError`` when it cannot be
    read (``name``, e.g. ``"REF"``, heads the message)."""
    try:
        return _read_pyarrow(uri)
    except _Unsupported:
        pass
    try:
        return _read_fsspec(uri)
    except _Unsupported as exc:
        raise ValueError(f"{name}: cannot read {uri}: no file system for this URI ({exc}); install pyarrow "
                         "(s3://, gs://, hdfs://) or fsspec with the scheme's package (e.g. s3fs, gcsfs)") from None


class _Unsupported(Exception):
    """This library is absent or has no file system for the URI's scheme."""


def _not_found(name_uri: str) -> FileNotFoundError:
    return FileNotFoundError(f"image file not found: {name_uri}")


def _read_pyarrow(uri: str) -> bytes:
    try:
        import pyarrow
        import pyarrow.fs as pafs
    except ImportError:
        raise _Unsupported("pyarrow is not installed") from None
    try:
        fs, path = pafs.FileSystem.from_uri(uri)
    except (pyarrow.ArrowInvalid, pyarrow.ArrowNotImplementedError) as exc:
        raise _Unsupported(str(exc)) from None
    try:
        info = fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            raise _not_found(uri)
        if info.type != pafs.FileType.File:
            raise ValueError(f"cannot read image {uri}: not a file")
        with fs.open_input_stream(path) as stream:
            return stream.read()
    except (FileNotFoundError, ValueError):
        raise
    except OSError as exc:  # pyarrow's errors of the service (permissions, network)
        raise ValueError(f"cannot read image {uri}: {exc}") from None


def _read_fsspec(uri: str) -> bytes:
    try:
        import fsspec
    except ImportError:
        raise _Unsupported("fsspec is not installed") from None
    try:
        with fsspec.open(uri, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise _not_found(uri) from None
    except (ImportError, ValueError) as exc:  # no implementation (or its package) for the scheme
        raise _Unsupported(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
    except OSError as exc:
        raise ValueError(f"cannot read image {uri}: {exc}") from None
