"""The on-disk kernel cache: one folder per compiled kernel, keyed by a hash of its IR, target
and toolchain versions; written atomically so concurrent processes never see half an entry.

Offline use (`WARPLOOM_OFFLINE=1`): a machine that cannot compile (no MLIR) reads kernels
precompiled elsewhere; a miss raises MissingKernelError with the command that builds it.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from .artifact import KernelArtifact

# Bump when the meaning of a cache entry changes, so old entries are simply never hit.
KEY_SCHEMA = "warploom-cache-v1"
_KEY_RE = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,199}$")


def cache_key(ir_text: str, target: str, toolchain: dict[str, str]) -> str:
    """sha256 hex over canonical JSON of the IR, the target and the toolchain versions.

    toolchain names every tool whose version changes the binary (MLIR bindings, nvJitLink,
    warploom, ...); the caller provides it so this module needs none of them.
    """
    if not isinstance(ir_text, str) or not isinstance(target, str):
        raise TypeError("cache_key: ir_text and target must be str")
    if not isinstance(toolchain, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                  for k, v in toolchain.items()):
        raise TypeError(f"cache_key: toolchain must map str to str (tool -> version), got {toolchain!r}")
    doc = {"schema": KEY_SCHEMA, "ir": ir_text, "target": target, "toolchain": toolchain}
    canon = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


class MissingKernelError(LookupError):
    """A kernel is not in the cache and may not be compiled here."""

    def __init__(self, key: str, description: str, command: str):
        self.key, self.description, self.command = key, description, command
        super().__init__(
            f"no compiled kernel for {description} (cache key {key}) and this machine does not compile "
            f"(WARPLOOM_OFFLINE=1 or no MLIR). Build it where the compiler is installed:\n    {command}\n"
            "then copy that cache folder here and point WARPLOOM_CACHE_DIR at it.")


class CacheNotWritableError(OSError):
    """The cache folder cannot be created or written: a compiled kernel would have nowhere to go."""

    def __init__(self, root: Path, reason: str):
        self.root, self.reason = root, reason
        super().__init__(
            f"cannot write the kernel cache folder {root}: {reason}. Point WARPLOOM_CACHE_DIR at a folder you can "
            "write (or pass one with --cache), or with kernels precompiled there, set WARPLOOM_OFFLINE=1 to only "
            "read it")


def _reason(e: OSError, root: Path) -> str:
    where = f" ({e.filename})" if getattr(e, "filename", None) and str(e.filename) != str(root) else ""
    return f"{e.strerror or type(e).__name__}{where}"


class KernelCache:
    """Folder `root/<key>/` per kernel; see KernelArtifact for the files inside."""

    def __init__(self, root):
        self.root = Path(root).expanduser()

    def __repr__(self) -> str:
        return f"KernelCache({str(self.root)!r})"

    def path(self, key: str) -> Path:
        if not isinstance(key, str) or not _KEY_RE.match(key):
            raise ValueError(f"cache key {key!r} is not a plain file name (letters, digits, '_', '-', '.'); "
                             "use cache_key() to make one")
        return self.root / key

    def get(self, key: str) -> KernelArtifact | None:
        """The cached artifact, or None when absent. A damaged entry raises, naming its folder."""
        folder = self.path(key)
        if not folder.is_dir():
            return None
        try:
            art = KernelArtifact.load(folder)
        except (OSError, ValueError) as e:
            raise ValueError(f"cache entry {folder} is damaged ({e}); delete that folder to rebuild it") from e
        if art.key != key:
            raise ValueError(f"cache entry {folder} holds key {art.key!r}, not {key!r}; "
                             "delete that folder to rebuild it")
        return art

    @contextlib.contextmanager
    def lock(self, name: str):
        """An exclusive lock on `name` among every process sharing this cache folder (flock on root/.locks/<name>;
        released when the block ends, or when the process dies). Compiling a missing kernel under it makes N
        processes that want the same kernel compile it once: the others wait, then find it cached."""
        folder = self.root / ".locks"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(folder / f"{self.path(name).name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise CacheNotWritableError(self.root, _reason(e, self.root)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)            # closing the descriptor releases the lock

    def check_writable(self) -> None:
        """CacheNotWritableError, naming the folder and why, when a kernel could not be stored here (call it before
        compiling, not after). Creates the folder if it is missing, as `put` would."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(prefix=".probe-", dir=self.root)
            os.close(fd)
            os.unlink(probe)
        except OSError as e:
            raise CacheNotWritableError(self.root, _reason(e, self.root)) from None

    def put(self, artifact: KernelArtifact) -> Path:
        """Store atomically; if the key is already present, keep the existing entry. Returns its folder.

        Written into a temp folder inside root (same filesystem), fsynced, then renamed into
        place: rename of a folder is atomic, and fails when a complete entry already exists,
        so concurrent writers of one key all succeed and exactly one copy survives.
        """
        final = self.path(artifact.key)
        if final.is_dir():
            return final
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{artifact.key[:16]}-", dir=self.root))
        except OSError as e:
            raise CacheNotWritableError(self.root, _reason(e, self.root)) from None
        try:
            artifact.save(tmp, fsync=True)
            _fsync_dir(tmp)
            try:
                os.rename(tmp, final)
            except OSError:
                # ENOTEMPTY/EEXIST: another writer won. Its entry is complete (it was renamed whole).
                if not final.is_dir():
                    raise
            else:
                _fsync_dir(self.root)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        return final


def _fsync_dir(path: Path) -> None:
    # Makes the directory entries (new files, the rename) durable; not all filesystems allow it.
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def default_cache_dir() -> Path:
    env = os.environ.get("WARPLOOM_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "warploom"


def default_cache() -> KernelCache:
    """The cache at $WARPLOOM_CACHE_DIR, else ~/.cache/warploom."""
    return KernelCache(default_cache_dir())


def offline() -> bool:
    """True when WARPLOOM_OFFLINE=1 (also true/yes/on): use cached kernels only, never compile."""
    return os.environ.get("WARPLOOM_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
