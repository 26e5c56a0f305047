"""Unpacking a pulled artifact safely, and checking a tree against the server's file list.

The artifact's bytes were already checked against the version's digest. Extraction writes
only regular files and directories, under the staging tree, named as the server listed
them (GET .../files): no absolute paths, no "..", no links or devices, no file the list
does not name, none larger than listed, none twice. Every file is hashed as it is written
and must have the listed digest; every listed file must be there at the end.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tarfile
import zipfile
from typing import IO, Dict, Iterator, List, Optional, Set, Tuple

from ._errors import IntegrityError, ModelgateError

IO_CHUNK = 1 << 20

MT_TAR, MT_GZIP, MT_ZIP, MT_ZSTD, MT_XZ, MT_OCTET = (
    "application/x-tar", "application/gzip", "application/zip", "application/zstd",
    "application/x-xz", "application/octet-stream")


def detect(path: str) -> str:
    """store_media_type_detect: the media type from the first bytes."""
    with open(path, "rb") as f:
        head = f.read(512)
    if len(head) >= 263 and head[257:262] == b"ustar" and head[262:263] in (b"\0", b" "):
        return MT_TAR
    if head[:2] == b"\x1f\x8b":
        return MT_GZIP
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return MT_ZIP
    if head[:4] == b"\x28\xb5\x2f\xfd":
        return MT_ZSTD
    if head[:6] == b"\xfd7zXZ\x00":
        return MT_XZ
    return MT_OCTET


def normalise(name: str) -> str:
    """An archive member's path as the server lists it; IntegrityError when unsafe."""
    if name.startswith("/") or "\\" in name or "\0" in name:
        raise IntegrityError(f"archive entry '{name}' has an unsafe path; refusing it",
                             code="integrity")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise IntegrityError(f"archive entry '{name}' climbs out with '..'; refusing it",
                             code="integrity")
    return "/".join(parts)


class Listing:
    """The server's files: path -> (size, "sha256:<hex>")."""

    def __init__(self, items: List[Dict[str, object]]) -> None:
        self.files: Dict[str, Tuple[int, str]] = {}
        for it in items:
            p, size, dg = it.get("path"), it.get("size"), it.get("digest")
            if not isinstance(p, str) or not isinstance(size, int) or not isinstance(dg, str):
                raise ModelgateError("the server's file list is malformed; refusing to guess",
                                     code="bad_reply")
            self.files[normalise(p)] = (size, dg)


def _mkdirs(tree: str, rel: str) -> None:
    """Make tree/rel (and its parents), refusing anything that is not a directory."""
    cur = tree
    for part in rel.split("/") if rel else []:
        cur = os.path.join(cur, part)
        try:
            os.mkdir(cur, 0o755)
        except FileExistsError:
            if not stat.S_ISDIR(os.lstat(cur).st_mode):
                raise IntegrityError(f"archive entry '{rel}' collides with a file",
                                     code="integrity") from None


def _write_member(tree: str, rel: str, src: IO[bytes], listing: Listing,
                  written: Set[str], mode: int) -> None:
    want = listing.files.get(rel)
    if want is None:
        raise IntegrityError(
            f"the archive holds '{rel}', which the server's file list does not name; "
            "refusing it", code="integrity")
    if rel in written:
        raise IntegrityError(f"the archive holds '{rel}' twice; refusing it", code="integrity")
    size, digest = want
    parent = rel.rsplit("/", 1)[0] if "/" in rel else ""
    _mkdirs(tree, parent)
    path = os.path.join(tree, rel)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o755 if mode & 0o100 else 0o644)
    h = hashlib.sha256()
    got = 0
    with os.fdopen(fd, "wb") as out:
        while True:
            b = src.read(IO_CHUNK)
            if not b:
                break
            got += len(b)
            if got > size:
                raise IntegrityError(
                    f"'{rel}' is larger than the {size} bytes the server lists; refusing it",
                    code="integrity")
            h.update(b)
            out.write(b)
    actual = "sha256:" + h.hexdigest()
    if got != size or actual != digest:
        raise IntegrityError(
            f"'{rel}' does not match its digest: got {actual} ({got} bytes), the server "
            f"lists {digest} ({size} bytes); refusing it", code="integrity")
    written.add(rel)


def _tar_members(path: str) -> Iterator[Tuple[str, Optional[IO[bytes]], int, str]]:
    """(name, reader or None for a directory, mode, kind) of each member, streamed."""
    try:
        with tarfile.open(path, "r:*") as tf:
            for m in tf:
                if m.isdir():
                    yield m.name, None, m.mode, "dir"
                elif m.isreg():
                    f = tf.extractfile(m)
                    assert f is not None
                    yield m.name, f, m.mode, "file"
                else:
                    yield m.name, None, m.mode, "link" if (m.issym() or m.islnk()) else "special"
    except tarfile.TarError as e:
        raise IntegrityError(f"cannot read the artifact as an archive: {e}",
                             code="integrity") from e


def _zip_members(path: str) -> Iterator[Tuple[str, Optional[IO[bytes]], int, str]]:
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                mode = (info.external_attr >> 16) & 0xFFFF
                if stat.S_ISLNK(mode):
                    yield info.filename, None, mode, "link"
                elif info.is_dir():
                    yield info.filename, None, mode, "dir"
                else:
                    with zf.open(info) as f:
                        yield info.filename, f, mode, "file"
    except (zipfile.BadZipFile, zipfile.LargeZipFile) as e:
        raise IntegrityError(f"cannot read the artifact as an archive: {e}",
                             code="integrity") from e


def extract(blob: str, tree: str, listing: Listing) -> int:
    """Unpack the archive blob under tree (which exists), checking every file against
    the listing. Returns the number of files written."""
    mt = detect(blob)
    if mt in (MT_TAR, MT_GZIP, MT_XZ):
        members = _tar_members(blob)
    elif mt == MT_ZIP:
        members = _zip_members(blob)
    elif mt == MT_ZSTD:
        raise ModelgateError("the artifact is zstd-compressed, which Python's standard "
                             "library cannot read; pull it with `modelgate pull`",
                             code="unsupported")
    else:
        raise IntegrityError("the version lists files but its artifact is not an archive",
                             code="integrity")
    written: Set[str] = set()
    for name, reader, mode, kind in members:
        rel = normalise(name)
        if kind in ("link", "special"):
            raise IntegrityError(
                f"archive entry '{name}' is a {'link' if kind == 'link' else 'special file'};"
                " refusing it", code="integrity")
        if kind == "dir":
            _mkdirs(tree, rel)
            continue
        assert reader is not None
        _write_member(tree, rel, reader, listing, written, mode)
    missing = sorted(set(listing.files) - written)
    if missing:
        raise IntegrityError(
            f"the archive lacks {len(missing)} file(s) the server lists, e.g. '{missing[0]}'",
            code="integrity")
    return len(written)


def file_digest(path: str) -> Tuple[str, int]:
    h = hashlib.sha256()
    n = 0
    with open(path, "rb") as f:
        while True:
            b = f.read(IO_CHUNK)
            if not b:
                break
            n += len(b)
            h.update(b)
    return "sha256:" + h.hexdigest(), n


def verify_tree(root: str, listing: Listing) -> int:
    """Check that root holds exactly the listed files with their digests (directories
    aside). IntegrityError naming the first difference. Returns the number of files."""
    seen: Set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for d in list(dirnames):
            if os.path.islink(os.path.join(dirpath, d)):
                raise IntegrityError(f"'{os.path.join(dirpath, d)}' is a link; refusing it",
                                     code="integrity")
        for fn in filenames:
            full = os.path.join(dirpath, fn)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            st = os.lstat(full)
            if not stat.S_ISREG(st.st_mode):
                raise IntegrityError(f"'{rel}' is not a regular file", code="integrity")
            want = listing.files.get(rel)
            if want is None:
                raise IntegrityError(f"'{rel}' is not in the version's file list",
                                     code="integrity")
            digest, size = file_digest(full)
            if (size, digest) != want:
                raise IntegrityError(
                    f"'{rel}' does not match its digest: got {digest} ({size} bytes), the "
                    f"server lists {want[1]} ({want[0]} bytes)", code="integrity")
            seen.add(rel)
    missing = sorted(set(listing.files) - seen)
    if missing:
        raise IntegrityError(f"'{missing[0]}' is missing ({len(missing)} listed file(s) "
                             "are not there)", code="integrity")
    return len(seen)
