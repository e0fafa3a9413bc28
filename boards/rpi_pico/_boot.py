# The Pico image's boot, frozen by manifest.py in place of the rp2 port's own (which mounts
# littlefs over the whole flash storage): littlefs over the storage's first 1152 KB, mounted at /
# and formatted when it is not there; the last 256 KB is the shoe log's raw partition
# (board.py LOG_START and LOG_BYTES), which no filesystem touches. The same split as board.py
# (tests/test_manifests.py checks it); the flash needs 256-byte aligned programs.
import rp2
import vfs

bdev = rp2.Flash(start=0, len=1152 * 1024)
try:
    fs = vfs.VfsLfs2(bdev, progsize=256)
except Exception:
    vfs.VfsLfs2.mkfs(bdev, progsize=256)
    fs = vfs.VfsLfs2(bdev, progsize=256)
vfs.mount(fs, "/")

del rp2, vfs, bdev, fs
