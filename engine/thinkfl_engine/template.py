"""An engine template: a process that has imported the engine once and forks each engine from it.

Importing the engine (torch, transformers' model classes) takes about 5.5 s of CPU, a forked engine
about 0.2 s (docs/experiments.md, "The CI run's length" 6). Started by the driver with the exact
environment of the engines it will fork (one template per environment), it listens on a Unix
socket; `shim.py`, spawned by the driver in the engine's place, sends its stdin, stdout and stderr
and its environment, and the template forks an engine that runs `server.main()` on them. The
template reports each engine's exit status to its shim; an engine whose shim dies (SIGKILL
included) exits at once, so killing the shim kills the engine as killing a spawned one does.
A request it cannot serve exactly as a fresh process would (another environment, a Python thread
running) is refused, and the shim then execs the engine itself.

Never forked where CUDA may be used (the driver decides): a CUDA context does not survive fork.
Single-threaded on purpose: fork copies only the calling thread, so nothing here may hold a lock
an engine will need. It exits when its stdin (a pipe from the driver) closes, once its engines have.
"""

import array
import atexit
import json
import os
import select
import signal
import socket
import sys
import threading
import traceback

# As __main__ does for a spawned engine: Ctrl-C reaches the process group, the driver decides.
signal.signal(signal.SIGINT, signal.SIG_IGN)

from . import server  # noqa: E402 - the import every engine shares


def _start_env() -> dict:
    """The environment this process started with, before any import set a variable (torch sets some)."""
    with open('/proc/self/environ', 'rb') as f:
        pairs = [kv.split(b'=', 1) for kv in f.read().split(b'\0') if b'=' in kv]
    return {os.fsdecode(k): os.fsdecode(v) for k, v in pairs}


_ENV = _start_env()


def _recv_request(conn: socket.socket) -> tuple[dict, list[int]]:
    """One request: a JSON line with three file descriptors (stdin, stdout, stderr) beside it."""
    fds = array.array('i')
    data = b''
    while not data.endswith(b'\n'):
        msg, anc, _flags, _addr = conn.recvmsg(1 << 20, socket.CMSG_SPACE(3 * fds.itemsize))
        if not msg:
            raise ConnectionError('shim closed before its request')
        data += msg
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    return json.loads(data), list(fds)


def _refusal(req: dict, fds: list[int]) -> str | None:
    if len(fds) != 3:
        return f'expected 3 file descriptors, got {len(fds)}'
    if req.get('env') != _ENV:
        keys = sorted(k for k in set(_ENV) | set(req.get('env') or {}) if _ENV.get(k) != (req.get('env') or {}).get(k))
        return f'another environment ({", ".join(keys[:5])})'
    if threading.active_count() != 1:
        return 'a Python thread is running'
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


def _engine(req: dict, fds: list[int], keep_closed: list[int]) -> None:
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


def main() -> None:
    path = sys.argv[1]
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    engines: dict[int, socket.socket] = {}
    driver_open = True
    sys.stdout.flush()
    sys.stderr.flush()
    lfd = listener.fileno()
    while driver_open or engines:
        ready, _, _ = select.select([wake_r] + ([0, lfd] if driver_open else []), [], [])
        if 0 in ready and not os.read(0, 4096):
            driver_open = False
            listener.close()
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
        if driver_open and lfd in ready:
            conn, _ = listener.accept()
            try:
                req, fds = _recv_request(conn)
            except (OSError, ValueError) as e:
                conn.close()
                print(f'[engine template] bad request: {e}', file=sys.stderr, flush=True)
                continue
            why = _refusal(req, fds)
            if why is not None:
                for fd in fds:
                    os.close(fd)
                conn.sendall(json.dumps({'refused': why}).encode() + b'\n')
                conn.close()
                continue
            pid = os.fork()
            if pid == 0:
                _engine(
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
                pass  # the shim is gone: the engine, watching it, exits and is reaped above


if __name__ == '__main__':
    main()
    # Nothing to flush or save: skip the seconds of tearing down torch's modules.
    os._exit(0)
