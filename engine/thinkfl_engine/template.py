"""An engine template: a process that has imported the engine once and forks each engine from it.

Importing the engine (torch, transformers' model classes) takes about 5.5 s of CPU, a forked engine
about 0.2 s (docs/experiments.md, "The CI run's length" 6 and 7). A template serves every process of
one user that starts engines with the same interpreter, engine directory, environment and cgroup:
the driver names its socket after them (templates.ts), and `shim.py`, spawned by the driver in the
engine's place, starts the template when none listens there. So a train worker restarted after a
kill, or a run resumed after Ctrl-C, forks its engine from the template its predecessor used.

The shim sends its stdin, stdout and stderr and its environment; the template forks an engine that
runs `server.main()` on them and reports the engine's exit status to its shim. An engine whose shim
dies (SIGKILL included) exits at once, so killing the shim kills the engine as killing a spawned one
does. A request it cannot serve exactly as a fresh process would (another environment, a Python
thread running) is refused, and the shim then execs the engine itself.

The template runs in its own session (a terminal's Ctrl-C to a run does not reach it). It leaves once
it has had no engine for THINKFL_ENGINE_TEMPLATE_IDLE_S seconds (default 60), and at once when a file
it imported or a file of the engine package changed (that request is refused: no engine runs old
code), removing its socket, lock and log.
Never forked where CUDA may be used (the driver decides): a CUDA context does not survive fork.
Single-threaded on purpose: fork copies only the calling thread, so nothing here may hold a lock
an engine will need.
"""

import array
import atexit
import fcntl
import json
import os
import select
import signal
import socket
import sys
import threading
import time
import traceback

# As __main__ does for a spawned engine: the driver decides when an engine stops.
signal.signal(signal.SIGINT, signal.SIG_IGN)

IDLE_ENV = 'THINKFL_ENGINE_TEMPLATE_IDLE_S'
# A refusal that ends the template: a fresh engine would run other code than the one imported here.
_STALE = 'the engine code changed since the template started'


def _start_env() -> dict:
    """The environment this process started with, before any import set a variable (torch sets some)."""
    with open('/proc/self/environ', 'rb') as f:
        pairs = [kv.split(b'=', 1) for kv in f.read().split(b'\0') if b'=' in kv]
    return {os.fsdecode(k): os.fsdecode(v) for k, v in pairs}


_ENV = _start_env()


def _lock(path: str):
    """The lock that orders templates binding or leaving `path` (a template never waits long on it).
    A leaving template removes the lock file while it holds it: a file locked after that is retried."""
    while True:
        f = open(path + '.lock', 'a')
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            if os.stat(f.name).st_ino == os.fstat(f.fileno()).st_ino:
                return f
        except FileNotFoundError:
            pass
        f.close()


def _bind(path: str) -> tuple[socket.socket, int] | None:
    """Listen on `path` (the socket and its file's inode), or None when a live template already does.
    A dead template's socket is replaced."""
    with _lock(path):
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(path)
            return None
        except FileNotFoundError:
            pass
        except ConnectionRefusedError:
            os.unlink(path)
        finally:
            probe.close()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        # Before the engine's import, so that shims arriving meanwhile queue here rather than start
        # templates of their own.
        listener.listen(64)
        return listener, os.stat(path).st_ino


def _unbind(path: str, inode: int) -> None:
    """Remove `path` if it is still this template's socket (its file's inode): no shim reaches this
    template after it. Its log and lock go with it, so that a directory of sockets does not fill with
    the files of environments long gone (a template that failed keeps its log for its shim to name)."""
    if not os.path.isdir(os.path.dirname(path)):
        return  # the directory went first (a test run's TMPDIR removed at its end): nothing to remove
    with _lock(path):
        try:
            if os.stat(path).st_ino != inode:
                return
        except FileNotFoundError:
            return
        for leftover in (path + '.log', path, path + '.lock'):
            try:
                os.unlink(leftover)
            except FileNotFoundError:
                pass


def _recv_request(conn: socket.socket) -> tuple[dict | None, list[int]]:
    """One request: a JSON line with three file descriptors (stdin, stdout, stderr) beside it; None for a probe."""
    fds = array.array('i')
    data = b''
    while not data.endswith(b'\n'):
        msg, anc, _flags, _addr = conn.recvmsg(1 << 20, socket.CMSG_SPACE(3 * fds.itemsize))
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
        if not msg:
            if data or fds:
                raise ConnectionError('shim closed before its request')
            return None, []
        data += msg
    return json.loads(data), list(fds)


def _package_files() -> set[str]:
    """The engine package's own files (its data files too, which no module's __file__ names)."""
    return {e.path for e in os.scandir(os.path.dirname(os.path.abspath(__file__))) if e.is_file()}


def _sources() -> dict[str, tuple[int, int]]:
    """Every file this process imported code from, and every file of the engine's package: (mtime, size)."""
    paths = {f for m in list(sys.modules.values()) if isinstance(f := getattr(m, '__file__', None), str)}
    paths.update(_package_files())
    found: dict[str, tuple[int, int]] = {}
    for path in paths:
        try:
            st = os.stat(path)
            found[path] = (st.st_mtime_ns, st.st_size)
        except OSError:
            pass
    return found


def _changed(sources: dict[str, tuple[int, int]]) -> str | None:
    """A file of `sources` changed or gone since they were read, or None: a fresh engine would run other code."""
    for path in set(sources) | _package_files():
        try:
            st = os.stat(path)
            now = (st.st_mtime_ns, st.st_size)
        except OSError:
            now = None
        if now != sources.get(path):
            return path
    return None


def _refusal(req: dict, fds: list[int], sources: dict[str, tuple[int, int]]) -> str | None:
    if len(fds) != 3:
        return f'expected 3 file descriptors, got {len(fds)}'
    if req.get('env') != _ENV:
        keys = sorted(k for k in set(_ENV) | set(req.get('env') or {}) if _ENV.get(k) != (req.get('env') or {}).get(k))
        return f'another environment ({", ".join(keys[:5])})'
    if threading.active_count() != 1:
        return 'a Python thread is running'
    changed = _changed(sources)
    if changed is not None:
        return f'{_STALE}: {changed}'
    return None


def _watch_shim(shim: int) -> None:
    """Exit as soon as the shim is gone: to the driver, the shim is the engine."""
    try:
        fd = os.pidfd_open(shim)
    except ProcessLookupError:
        os._exit(137)

    def wait() -> None:
        select.select([fd], [], [])
        os._exit(137)

    threading.Thread(target=wait, name='shim-watch', daemon=True).start()


def _engine(server, req: dict, fds: list[int], keep_closed: list[int]) -> None:
    """In the forked child: become the engine on the shim's stdio, and never return."""
    code = 1
    try:
        for fd in keep_closed:
            os.close(fd)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
        os.chdir(req['cwd'])
        _watch_shim(int(req['shim']))
        server.main()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 - reported on the engine's stderr, as a spawned engine would
        traceback.print_exc()
    finally:
        # What a fresh engine's interpreter does at exit (atexit handlers, logging's flush), then out
        # without returning into the template's loop.
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _serve(path: str, listener: socket.socket, inode: int, server, idle_s: float) -> None:
    sources = _sources()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    engines: dict[int, socket.socket] = {}
    listening = True
    idle_since = time.monotonic()
    sys.stdout.flush()
    sys.stderr.flush()
    lfd = listener.fileno()
    while listening or engines:
        timeout = None if engines or not listening else max(0.0, idle_since + idle_s - time.monotonic())
        ready, _, _ = select.select([wake_r] + ([lfd] if listening else []), [], [], timeout)
        if wake_r in ready:
            os.read(wake_r, 4096)
        while engines:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            conn = engines.pop(pid, None)
            if conn is not None:
                try:
                    conn.sendall(json.dumps({'status': os.waitstatus_to_exitcode(status)}).encode() + b'\n')
                except OSError:
                    pass
                conn.close()
            if not engines:
                idle_since = time.monotonic()
        stale = False
        if listening and lfd in ready:
            conn, _ = listener.accept()
            stale = _accept(conn, listener, wake_r, wake_w, engines, server, sources)
            idle_since = time.monotonic()
        if listening and (stale or (not engines and time.monotonic() >= idle_since + idle_s)):
            # Idle or stale: leave the socket (the next shim starts a new template), serve whoever
            # connected before it went, and go once they are done.
            _unbind(path, inode)
            listening = False
            listener.setblocking(False)
            while True:
                try:
                    conn, _ = listener.accept()
                except BlockingIOError:
                    break
                conn.setblocking(True)
                _accept(conn, listener, wake_r, wake_w, engines, server, sources)
            listener.close()


def _accept(conn, listener, wake_r, wake_w, engines, server, sources) -> bool:
    """Serve one connection: fork its engine, or refuse it. True when the refusal was for changed code."""
    try:
        req, fds = _recv_request(conn)
    except (OSError, ValueError) as e:
        conn.close()
        print(f'[engine template] bad request: {e}', file=sys.stderr, flush=True)
        return False
    if req is None:
        conn.close()
        return False
    why = _refusal(req, fds, sources)
    if why is not None:
        for fd in fds:
            os.close(fd)
        try:
            conn.sendall(json.dumps({'refused': why}).encode() + b'\n')
        except OSError:
            pass
        conn.close()
        return why.startswith(_STALE)
    pid = os.fork()
    if pid == 0:
        _engine(
            server,
            req,
            fds,
            [listener.fileno(), wake_r, wake_w, conn.fileno()] + [c.fileno() for c in engines.values()],
        )
    for fd in fds:
        os.close(fd)
    engines[pid] = conn
    try:
        conn.sendall(json.dumps({'pid': pid}).encode() + b'\n')
    except OSError:
        pass  # the shim is gone: the engine, watching it, exits and is reaped
    return False


def main() -> None:
    path = sys.argv[1]
    try:
        idle_s = float(os.environ.get(IDLE_ENV) or 60)
    except ValueError:
        idle_s = -1.0
    if not 0 <= idle_s < float('inf'):
        sys.exit(f'[engine template] {IDLE_ENV} must be a number of seconds (0 or more), got {os.environ[IDLE_ENV]!r}')
    bound = _bind(path)
    if bound is None:
        return
    listener, inode = bound
    # The log (stderr) holds the serving template's output only.
    try:
        os.ftruncate(2, 0)
    except OSError:
        pass  # not a file
    print(f'[engine template] pid {os.getpid()} serving {path}', file=sys.stderr, flush=True)
    from . import server  # the import every engine shares

    _serve(path, listener, inode, server, idle_s)


if __name__ == '__main__':
    main()
    # Nothing to flush or save: skip the seconds of tearing down torch's modules.
    os._exit(0)
