"""Where archive files go: an fsspec filesystem, written one whole file at a time.

* Local files (``file://`` or a plain absolute path): the bytes go to a hidden temporary
  file in the target directory (``.<name>.<32 hex>.tmp``), which is flushed, ``fsync``-ed
  and then renamed over the final name with :func:`os.replace` (atomic on POSIX); the
  directory is ``fsync``-ed too. A reader never sees a partial file.
* Object stores (``s3://`` through s3fs, and any other fsspec protocol): one
  ``pipe_file`` call, i.e. one ``PUT``; on S3 a file of at least twice ``s3.part.size``
  goes as a multipart upload in parts of that size (s3fs's), which also becomes visible
  only when complete. s3fs aborts a multipart upload that fails; one it could not abort
  (the server went away mid-upload) is aborted before the same key is uploaded again.
  No temporary object is created.

Errors are translated by :func:`storage_error` into the connector API's errors:
:class:`~conveyor.api.RetriableError` for transient conditions (connection refused or
reset, timeouts, throttling and 5xx answers, local I/O errors such as a full disk) and
:class:`~conveyor.api.ConnectError` for configuration problems (missing bucket, access
denied, missing credentials, invalid requests, a file where a directory should be).

Everything here runs on the calling task's runner thread (s3fs does its I/O on fsspec's
event-loop thread and blocks the caller until done).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import posixpath
import uuid
from datetime import timedelta

import fsspec

from conveyor.api import ConfigError, ConnectError, RetriableError
from conveyor.connectors.archive.config import S3_PROTOCOLS, S3FS_RETRIES, ArchiveSinkConfig

log = logging.getLogger("conveyor.connectors.archive")

TEMP_SUFFIX = ".tmp"

# Exception class names (anywhere in the MRO) of transient network failures raised by
# botocore / aiobotocore / aiohttp / urllib3 / fsspec, matched by name so this module
# does not import those packages.
_TRANSIENT_NAMES = frozenset(
    {
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ReadTimeoutError",
        "ConnectionClosedError",
        "HTTPClientError",
        "ProxyConnectionError",
        "ResponseStreamingError",
        "ClientConnectionError",
        "ClientConnectorError",
        "ServerDisconnectedError",
        "ServerTimeoutError",
        "ClientOSError",
        "ClientPayloadError",
        "FSTimeoutError",
        "ResponseParserError",
        "IncompleteRead",
        "ProtocolError",
    }
)
_CREDENTIAL_NAMES = frozenset({"NoCredentialsError", "PartialCredentialsError", "NoAuthTokenError"})
# errno values that mean "this request can never succeed as configured" (s3fs maps S3
# error codes onto errno: InvalidArgument/InvalidBucketName → EINVAL, a redirect to
# another region → EREMCHG, ...).
_CONFIG_ERRNOS = frozenset(
    {
        errno.EINVAL,
        errno.ENAMETOOLONG,
        errno.EMSGSIZE,
        errno.ENOSYS,
        errno.EREMCHG,
        errno.EPERM,
        errno.EACCES,
        errno.EROFS,
        errno.ENOTDIR,
        errno.EISDIR,
    }
)


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    return any(cls.__name__ in _TRANSIENT_NAMES for cls in type(exc).__mro__)


def _detail(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"


class Storage:
    """The archive's filesystem, rooted at ``archive.url``.

    Args:
        config: the validated configuration (its storage options may hold a secret; they
            are passed to fsspec and never logged).

    Raises:
        ConfigError: the storage options are not accepted by the filesystem
            (``archive.storage``), or the protocol's package is missing (``archive.url``).
    """

    def __init__(self, config: ArchiveSinkConfig) -> None:
        self.url = config.archive_url
        self.protocol = config.protocol
        self.local = config.is_local
        self.is_s3 = self.protocol in S3_PROTOCOLS
        self.backoff = timedelta(milliseconds=config.retry_backoff_ms)
        try:
            self.fs, root = fsspec.core.url_to_fs(config.archive_url, **config.storage_options())
        except ImportError as exc:
            raise ConfigError({"archive.url": f"protocol {self.protocol!r} needs a missing package: {exc}"}) from None
        except (TypeError, ValueError) as exc:
            raise ConfigError({"archive.storage": f"options not accepted by {self.protocol}: {exc}"}) from None
        if self.is_s3:
            self.fs.retries = S3FS_RETRIES
        self.root = os.path.abspath(root) if self.local else root.rstrip("/")
        self.topics_dir = config.topics_dir
        self.part_size = config.s3_part_size

    # -- paths ----------------------------------------------------------------------------

    def join(self, *parts: str) -> str:
        return os.path.join(*parts) if self.local else posixpath.join(*parts)

    def topic_dir(self, topic: str) -> str:
        """``<root>/<topics.dir>/<topic>`` (Confluent's S3 sink layout)."""
        base = self.join(self.root, *self.topics_dir.split("/")) if self.topics_dir else self.root
        return self.join(base, topic)

    def partition_dir(self, topic: str, partition: int) -> str:
        """``<root>/<topics.dir>/<topic>/partition=<partition>`` (``DefaultPartitioner``)."""
        return self.join(self.topic_dir(topic), f"partition={partition}")

    def describe(self, path: str | None = None) -> str:
        """A URL for messages (``s3://bucket/key``, or the local path)."""
        path = self.root if path is None else path
        return path if self.local else f"{self.protocol}://{path.lstrip('/')}"

    @property
    def bucket(self) -> str:
        """The bucket of an object-store URL (first path segment)."""
        return self.root.split("/", 1)[0]

    # -- operations (all raise ConnectError / RetriableError through storage_error) ---------

    def write(self, path: str, data: bytes) -> None:
        """Write ``data`` as the whole file ``path``, replacing any earlier file of that name;
        readers see the old file or the complete new one, never a partial one.

        Raises:
            RetriableError: transient failure; nothing (or the complete earlier file) is there.
            ConnectError: configuration problem (see the module docstring).
        """
        try:
            if self.local:
                self._write_local(path, data)
            else:
                if not self.is_s3:  # object stores have no directories
                    self.fs.makedirs(posixpath.dirname(path), exist_ok=True)
                    self.fs.pipe_file(path, data)
                elif len(data) < 2 * self.part_size:
                    self.fs.pipe_file(path, data)
                else:
                    self._abort_leftover_uploads(path)
                    self.fs.pipe_file(path, data, chunksize=self.part_size)
        except Exception as exc:
            raise self.error(exc, "writing", path) from exc

    def _abort_leftover_uploads(self, path: str) -> None:
        """Abort unfinished multipart uploads of exactly ``path`` (an earlier attempt's, which
        an outage kept s3fs from aborting); their parts would otherwise be stored, and billed,
        until a bucket lifecycle rule removes them."""
        bucket, _, key = path.partition("/")
        answer = self.fs.call_s3("list_multipart_uploads", Bucket=bucket, Prefix=key)
        for upload in answer.get("Uploads", []):
            if upload.get("Key") == key:
                self.fs.call_s3("abort_multipart_upload", Bucket=bucket, Key=key, UploadId=upload["UploadId"])
                log.info("archive: aborted an unfinished multipart upload of %s", self.describe(path))

    def _write_local(self, path: str, data: bytes) -> None:
        directory, name = os.path.split(path)
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".{name}.{uuid.uuid4().hex}{TEMP_SUFFIX}")
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(tmp)
            raise
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def list_names(self, directory: str, start_after: str = "") -> list[str]:
        """File names (not paths) directly in ``directory``; ``[]`` when it does not exist.

        Args:
            start_after: on S3, only names sorting after this one are listed (one
                ``ListObjectsV2`` page per 1000 newer files, however long the history);
                elsewhere every name is returned.

        Raises:
            RetriableError / ConnectError: as :meth:`write`.
        """
        try:
            if self.local:
                return os.listdir(directory)
            if self.is_s3:
                return self._list_s3(directory, start_after)
            self.fs.invalidate_cache(directory)
            return [posixpath.basename(p.rstrip("/")) for p in self.fs.ls(directory, detail=False)]
        except FileNotFoundError as exc:
            if self.is_s3:  # a missing prefix lists as empty: this is a missing bucket
                raise self.error(exc, "listing", directory) from exc
            return []
        except Exception as exc:
            raise self.error(exc, "listing", directory) from exc

    def _list_s3(self, directory: str, start_after: str) -> list[str]:
        bucket, _, prefix = directory.partition("/")
        prefix = prefix.rstrip("/") + "/" if prefix else ""
        request = {"Bucket": bucket, "Prefix": prefix, "Delimiter": "/"}
        if start_after:
            request["StartAfter"] = prefix + start_after
        names: list[str] = []
        while True:
            page = self.fs.call_s3("list_objects_v2", **request)
            names.extend(obj["Key"][len(prefix) :] for obj in page.get("Contents", []))
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return names
            request["ContinuationToken"] = token

    def delete(self, path: str) -> None:
        """Remove the file ``path`` (no error when it is already gone).

        Raises:
            RetriableError / ConnectError: as :meth:`write`.
        """
        try:
            if self.local:
                os.remove(path)
            else:
                self.fs.rm_file(path)
        except FileNotFoundError:
            return
        except Exception as exc:
            raise self.error(exc, "deleting", path) from exc

    def check(self) -> None:
        """Check the archive root is usable: the local directory can be created, the S3
        bucket exists and can be listed. Used by the connector's ``start``.

        Raises:
            ConnectError: the storage is unreachable or misconfigured (the message names
                the URL and what to fix; a :class:`RetriableError` when merely unreachable).
        """
        try:
            if self.local:
                os.makedirs(self.root, exist_ok=True)
                if not os.access(self.root, os.W_OK):
                    raise PermissionError(errno.EACCES, "directory is not writable", self.root)
            elif self.is_s3:  # one request: the bucket exists and may be listed
                bucket, _, prefix = self.root.partition("/")
                self.fs.call_s3("list_objects_v2", Bucket=bucket, Prefix=prefix, MaxKeys=1)
        except Exception as exc:
            raise self.error(exc, "checking", self.root) from exc

    # -- errors ---------------------------------------------------------------------------

    def error(self, exc: BaseException, doing: str, path: str) -> ConnectError:
        """Translate a storage exception (see :func:`storage_error`)."""
        return storage_error(exc, doing=doing, where=self.describe(path), storage=self)


def storage_error(exc: BaseException, *, doing: str, where: str, storage: Storage) -> ConnectError:
    """The connector API error for a failed storage operation.

    Returns a :class:`RetriableError` (with ``retry.backoff.ms`` as delay) for transient
    failures and a :class:`ConnectError` naming what to fix for configuration problems.
    """
    if isinstance(exc, ConnectError):
        return exc
    detail = _detail(exc)
    if _is_transient(exc):
        return RetriableError(
            f"archive storage unreachable while {doing} {where} ({detail}); will retry",
            delay=storage.backoff,
        )
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & _CREDENTIAL_NAMES:
        return ConnectError(
            f"no usable credentials for {storage.describe()} while {doing} {where} ({detail}):"
            " set archive.s3.key / archive.s3.secret or the AWS_* environment"
        )
    if isinstance(exc, PermissionError):
        return ConnectError(
            f"permission denied while {doing} {where} ({detail}): check the credentials"
            " (archive.s3.key / archive.s3.secret) and the bucket policy or directory permissions"
        )
    if isinstance(exc, FileNotFoundError):
        if storage.is_s3:
            return ConnectError(
                f"bucket {storage.bucket!r} does not exist (archive.url={storage.url}) while {doing} {where}"
                f" ({detail}): create the bucket or fix archive.url"
            )
        return ConnectError(f"not found while {doing} {where} ({detail}): check archive.url")
    if isinstance(exc, (NotADirectoryError, IsADirectoryError, FileExistsError)):
        return ConnectError(f"path clash while {doing} {where} ({detail}): a file and a directory share a name")
    if isinstance(exc, OSError):
        if exc.errno in _CONFIG_ERRNOS:
            return ConnectError(
                f"storage rejected {doing} {where} ({detail}): check archive.url and the storage options"
            )
        return RetriableError(f"storage error while {doing} {where} ({detail}); will retry", delay=storage.backoff)
    return ConnectError(f"storage failure while {doing} {where} ({detail})")
