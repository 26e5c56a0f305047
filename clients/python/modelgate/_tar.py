"""Reproducible directory packing, byte for byte the CLI's (client/tarpack.c).

The CLI writes with libarchive's "restricted pax" writer (3.6, Debian 12): entries in
strcmp order of their paths, directories with a trailing '/', mode 0755 (directories and
owner-executable files) or 0644, uid/gid 0 without names, mtime 0, plain ustar headers,
and a pax 'x' record only for a name that ustar cannot hold (non-ASCII, or too long to
split into prefix and name) or a size of 8 GiB or more; 512-byte records, the archive
padded to a multiple of 10240 bytes. This module reproduces that layout exactly (the
functions below port libarchive's archive_write_set_format_pax.c and
archive_write_set_format_ustar.c), so a tree pushed with `modelgate push` and with
`Client.push` has the same digest.

Nothing is held in memory beyond one read buffer: the archive is produced as a stream of
chunks, twice when uploading (once to hash, once to send).
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from typing import BinaryIO, Generator, Iterator, List, Optional, Tuple

from ._errors import PackError

BLOCK = 512
RECORD = 10240  # libarchive's bytes_per_block, which the CLI sets explicitly
IO_CHUNK = 1 << 20
MAX_ENTRIES = 1000000  # the server's archive cap
MAX_PATH = 1024


@dataclass(frozen=True)
class TreeEntry:
    """One directory or regular file below the packed root."""

    path: bytes  # relative POSIX path, no leading "./", no trailing "/"
    is_dir: bool
    executable: bool  # owner-executable regular file
    size: int


def scan(root: str) -> List[TreeEntry]:
    """List a directory tree without following links, sorted like the CLI (bytewise).

    Symbolic links and special files are refused, naming them, as the CLI does.
    """
    out: List[TreeEntry] = []
    broot = os.fsencode(root)
    try:
        if not stat.S_ISDIR(os.stat(broot).st_mode):
            raise PackError(f"'{root}' is not a directory")
    except OSError as e:
        raise PackError(f"cannot open the directory '{root}': {e.strerror}") from None
    _scan_dir(root, broot, b"", out)
    out.sort(key=lambda e: e.path)
    return out


def _scan_dir(root: str, broot: bytes, rel: bytes, out: List[TreeEntry]) -> None:
    here = os.path.join(broot, rel) if rel else broot
    try:
        it = os.scandir(here)
    except OSError as e:
        raise PackError(f"cannot read '{root}/{_show(rel)}': {e.strerror}") from None
    with it:
        for d in it:
            path = rel + b"/" + d.name if rel else d.name
            if len(path) > MAX_PATH:
                raise PackError(
                    f"'{root}/{_show(path)}' is longer than {MAX_PATH} bytes; shorten it")
            try:
                st = d.stat(follow_symlinks=False)
            except OSError as e:
                raise PackError(f"cannot stat '{root}/{_show(path)}': {e.strerror}") from None
            if len(out) >= MAX_ENTRIES:
                raise PackError(
                    f"the directory holds more than {MAX_ENTRIES} entries; pack fewer files")
            if stat.S_ISREG(st.st_mode):
                out.append(TreeEntry(path, False, bool(st.st_mode & stat.S_IXUSR), st.st_size))
            elif stat.S_ISDIR(st.st_mode):
                out.append(TreeEntry(path, True, False, 0))
                _scan_dir(root, broot, path, out)
            else:
                kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "a special file"
                raise PackError(
                    f"'{root}/{_show(path)}' is {kind}; only regular files and directories "
                    "are allowed (copy the file a link points to instead)")


def _show(path: bytes) -> str:
    return path.decode("utf-8", "backslashreplace")


# ---- libarchive's header rules -------------------------------------------------------------


def _octal(v: int, width: int) -> Optional[bytes]:
    """format_octal: exactly width digits, None when v does not fit."""
    if v < 0 or v >= 1 << (3 * width):
        return None
    return b"%0*o" % (width, v)


def _number(v: int, width: int, max_width: int, strict: bool) -> bytes:
    """format_number: the bytes to write at the field's start (may overrun its terminator)."""
    if strict:
        s = _octal(v, width)
        if s is None:
            raise PackError(f"a tar header number {v} does not fit")
        return s
    w = width
    while w <= max_width:
        s = _octal(v, w)
        if s is not None:
            return s
        w += 1
    # base-256 in max_width bytes, marker bit set
    b = bytearray(v.to_bytes(max_width, "big", signed=True))
    b[0] |= 0x80
    return bytes(b)


def _build_ustar_entry_name(src: bytes, insert: Optional[bytes]) -> bytes:
    """build_ustar_entry_name: a name ustar can hold, keeping leading directories."""
    n = len(src)
    if n < 100 and insert is None:
        return src
    insert_length = 0 if insert is None else len(insert) + 2
    suffix_length = 98  # libarchive >= 3.7.5 and Debian 12's 3.6.2-1+deb12u5: 99 - 1
    need_slash = False
    fe = n
    while True:
        if fe > 0 and src[fe - 1] == 0x2F:
            fe -= 1
            need_slash = True
            continue
        if fe > 1 and src[fe - 1] == 0x2E and src[fe - 2] == 0x2F:
            fe -= 2
            need_slash = True
            continue
        break
    if fe == 0:  # only slashes: a root-like name
        return (insert or b"") + b"/"
    if need_slash:
        suffix_length -= 1
    filename = max(fe - 1, 0)
    while filename > 0 and src[filename] != 0x2F:
        filename -= 1
    if filename < n and src[filename] == 0x2F and filename < fe - 1:
        filename += 1
    suffix_length -= insert_length
    if fe > filename + suffix_length:
        fe = filename + suffix_length
    suffix_length -= fe - filename
    prefix_end = min(154, filename)  # 155 - 1 for the trailing '/'
    while prefix_end > 0 and src[prefix_end] != 0x2F:
        prefix_end -= 1
    if prefix_end < filename and src[prefix_end] == 0x2F:
        prefix_end += 1
    suffix = prefix_end
    suffix_end = min(suffix + suffix_length, filename)
    if suffix_end < suffix:
        suffix_end = suffix
    while suffix_end > suffix and src[suffix_end] != 0x2F:
        suffix_end -= 1
    if suffix_end < filename and src[suffix_end] == 0x2F:
        suffix_end += 1
    out = src[:prefix_end] + src[suffix:suffix_end]
    if insert is not None:
        out += insert + b"/"
    out += src[filename:fe]
    if need_slash:
        out += b"/"
    return out


def _build_pax_attribute_name(src: bytes) -> bytes:
    """build_pax_attribute_name: "dir/PaxHeader/name" for an entry's 'x' record."""
    if not src:
        return b"PaxHeader/blank"
    p = len(src)
    while True:
        if p > 0 and src[p - 1] == 0x2F:
            p -= 1
            continue
        if p > 1 and src[p - 1] == 0x2E and src[p - 2] == 0x2F:
            p -= 1
            continue
        break
    if p == 0:
        return b"/PaxHeader/rootdir"
    if src[0] == 0x2E and p == 1:
        return b"PaxHeader/currentdir"
    return _build_ustar_entry_name(src[:p], b"PaxHeader")


def _pax_attr(key: bytes, value: bytes) -> bytes:
    """add_pax_attr: "<len> key=value\\n" where len counts itself."""
    n = 1 + len(key) + 1 + len(value) + 1
    digits = len(str(n))
    if n + digits >= 10**digits:
        digits += 1
    return b"%d %s=%s\n" % (n + digits, key, value)


def _ustar_split(name: bytes) -> Optional[Tuple[bytes, bytes]]:
    """(prefix, name) the way ustar splits a name over 100 bytes, or None."""
    if len(name) <= 100:
        return b"", name
    i = name.find(b"/", len(name) - 100 - 1)
    if i == 0:
        i = name.find(b"/", 1)
    if i < 0 or i == len(name) - 1 or i > 155:
        return None
    return name[:i], name[i + 1:]


def _ustar_header(name: bytes, typeflag: bytes, perm: int, size: int, strict: bool) -> bytes:
    """__archive_write_format_header_ustar for uid/gid 0, mtime 0, no user/group names."""
    split = _ustar_split(name)
    if split is None:
        raise PackError(f"cannot fit '{_show(name)}' in a tar header")
    prefix, short = split
    h = bytearray(BLOCK)
    h[0:len(short)] = short
    h[100:108] = b"000000 \0"
    h[108:116] = b"000000 \0"
    h[116:124] = b"000000 \0"
    h[124:136] = b"00000000000 "
    h[136:148] = b"00000000000 "
    h[148:156] = b"        "
    h[257:265] = b"ustar\x0000"
    h[329:337] = b"000000 \0"
    h[337:345] = b"000000 \0"
    h[345:345 + len(prefix)] = prefix
    m = _number(perm, 6, 8, strict)
    h[100:100 + len(m)] = m
    s = _number(size, 11, 12, strict)
    h[124:124 + len(s)] = s
    h[156:157] = typeflag
    checksum = sum(h)
    h[148:154] = b"%06o" % checksum
    h[154] = 0
    return bytes(h)


def _pad(n: int) -> int:
    return -n & (BLOCK - 1)


def _entry_header(e: TreeEntry) -> bytes:
    """The header bytes (a pax 'x' record first when needed) before an entry's data."""
    name = e.path + b"/" if e.is_dir else e.path
    try:
        name.decode("utf-8")
    except UnicodeDecodeError:
        raise PackError(
            f"'{_show(e.path)}' is not a UTF-8 name; rename it (archive names are UTF-8)"
        ) from None
    perm = 0o755 if e.is_dir or e.executable else 0o644
    size = 0 if e.is_dir else e.size
    pax = b""
    ustar_name = name
    if any(b >= 0x80 for b in name) or _ustar_split(name) is None:
        pax += _pax_attr(b"path", name)
        ustar_name = _build_ustar_entry_name(name, None)
    if size >= 1 << 33:
        pax += _pax_attr(b"size", b"%d" % size)
    main = _ustar_header(ustar_name, b"5" if e.is_dir else b"0", perm, size, False)
    if not pax:
        return main
    x = _ustar_header(_build_pax_attribute_name(ustar_name), b"x", perm, len(pax), True)
    return x + pax + bytes(_pad(len(pax))) + main


def archive_size(entries: List[TreeEntry]) -> int:
    """The exact length of the archive pack() produces for these entries."""
    n = 0
    for e in entries:
        n += len(_entry_header(e))
        if not e.is_dir:
            n += e.size + _pad(e.size)
    n += 2 * BLOCK
    return n + (-n % RECORD)


def pack(root: str, entries: List[TreeEntry]) -> Iterator[bytes]:
    """The archive's bytes, in chunks of at most IO_CHUNK (plus headers).

    Raises PackError when a file changed size since scan() or cannot be read.
    """
    written = 0
    broot = os.fsencode(root)
    for e in entries:
        h = _entry_header(e)
        written += len(h)
        yield h
        if e.is_dir:
            continue
        if e.size > 0:
            written += yield from _file_chunks(root, broot, e)
        pad = _pad(e.size)
        if pad:
            written += pad
            yield bytes(pad)
    tail = 2 * BLOCK
    tail += -(written + tail) % RECORD
    yield bytes(tail)


def _file_chunks(root: str, broot: bytes, e: TreeEntry) -> Generator[bytes, None, int]:
    shown = f"{root}/{_show(e.path)}"
    try:
        fd = os.open(os.path.join(broot, e.path), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as err:
        raise PackError(f"cannot open '{shown}': {err.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != e.size:
            raise PackError(f"'{shown}' changed while it was being packed; try again")
        left = e.size
        with os.fdopen(fd, "rb", buffering=0, closefd=False) as f:
            while left > 0:
                try:
                    b = f.read(min(left, IO_CHUNK))
                except OSError as err:
                    raise PackError(f"cannot read '{shown}': {err.strerror}") from None
                if not b:
                    raise PackError(f"'{shown}' shrank while it was being packed; try again")
                left -= len(b)
                yield b
    finally:
        os.close(fd)
    return e.size


def digest_tree(root: str) -> Tuple[str, int, List[TreeEntry]]:
    """("sha256:<hex>", size, entries) of the archive the CLI would push for root."""
    entries = scan(root)
    if not entries:
        raise PackError(f"'{root}' is empty; nothing to push")
    h = hashlib.sha256()
    size = 0
    for chunk in pack(root, entries):
        h.update(chunk)
        size += len(chunk)
    if size != archive_size(entries):
        raise PackError(f"'{root}' changed while it was being packed; try again")
    return "sha256:" + h.hexdigest(), size, entries


def write_archive(root: str, out: BinaryIO) -> Tuple[str, int]:
    """Write root's reproducible archive to out; ("sha256:<hex>", size)."""
    entries = scan(root)
    if not entries:
        raise PackError(f"'{root}' is empty; nothing to push")
    h = hashlib.sha256()
    size = 0
    for chunk in pack(root, entries):
        h.update(chunk)
        out.write(chunk)
        size += len(chunk)
    return "sha256:" + h.hexdigest(), size
