"""Firmware updates over the sabot protocol (docs/PROTOCOL.md, "Updates"): no REPL, nothing
received is ever kept before it is checked against what the release key signed, nothing is
executed before the whole tree is, and the running firmware stays as it was until then.

The stream is the code tree in the canonical form of shoe/integrity.py — for each file in byte
order of the paths: path, a zero byte, length(4), content — then the MANIFEST the same way, cut
into chunks: chunk i carries (i, h(i+1), data) and is taken only when SHA-256(i ‖ h(i+1) ‖ data) is
h(i). The build signs the stream's length and h(1) with the release key (its `UPDATE` file);
chunk 0 carries that signature, the version and the board, and the signed, counted C_UPDATE
carries the length and h(0). So before a byte is kept the shoe has its element verify that the
release key the *running* firmware trusts signed this stream, for this board, at a version no
older than the highest this shoe has run, and that the flash holds the stream beside its one
reserve (the log of a whole shoe and room to recover); then each chunk is checked as it lands
against the value the chunk before fixed. A session ends when the stream does, or is abandoned
— its staged files removed — when no chunk has come for IDLE_MS, when another update begins, or
at the next boot.

Files land in a staging directory (`update.tmp`, left out of every code digest); when the stream
ends the staged tree must match its MANIFEST, and the MANIFEST must carry the release key's
signature for the same version and board as the head. Only then is the switch journaled (the new
tree's file list) and made, file by file with atomic renames; a power cut during it is finished at
the next boot by `resume()`, before anything else runs. Anything else leaves the running tree
untouched.

`resume()` uses os alone: whichever version of this module a half-made switch left in place can
finish it."""

import os

from shoe.element import ticks_diff, ticks_ms

STAGE = "update.tmp"  # in the code root; a name ending in .tmp is in no code digest
_JOURNAL = ".journal"  # in STAGE: the new tree's files, one a line (no tree path starts with .)
_SESSION = "session.tmp"  # in STAGE, in no digest (.tmp): who began it (counter(4) by)
_PATH_MAX = 64
_FILE_MAX = 1 << 20
CHUNK_DATA = 120  # the most stream bytes in one chunk: a chunk frame is then 200 bytes

# why an update was refused (maintenance frame M_UPDATE_REFUSED)
R_INTERRUPTED = 1  # a new update began before this one ended
R_STREAM = 2  # the stream is not a code tree: a bad path, order, length or trailing bytes
R_DIGEST = 3  # the staged files differ from MANIFEST's digest
R_SIGNATURE = 4  # MANIFEST is not signed by the release key this firmware trusts
R_FLASH = 5  # a staged file could not be written
R_MANIFEST = 6  # no MANIFEST, or a malformed one
R_ELEMENT = 7  # the element could not check the signature
R_NO_CODE = 8  # a development run from source: there is no code tree to update
R_OLDER = 9  # the build's version is older than one this shoe has run (anti-rollback)
R_BOARD = 10  # built for another board than the one this shoe runs (it would not boot)
R_NO_ROOM = 11  # the stream would not leave the flash its reserve (a shoe's log, recovery)
R_ABANDONED = 12  # no chunk came for IDLE_MS: the session ended, its staged files removed

_BOARD_MAX = 32
_BLOCK = 4096  # a flash filesystem's block (littlefs on a Pico or an ESP32)
IDLE_MS = 60000  # a session with no chunk taken this long is abandoned (the board may lower it)


class Refused(Exception):
    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


def _exists(path):
    try:
        os.stat(path)
        return True
    except OSError:
        return False


def _is_dir(path):
    try:
        return os.stat(path)[0] & 0x4000 != 0
    except OSError:
        return False


def _remove_tree(path):
    if not _is_dir(path):
        if _exists(path):
            os.remove(path)
        return
    # the names first: removing entries while the directory is being read can skip some (then
    # the rmdir fails and the staging directory stays)
    for name in [entry[0] for entry in os.ilistdir(path)]:
        _remove_tree(path + "/" + name)
    os.rmdir(path)


def _make_parents(root, rel):
    parts = rel.split("/")
    at = root
    for p in parts[:-1]:
        at = at + "/" + p
        if not _is_dir(at):
            os.mkdir(at)


def _files(base, rel=""):
    """Every file under base/rel, relative to base; and the directories, deepest last."""
    files, dirs = [], []
    for entry in os.ilistdir(base.rstrip("/") + "/" + rel if rel else base or "/"):
        path = rel + "/" + entry[0] if rel else entry[0]
        if entry[1] == 0x4000:
            dirs.append(path)
            f, d = _files(base, path)
            files += f
            dirs += d
        else:
            files.append(path)
    return files, dirs


def resume(root, skip=()):
    """At boot, before the firmware is imported: finish a journaled switch (True). A staging
    directory that never got one (an update a power cut interrupted: the old tree runs) is left
    for the firmware to report and remove (`Update.abandoned`); nothing in it runs or counts."""
    root = root.rstrip("/")
    stage = root + "/" + STAGE
    journal = stage + "/" + _JOURNAL
    if not _exists(journal):
        return False
    with open(journal) as f:
        keep = [line for line in f.read().split("\n") if line]
    for rel in keep:  # renames: each atomic; a file already moved has no staged copy
        if _exists(stage + "/" + rel):
            _make_parents(root, rel)
            os.rename(stage + "/" + rel, root + "/" + rel)
    files, dirs = _files(root)
    wanted = set(keep)
    for rel in files:  # what the old tree had and the new one does not
        top = rel.split("/")[0]
        if rel not in wanted and top not in skip and top != STAGE:
            os.remove(root + "/" + rel)
    for rel in reversed(dirs):
        top = rel.split("/")[0]
        if top not in skip and top != STAGE and not list(os.ilistdir(root + "/" + rel)):
            os.rmdir(root + "/" + rel)
    _remove_tree(stage)
    return True


def chunk_hash(index, nxt, data, n=-1):
    """h(index) = SHA-256(index(2) ‖ h(index + 1) ‖ data) (data[:n])."""
    import hashlib

    h = hashlib.sha256(bytes((index >> 8, index & 0xFF)))
    h.update(nxt)
    h.update(data if n < 0 else memoryview(data)[:n])
    return h.digest()


class Update:
    """One update session at a time: begin(), then chunk() for each chunk, then finish() and
    switch(). Not on the card path: the shoe is between rounds (or tilted)."""

    def __init__(self, root, skip, element):
        self.root = root.rstrip("/") if root is not None else None
        self.skip = skip
        self.element = element
        self.open = False
        self.counter = 0  # the command counter of the C_UPDATE that opened it
        self.by = b""
        self.version = 0  # the version the release key signed the stream's head for
        self.authorized = False  # chunk 0's release signature checked, the staging area made
        self._room = self._staged = 0  # the bytes staging may take, and what it has taken
        self.heard = 0
        self.index = 0  # the next chunk's index
        self._expect = None  # h(index)
        self._last = None  # the last chunk taken (index, hash): a resend is answered again
        self._left = 0
        self._file = None

    @property
    def stage(self):
        return "%s/%s" % (self.root, STAGE)

    def begin(self, length, head, counter, by):
        """A session for a stream of `length` bytes whose chain starts at h(0) = `head`: chunk 0
        carries the release key's signature over the stream (its length and h(1)); nothing is
        kept before it is checked (authorize)."""
        if self.root is None:
            raise Refused(R_NO_CODE)
        self.discard()
        self.open = True
        self.authorized = False
        self.counter, self.by, self.version = counter, by, 0
        self.length, self.head = length, bytes(head)  # as the C_UPDATE gave them (update_begun)
        self.index, self._expect, self._last = 0, bytes(head), None
        self.heard = ticks_ms()  # when the last chunk was taken (or the session began)
        self._left = length
        self._state = 0  # 0 path, 1 length, 2 content, 3 done (after MANIFEST)
        self._path = bytearray()
        self._prev = b""
        self._size = self._need = 0
        self._manifest_seen = False

    def authorize(self, data, free):
        """Chunk 0's data — version(4) signature(64) len(board)(1) board — checked: 0 when the
        release key this firmware trusts signed this stream (its length and h(1), the version,
        the board), the board is this one, the version no older than the highest this shoe has
        run, and `free` flash bytes beyond the reserve hold it; then the staging area is made.
        Else why not (the caller ends the session)."""
        from shoe import integrity, release

        n = len(data)
        if n < 70 or n != 69 + data[68] or not 1 <= data[68] <= _BOARD_MAX:
            return R_STREAM
        version = data[0] << 24 | data[1] << 16 | data[2] << 8 | data[3]
        board = bytes(data[69:])
        if release.PUBLIC_KEY is None:
            return R_SIGNATURE
        try:
            ok = self.element.verify_external(
                integrity.update_digest(version, board, self._left, self._expect),
                bytes(data[4:68]), release.PUBLIC_KEY)
        except Exception:
            return R_ELEMENT
        if not ok:
            return R_SIGNATURE
        self.version = version
        running = integrity.manifest(self.root)
        if running is None or running[2].encode() != board:
            return R_BOARD
        try:
            if version < integrity.floor(self.element):
                return R_OLDER
        except Exception:
            return R_ELEMENT
        if self._left > free:
            return R_NO_ROOM
        self._room = free  # each staged file checked against it as it opens (_open_file)
        self._staged = 0
        try:
            _remove_tree(self.stage)
            os.mkdir(self.stage)
            with open(self.stage + "/" + _SESSION, "wb") as f:
                c = self.counter
                f.write(bytes((c >> 24, c >> 16 & 255, c >> 8 & 255, c & 255)))
                f.write(self.by)
        except OSError:
            return R_FLASH
        self.authorized = True
        return 0

    def abandoned(self):
        """(counter, by) of an update a power cut interrupted before its switch, its staged
        files removed; None when there is none."""
        if self.root is None or not _exists(self.stage):
            return None
        try:
            with open(self.stage + "/" + _SESSION, "rb") as f:
                raw = f.read()
        except OSError:
            raw = bytes(4)
        self.discard()
        return raw[0] << 24 | raw[1] << 16 | raw[2] << 8 | raw[3], raw[4:]

    def discard(self):
        """A refused update: its staged files go (the running tree never changed)."""
        self.close()
        try:
            _remove_tree(self.stage)
        except OSError:
            pass  # left for the next begin or boot

    def close(self):
        """End the session (the staged files stay until switch() or discard())."""
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
            self._file = None
        self.open = False

    def idle(self):
        """True when the open session has taken no chunk for IDLE_MS."""
        return self.open and ticks_diff(ticks_ms(), self.heard) > IDLE_MS

    def chunk(self, index, nxt, data):
        """1 taken, 2 the stream is complete, 3 chunk 0 (the release's signature: authorize it
        next), 0 a resend of the last one taken (answer it again), -1 not this session's next
        chunk (dropped: anyone may put bytes on a cable). Refused when the stream itself is
        wrong."""
        if not self.open:
            return -1
        h = chunk_hash(index, nxt, data)
        if self._last is not None and index == self._last[0] and h == self._last[1]:
            return 0
        if index != self.index or h != self._expect:
            return -1
        if not index:
            self._last = (0, h)
            self.heard = ticks_ms()
            self.index = 1
            self._expect = bytes(nxt)  # h(1): what the release key signed
            return 3
        if not self.authorized or len(data) > self._left:
            return -1
        self._last = (index, h)
        self.heard = ticks_ms()
        self.index += 1
        self._expect = bytes(nxt)
        self._left -= len(data)
        try:
            self._feed(data)
        except OSError:
            raise Refused(R_FLASH) from None
        if nxt == bytes(32) or not self._left:
            if self._left or nxt != bytes(32) or self._state != 3:
                raise Refused(R_STREAM)
            return 2
        return 1

    def _feed(self, data):
        i, n = 0, len(data)
        while i < n:
            if self._state == 0:
                b = data[i]
                i += 1
                if b:
                    if len(self._path) >= _PATH_MAX:
                        raise Refused(R_STREAM)
                    self._path.append(b)
                else:
                    self._state, self._size, self._need = 1, 0, 4
            elif self._state == 1:
                self._size = self._size << 8 | data[i]
                i += 1
                self._need -= 1
                if not self._need:
                    self._open_file()
            elif self._state == 2:
                take = min(self._need, n - i)
                f = self._file
                if f is not None:
                    f.write(memoryview(data)[i : i + take])
                i += take
                self._need -= take
                if not self._need:
                    self._end_file()
            else:
                raise Refused(R_STREAM)  # bytes after the MANIFEST

    def _open_file(self):
        path = bytes(self._path)
        rel = _check_path(path, self.skip)
        if rel == "MANIFEST":
            self._manifest_seen = True
        elif self._manifest_seen or path <= self._prev:
            raise Refused(R_STREAM)  # the canonical order, MANIFEST last
        if self._size > _FILE_MAX:
            raise Refused(R_STREAM)
        # on littlefs a file beyond its inline size takes whole blocks, and its metadata more:
        # counted so, the staged tree never takes the room the stream's bytes alone would leave
        self._staged += ((self._size + _BLOCK - 1) // _BLOCK + 1) * _BLOCK
        if self._staged > self._room:
            raise Refused(R_NO_ROOM)
        self._prev = path
        _make_parents(self.stage, rel)
        self._file = open(self.stage + "/" + rel, "wb")
        self._need = self._size
        self._state = 2
        if not self._need:
            self._end_file()

    def _end_file(self):
        f = self._file
        if f is not None:
            f.close()
        self._file = None
        self._path = bytearray()
        self._state = 3 if self._manifest_seen else 0

    def finish(self):
        """The staged tree checked: (0, tree digest, version) when it matches its MANIFEST, the
        release key this firmware trusts signed that, and the version is no older than the
        highest this shoe has run; else (reason, the digest MANIFEST claims or 32 zeros,
        version or 0)."""
        from binascii import unhexlify

        from shoe import integrity

        self.close()
        m = integrity.manifest(self.stage)
        if m is None:
            return R_MANIFEST, bytes(32), 0
        claimed, version = unhexlify(m[0]), m[1]
        if self.version and version != self.version:
            return R_MANIFEST, claimed, version  # not the version the release key signed
        why = integrity.check(self.stage, (), self.element)
        if why == "code differs from MANIFEST":
            return R_DIGEST, claimed, version
        if why == "MANIFEST signature invalid" or why == "no release key in the tree":
            return R_SIGNATURE, claimed, version
        if why is not None:
            return R_ELEMENT, claimed, version
        running = integrity.manifest(self.root)
        if running is None or running[2] != m[2]:
            return R_BOARD, claimed, version
        try:
            older = version < integrity.floor(self.element)
        except Exception:
            return R_ELEMENT, claimed, version
        return (R_OLDER if older else 0), claimed, version

    def switch(self):
        """Journal the new tree's file list, then make the switch (resume() finishes it after a
        power cut)."""
        files, _ = _files(self.stage)
        tmp = self.stage + "/" + _JOURNAL + ".new"
        with open(tmp, "w") as f:
            f.write("\n".join(files) + "\n")
        os.rename(tmp, self.stage + "/" + _JOURNAL)
        resume(self.root, self.skip)


def _check_path(path, skip):
    """The relative path a stream entry names, or Refused: printable ASCII in plain components,
    none empty or starting with a dot, nothing in the data directory or the staging area."""
    if not path or path[0] == 0x2F:
        raise Refused(R_STREAM)
    for b in path:
        if not (0x30 <= b <= 0x39 or 0x41 <= b <= 0x5A or 0x61 <= b <= 0x7A or b in b"_-./"):
            raise Refused(R_STREAM)
    rel = path.decode()
    parts = rel.split("/")
    for p in parts:
        if not p or p[0] == "." or p.endswith(".tmp"):
            raise Refused(R_STREAM)
    if parts[0] in skip or parts[0] == STAGE:
        raise Refused(R_STREAM)
    return rel
