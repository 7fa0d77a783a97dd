"""Stands in for a forked engine: the process the driver spawned, with the engine's stdio and exit status.

Run as `python -I -S shim.py SOCKET` (standard library only, a few ms to start). It hands its stdin,
stdout and stderr and its environment to the engine template listening on SOCKET (template.py),
starting that template first when none listens there, and the template forks the engine on them;
then it waits for the engine and exits as the engine did (the same code, or killed by the same
signal). SIGTERM and SIGHUP are passed on to the engine; SIGINT is ignored, as a spawned engine
ignores it. Killed outright, it takes the engine with it (the engine watches it). Where the template
cannot fork the engine (it would not start, it went, or it refuses the request), the shim execs the
engine itself: `python -m thinkfl_engine`, as the driver would.
"""

import array
import json
import os
import signal
import socket
import subprocess
import sys
import time

signal.signal(signal.SIGINT, signal.SIG_IGN)

# A template binds its socket before its import, so a started one is reachable within a second or
# two even on a loaded machine.
_CONNECT_TIMEOUT_S = 60.0


def _exec_engine(why: str) -> None:
    print(f'[engine shim] starting the engine in this process: {why}', file=sys.stderr, flush=True)
    os.execv(sys.executable, [sys.executable, '-m', 'thinkfl_engine'])


def _start_template(path: str) -> subprocess.Popen:
    """A template for SOCKET in a session of its own (a Ctrl-C to the run is not for it), logging to SOCKET.log."""
    with open(path + '.log', 'ab') as log:
        return subprocess.Popen(
            [sys.executable, '-m', 'thinkfl_engine.template', path],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            cwd='/',
            start_new_session=True,
        )


def _connect(path: str) -> tuple[socket.socket | None, str]:
    """A connection to the template on `path`, started if none listens; or None and why not."""
    started = None
    deadline = time.monotonic() + _CONNECT_TIMEOUT_S
    while time.monotonic() < deadline:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            return s, ''
        except (FileNotFoundError, ConnectionRefusedError):
            s.close()
        if started is None:
            try:
                started = _start_template(path)
            except OSError as e:
                return None, f'the engine template could not be started: {e}'
        elif started.poll() is not None:
            return None, f'the engine template exited with code {started.returncode} (its log: {path}.log)'
        time.sleep(0.02)
    return None, f'no engine template listened on {path} within {_CONNECT_TIMEOUT_S:.0f} s'


def _read_line(s: socket.socket) -> dict | None:
    data = b''
    while not data.endswith(b'\n'):
        chunk = s.recv(4096)
        if not chunk:
            return None
        data += chunk
    return json.loads(data)


def main() -> None:
    path = sys.argv[1]
    s, why = _connect(path)
    if s is None:
        _exec_engine(why)
        return
    req = {'env': dict(os.environ), 'cwd': os.getcwd(), 'shim': os.getpid()}
    try:
        s.sendmsg(
            [json.dumps(req).encode() + b'\n'],
            [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', [0, 1, 2]).tobytes())],
        )
        reply = _read_line(s)
    except OSError as e:
        reply = {'refused': str(e)}
    if reply is None or 'pid' not in reply:
        s.close()
        _exec_engine((reply or {}).get('refused', f'the engine template closed the connection (its log: {path}.log)'))
        return
    engine = int(reply['pid'])
    # The engine holds the pipes now; the driver sees them close when the engine exits.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda n, _f: os.kill(engine, n))
    done = _read_line(s)
    if done is None:
        print(
            '[engine shim] the engine template exited before the engine; its exit status is lost',
            file=sys.stderr,
            flush=True,
        )
        code = 1
    else:
        code = int(done['status'])
    if code < 0:
        if -code != signal.SIGKILL:
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        time.sleep(1)
    sys.exit(code if code >= 0 else 128 - code)


if __name__ == '__main__':
    main()
