"""Linux confinement primitives (namespaces, mounts, cgroups) used by the worker.

Python 3.11 has no ``os.unshare``/``mount``, so they come from libc through ctypes. Every
step is optional: a step that fails is reported as a lost protection (see
``PROTECTIONS``), never skipped silently.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys

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
    "mount-namespace": "private mount table (host /tmp, /root, /home, the repo are hidden)",
    "ipc-uts-namespace": "no host SysV IPC; own hostname",
    "read-only-root": "filesystem is a read-only view of only what Python needs plus a private scratch dir",
    "unprivileged-uid": "run executes as an unprivileged uid (cannot write host files, ptrace, chroot back)",
    "memory-cgroup": "hard memory cap charged per run (cgroup v1 memory)",
    "pids-cgroup": "hard process/thread cap per run (cgroup v1 pids)",
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


def python_paths(hide: tuple[str, ...] = ()) -> list[str]:
    """Directories the interpreter (and numpy) need: prefixes, stdlib, site-packages.

    Never a directory in ``hide`` (the repository), nor one below or above it."""
    paths = {sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable))}
    needed = [os.path.realpath(p) for p in paths]
    # A hidden directory that holds the interpreter itself (e.g. a run from /root) cannot be hidden.
    hide = tuple(h for h in (os.path.realpath(x) for x in hide)
                 if h != "/" and not any(n == h or n.startswith(h + "/") for n in needed))
    for p in sys.path:
        if p and os.path.isdir(p):
            paths.add(os.path.realpath(p))
    # Keep only outermost directories, drop system ones bound separately, and never the repo.
    system = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin")
    out: list[str] = []
    for p in sorted(paths, key=len):
        if p == "/" or any(p == s or p.startswith(s + "/") for s in system):
            continue
        if any(p == o or p.startswith(o + "/") for o in out):
            continue
        if any(p == h or p.startswith(h + "/") or h.startswith(p + "/") for h in hide):
            continue
        out.append(p)
    return out


def build_root(root: str, scratch_name: str = "scratch", hide: tuple[str, ...] = ()) -> list[str]:
    """Populate ``root`` (an empty tmpfs dir) with read-only binds of what Python needs.

    Returns the list of host paths made visible. Must run inside a private mount namespace.
    """
    visible: list[str] = []
    j = lambda *parts: os.path.join(root, *(p.lstrip("/") for p in parts))  # noqa: E731
    for d in ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin"):
        if not os.path.exists(d):
            continue
        dst = j(d)
        if os.path.islink(d):
            os.symlink(os.readlink(d), dst)
        else:
            os.makedirs(dst, exist_ok=True)
            bind_readonly(d, dst)
            visible.append(d)
    for p in python_paths(hide):
        dst = j(p)
        os.makedirs(dst, exist_ok=True)
        bind_readonly(p, dst)
        visible.append(p)
    os.makedirs(j("etc"), exist_ok=True)
    for name in ("ld.so.cache", "ld.so.conf", "localtime", "nsswitch.conf"):
        src = os.path.join("/etc", name)
        if os.path.isfile(src):
            _write_file(j("etc", name), "")
            bind_readonly(src, j("etc", name))
    _write_file(j("etc", "passwd"), "root:x:0:0::/:/bin/false\nsandbox:x:65534:65534::/scratch:/bin/false\n")
    _write_file(j("etc", "group"), "root:x:0:\nsandbox:x:65534:\n")
    _write_file(j("etc", "hostname"), "sandbox\n")
    os.makedirs(j("dev"), exist_ok=True)
    for name in ("null", "zero", "full", "random", "urandom"):
        _write_file(j("dev", name), "")
        mount(f"/dev/{name}", j("dev", name), None, MS_BIND)
    os.makedirs(j("tmp"), mode=0o755, exist_ok=True)
    os.makedirs(j(scratch_name), mode=0o755, exist_ok=True)
    # The run is an unprivileged uid and everything here is root's 0755 (binds read-only):
    # only the scratch dir, chowned to it per run, is writable.
    os.chmod(root, 0o755)
    return visible


def _write_file(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def own_cgroup(controller: str) -> str | None:
    """The cgroup v1 directory of this process for ``controller``, if writable."""
    try:
        with open("/proc/self/cgroup") as f:
            text = f.read()
    except OSError:
        return None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and controller in parts[1].split(","):
            d = os.path.join("/sys/fs/cgroup", controller, parts[2].lstrip("/"))
            if os.path.isdir(d) and os.access(d, os.W_OK):
                return d
    return None


def write_text(path: str, value: str) -> None:
    """Write a control file (os-level: a Python file object costs a forking worker page faults)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def read_int(path: str) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        return int(os.read(fd, 4096).split()[0])
    finally:
        os.close(fd)


def read_text(path: str) -> str:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 65536).decode()
    finally:
        os.close(fd)


def remove_cgroup(path: str) -> None:
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError as e:  # busy: tasks still inside
        if e.errno not in (errno.EBUSY, errno.ENOTEMPTY):
            raise
