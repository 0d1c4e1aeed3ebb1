"""Linux confinement primitives (namespaces, mounts) used by the worker (cgroups: ``cgroups``).

Python 3.11 has no ``os.unshare``/``mount``, so they come from libc through ctypes. Every
step is optional: a step that fails is reported as a lost protection (see
``PROTECTIONS``), never skipped silently.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
from typing import NamedTuple

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18

PR_SET_NO_NEW_PRIVS = 38
PR_SET_PDEATHSIG = 1

#: Every protection the executor can provide, with what is lost without it.
PROTECTIONS: dict[str, str] = {
    "fork-server": "warm worker forks a child per run (no interpreter start-up per run)",
    "pid-namespace": "run cannot see or signal host processes; all its processes are killed after it",
    "net-namespace": "no network access",
    "mount-namespace": "private mount table (the run's view has no checkout, home, /tmp: see read-only-root)",
    "ipc-uts-namespace": "no host SysV IPC; own hostname",
    "read-only-root": "filesystem is a read-only view of only what Python needs (system dirs, the interpreter's lib, "
                      "sys.path's package dirs) plus a private scratch dir, wherever the venv lives",
    "unprivileged-uid": "run executes as an unprivileged uid (cannot write host files, ptrace, chroot back)",
    "memory-cgroup": "hard memory cap charged per run, swap included (cgroup v2 memory.max + swap.max 0, or v1 memory)",
    "pids-cgroup": "hard process/thread cap per run (cgroup v2 or v1 pids.max)",
    "rlimits": "CPU, file size, open files, core dumps (and processes for non-root) limited",
    "scrubbed-env": "no environment variables of the parent reach the run",
    "no-new-privs": "no execve of the run can gain privileges (setuid binaries, file capabilities)",
    "result-channel": "verdicts travel on a private pipe, parsed strictly, compared in the parent",
}

_libc = None


def libc():
    global _libc
    if _libc is None:
        # Not ctypes.util.find_library: it imports subprocess and friends, and every extra
        # shared library mapped in the worker makes each fork measurably slower.
        try:
            _libc = ctypes.CDLL("libc.so.6", use_errno=True)
        except OSError:
            from ctypes import util as ctypes_util

            _libc = ctypes.CDLL(ctypes_util.find_library("c"), use_errno=True)
    return _libc


# glibc's mallopt parameters (malloc.h)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_MMAP_MAX = -1, -3, -4


def mallopt():
    """glibc's ``mallopt(param, value)``, or None where the C library has none."""
    try:
        fn = libc().mallopt
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return fn


def _check(ret: int, what: str) -> None:
    if ret != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def unshare(flags: int) -> None:
    _check(libc().unshare(ctypes.c_int(flags)), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    _check(
        libc().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
        f"mount {source} -> {target}",
    )


def set_no_new_privs() -> None:
    _check(libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")


def sethostname(name: str) -> None:
    data = name.encode()
    _check(libc().sethostname(data, ctypes.c_size_t(len(data))), "sethostname")


def remove_tree(path: str) -> None:
    """``rm -rf path`` without following symlinks (shutil would add imports to the worker)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not os.path.isdir(path) or os.path.islink(path):
        os.unlink(path)
        return
    os.chmod(path, 0o700)  # a run may have made its scratch unreadable
    with os.scandir(path) as it:
        entries = list(it)
    for e in entries:
        if e.is_dir(follow_symlinks=False):
            remove_tree(e.path)
        else:
            os.unlink(e.path)
    os.rmdir(path)
    del st


def set_parent_death_signal(sig: int) -> None:
    _check(libc().prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0), "prctl(PDEATHSIG)")


def bind_readonly(src: str, dst: str) -> None:
    """Bind ``src`` at ``dst`` read-only, nosuid, nodev."""
    mount(src, dst, None, MS_BIND | MS_REC)
    mount(None, dst, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


#: Directories of the operating system bound into every view (its shared libraries, shells).
SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin")
#: sys.path entries that are installed packages even when they lie in a hidden directory
#: (a virtual environment inside the checkout, in the home directory or under /tmp).
PACKAGE_DIR_NAMES = ("site-packages", "dist-packages")


def find_checkout(package_root: str) -> str | None:
    """The source checkout holding ``package_root``: the nearest directory at or above it
    with a ``.git`` (a directory, or a worktree's file), or else with a ``pyproject.toml``.
    None for an installed package outside any checkout."""
    for marker in (".git", "pyproject.toml"):
        d = os.path.realpath(package_root)
        while True:
            if os.path.exists(os.path.join(d, marker)):
                return d
            parent = os.path.dirname(d)
            if parent == d:
                break
            d = parent
    return None


def places_to_hide(package_root: str, cwd: str | None = None) -> list[tuple[str, str]]:
    """(what, path) of the host directories a run must never see, for the executor's view
    and for the canaries of ``codea1 sandbox check``: the checkout holding the package
    (and the package root itself), the current directory, the home directory, /tmp."""
    import pwd
    import tempfile

    checkout = find_checkout(package_root)
    out = [("checkout", checkout)] if checkout else []
    if os.path.basename(os.path.realpath(package_root)) not in PACKAGE_DIR_NAMES:
        out.append(("package root", package_root))  # (an installed codea1 is a package like any other)
    out += [("current directory", cwd or os.getcwd()),
           ("home directory", os.path.expanduser("~"))]
    try:
        out.append(("home directory", pwd.getpwuid(os.getuid()).pw_dir))
    except KeyError:
        pass
    out += [("/tmp", "/tmp"), ("temporary directory", tempfile.gettempdir()), ("/var/tmp", "/var/tmp")]
    return [(what, os.path.realpath(path)) for what, path in out]


def _within(path: str, top: str) -> bool:
    """``path`` is ``top`` or lies below it (both real, absolute)."""
    return path == top or top == "/" or path.startswith(top + "/")


def _resolve(path: str, links: dict[str, str], depth: int = 0) -> str:
    """The real path of ``path``, recording in ``links`` each symlink met on the way
    (its path and target), so that the same name can be made to resolve in the view."""
    if depth > 40:
        raise OSError(errno.ELOOP, f"too many levels of symbolic links: {path}")
    cur = "/"
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            cur = os.path.dirname(cur)
            continue
        nxt = os.path.join(cur, part)
        if os.path.islink(nxt):
            target = os.readlink(nxt)
            links[nxt] = target
            cur = _resolve(os.path.join(cur, target), links, depth + 1)
        else:
            cur = nxt
    return cur


class View(NamedTuple):
    """What of the host a run sees: built from what it needs, not from what to hide.

    ``binds``: host paths (real, directories or files) bound read-only at the same place.
    ``masks``: hidden directories that lie inside a bind, covered by an empty tmpfs (a
    bind deeper inside a mask is mounted again on top of it). ``links``: symlinks made in
    the view so that the names the interpreter uses (``sys.executable``, ``/lib``) resolve.
    ``unhideable``: hidden directories the run cannot do without (one that is itself the
    stdlib, a package directory or a system directory); they stay visible, and
    ``codea1 sandbox check`` says so. Everything else of the host is absent: the view's
    other directories are empty ones on a private tmpfs, made only to hold a mount point.
    """

    binds: tuple[str, ...]
    masks: tuple[str, ...]
    links: tuple[tuple[str, str], ...]
    unhideable: tuple[str, ...] = ()

    def mounts(self) -> list[tuple[str, str]]:
        """("bind" | "mask", path) in the order to mount them: outer before inner."""
        ops = [("bind", b) for b in self.binds] + [("mask", m) for m in self.masks]
        return sorted(ops, key=lambda op: (op[1].count("/"), op[1]))

    def shows(self, path: str) -> bool:
        """Would a run see the host's ``path`` (real, absolute) with its contents?"""
        best = None
        for kind, mount_path in self.mounts():
            if _within(path, mount_path) and (best is None or len(mount_path) >= len(best[1])):
                best = (kind, mount_path)
        return best is not None and best[0] == "bind"


def plan_view(base_prefix: str, prefix: str, executable: str, sys_path: list[str] | tuple[str, ...],
              hidden: list[str] | tuple[str, ...], *, system_dirs: tuple[str, ...] = SYSTEM_DIRS,
              platlibdir: str = "lib") -> View:
    """The view of a run of the interpreter described by the arguments (``sys``'s values).

    Needed, read-only: the system directories; the interpreter's own library directory
    (``<base_prefix>/lib``: the standard library, its extension modules and the shared
    libraries they load, e.g. libpython, or a conda prefix's libssl); the executable, with
    every symlink on the way to it; a virtual environment's ``pyvenv.cfg`` (a ``python``
    started by the run reads it to find the venv's packages: it names only the base
    interpreter); and each directory of ``sys.path``. A ``sys.path`` entry that is a hidden
    directory, holds one or lies inside one (the checkout on ``PYTHONPATH`` or of an
    editable install: the worker has imported what it needs before any run) is left out,
    unless it is a package directory (``site-packages``, ``dist-packages``): that one is
    bound alone, not the venv's ``bin/``, not the checkout around it.
    """
    hidden_real = sorted({os.path.realpath(h) for h in hidden if h and os.path.realpath(h) != "/"})
    links: dict[str, str] = {}
    named: list[str] = [d for d in system_dirs if os.path.lexists(d)]
    for lib in dict.fromkeys(("lib", platlibdir)):
        d = os.path.join(base_prefix, lib)
        if os.path.isdir(d):
            named.append(d)
    named.append(executable)
    if os.path.realpath(prefix) != os.path.realpath(base_prefix):
        cfg = os.path.join(prefix, "pyvenv.cfg")
        if os.path.isfile(cfg):
            named.append(cfg)
    for entry in sys_path:
        if not entry or not os.path.isabs(entry) or not os.path.exists(entry):
            continue
        real = os.path.realpath(entry)
        if os.path.basename(real) not in PACKAGE_DIR_NAMES and any(
                _within(h, real) or _within(real, h) for h in hidden_real):
            continue  # the checkout itself, a directory that holds a hidden one, or one inside
        named.append(entry)
    needed = sorted({_resolve(os.path.abspath(p), links) for p in named})
    needed = [p for p in needed if os.path.exists(p)]
    # A hidden directory inside a bind is covered, unless the run needs that very directory.
    masks = sorted({h for h in hidden_real if h not in needed
                    and any(h != b and _within(h, b) for b in needed)})
    unhideable = tuple(h for h in hidden_real if h in needed)

    def redundant(path: str, others: list[str], covers: list[str]) -> bool:
        """Inside one of ``others`` with no mount of ``covers`` between them."""
        return any(o != path and _within(path, o)
                   and not any(_within(path, c) and c != o and _within(c, o) for c in covers)
                   for o in others)

    binds = [b for b in needed if not redundant(b, needed, masks)]
    masks = [m for m in masks if not redundant(m, masks, binds)]
    view = View(tuple(binds), tuple(masks), (), unhideable)
    # A symlink inside a bind is there already; one anywhere else is made in the view.
    made = tuple((path, target) for path, target in sorted(links.items()) if not view.shows(path))
    return View(view.binds, view.masks, made, unhideable)


def current_view(hidden: tuple[str, ...] | list[str]) -> View:
    """The view for this interpreter (the worker: its ``sys.path`` is the runs')."""
    return plan_view(sys.base_prefix, sys.prefix, sys.executable, sys.path, hidden,
                     platlibdir=getattr(sys, "platlibdir", "lib"))


def build_root(root: str, view: View, scratch_name: str = "scratch") -> None:
    """Populate ``root`` (an empty tmpfs dir) with ``view``, a minimal /etc and /dev, an
    empty /tmp and the scratch dir. Must run inside a private mount namespace."""
    j = lambda p: os.path.join(root, p.lstrip("/"))  # noqa: E731
    for kind, path in view.mounts():
        dst = j(path)
        if kind == "mask":
            mount("tmpfs", dst, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64k,mode=755")
            continue
        if os.path.isdir(path):
            os.makedirs(dst, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if not os.path.exists(dst):
                _write_file(dst, "")
        bind_readonly(path, dst)
    for path, target in view.links:
        dst = j(path)
        if not os.path.lexists(dst):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.symlink(target, dst)
    os.makedirs(j("etc"), exist_ok=True)
    for name in ("ld.so.cache", "ld.so.conf", "localtime", "nsswitch.conf"):
        src = os.path.join("/etc", name)
        if os.path.isfile(src):
            _write_file(j("etc/" + name), "")
            bind_readonly(src, j("etc/" + name))
    _write_file(j("etc/passwd"), "root:x:0:0::/:/bin/false\nsandbox:x:65534:65534::/scratch:/bin/false\n")
    _write_file(j("etc/group"), "root:x:0:\nsandbox:x:65534:\n")
    _write_file(j("etc/hostname"), "sandbox\n")
    os.makedirs(j("dev"), exist_ok=True)
    for name in ("null", "zero", "full", "random", "urandom"):
        _write_file(j("dev/" + name), "")
        mount(f"/dev/{name}", j("dev/" + name), None, MS_BIND)
    os.makedirs(j("tmp"), mode=0o755, exist_ok=True)
    os.makedirs(j(scratch_name), mode=0o755, exist_ok=True)
    # The run is an unprivileged uid and everything here is root's 0755 (binds read-only):
    # only the scratch dir, chowned to it per run, is writable.
    os.chmod(root, 0o755)


def _write_file(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)
