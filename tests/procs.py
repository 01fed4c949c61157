"""What a test reads off /proc and the temp dir to see what engines left behind: zombies, socket files."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile


def running(pid: int) -> bool:
    """Alive and not a zombie. A process that ends while it is asked about is gone, not an error (a clean-clone
    run: psutil.pid_exists said yes, then Process() raised NoSuchProcess)."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def zombie_children(pid: int | None = None) -> list[str]:
    """`pid`'s children (default: this process's) in state Z, read from /proc: 'PID NAME' each."""
    pid = os.getpid() if pid is None else pid
    found = []
    for entry in os.listdir("/proc"):
        try:
            text = open(f"/proc/{entry}/stat").read()
        except (OSError, ValueError):  # not a process, or one that just ended
            continue
        state, ppid = text[text.rindex(")") + 2:].split()[:2]
        if state == "Z" and int(ppid) == pid:
            found.append(f"{entry} {text[text.index('(') + 1:text.rindex(')')]}")
    return found


def socket_files(folder, depth: int | None = None) -> list[str]:
    """Every socket file under `folder` (vLLM's ipc:// endpoints), at any depth or down to `depth` levels."""
    found = []
    for root, dirs, names in os.walk(folder):
        below = os.path.relpath(root, folder)
        if depth is not None and (0 if below == os.curdir else below.count(os.sep) + 1) >= depth - 1:
            dirs.clear()  # the files here are the last level looked at
        for name in names:
            try:
                if stat.S_ISSOCK(os.lstat(os.path.join(root, name)).st_mode):
                    found.append(os.path.join(root, name))
            except OSError:  # removed meanwhile
                pass
    return found


@contextlib.contextmanager
def private_temp_dir(monkeypatch):
    """A temp dir of the test's own, here and in the processes an engine spawns (short: a socket path must fit
    in 107 bytes), so nothing else's files count."""
    tmp = tempfile.mkdtemp(prefix="sp-")
    monkeypatch.setenv("TMPDIR", tmp)
    monkeypatch.setattr(tempfile, "tempdir", tmp)
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def left_behind(tmp) -> dict:
    """What a shut-down engine must not leave: zombie children of this process, socket files in `tmp`."""
    return {key: value for key, value in {"zombies": zombie_children(), "socket files": socket_files(tmp)}.items()
            if value}
