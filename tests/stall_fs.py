#!/usr/bin/env python3
"""A filesystem whose reads stall on demand, standing in for a hung NFS or
FUSE mount under a config file (tests/test_drld.sh, issue 33 hole 6).

  stall_fs.py MOUNTPOINT BACKING CONTROL

Mounts (FUSE, through python3-fusepy) a read-only view of the regular
files in directory BACKING at MOUNTPOINT, in the foreground. While the
file CONTROL/stall exists, every read() of a file waits: it first creates
CONTROL/reading (so a test can wait for a reader to be stuck), then waits
until CONTROL/stall is removed, or 120 s at most. Reads go to this process
every time (direct_io: the kernel caches no page of them). SIGTERM
unmounts and exits. Creates CONTROL/mounted once the mount answers.
"""
import errno
import os
import stat
import sys
import threading
import time

from fusepy import FUSE, FuseOSError, Operations

STALL_MAX_S = 120


class Stall(Operations):
    def __init__(self, backing, control):
        self.backing = backing
        self.control = control

    def _path(self, path):
        name = path.lstrip("/")
        if "/" in name:
            raise FuseOSError(errno.ENOENT)
        return os.path.join(self.backing, name)

    def getattr(self, path, fh=None):
        if path == "/":
            return {"st_mode": stat.S_IFDIR | 0o555, "st_nlink": 2}
        try:
            st = os.stat(self._path(path))
        except OSError:
            raise FuseOSError(errno.ENOENT)
        if not stat.S_ISREG(st.st_mode):
            raise FuseOSError(errno.ENOENT)
        return {"st_mode": stat.S_IFREG | 0o444, "st_nlink": 1,
                "st_size": st.st_size, "st_mtime": st.st_mtime,
                "st_ctime": st.st_ctime, "st_atime": st.st_atime}

    def readdir(self, path, fh):
        names = [n for n in sorted(os.listdir(self.backing))
                 if os.path.isfile(os.path.join(self.backing, n))]
        return [".", ".."] + names

    def open(self, path, flags):
        if flags & (os.O_WRONLY | os.O_RDWR):
            raise FuseOSError(errno.EROFS)
        self._path(path)
        return 0

    def read(self, path, size, offset, fh):
        stall = os.path.join(self.control, "stall")
        if os.path.exists(stall):
            open(os.path.join(self.control, "reading"), "w").close()
            deadline = time.monotonic() + STALL_MAX_S
            while os.path.exists(stall) and time.monotonic() < deadline:
                time.sleep(0.05)
        with open(self._path(path), "rb") as f:
            f.seek(offset)
            return f.read(size)


def announce(mountpoint, control):
    """Create CONTROL/mounted once MOUNTPOINT is the mount (60 s at most)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if os.path.ismount(mountpoint):
            open(os.path.join(control, "mounted"), "w").close()
            return
        time.sleep(0.05)


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: stall_fs.py MOUNTPOINT BACKING CONTROL")
    mountpoint, backing, control = sys.argv[1:]
    threading.Thread(target=announce, args=(mountpoint, control),
                     daemon=True).start()
    FUSE(Stall(backing, control), mountpoint, foreground=True,
         nothreads=False, ro=True, direct_io=True)


if __name__ == "__main__":
    main()
