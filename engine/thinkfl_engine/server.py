"""Line protocol on stdio: one JSON request per line in, one JSON response per line out.

Request {id, op, args}; response {id, ok: true, result} or {id, ok: false, error, traceback}.
Started by a launcher (torchrun) as N ranks, rank 0 reads the requests and hands each to every
rank, all run it (DeepSpeed ZeRO needs every rank in each forward and step), and rank 0 alone
responds. Only responses go to the real stdout: anything else that writes to fd 1 (prints, native
library warnings) is redirected to stderr, where all logs go. Non-finite floats are sent as null.
A collective that fails because a rank is gone (its process, its node, the network) leaves a world
that can run no other: the request gets {ok: false, fatal: true, error} naming that, and the
engine exits; the train worker decides what follows.
"""

import json
import logging
import math
import os
import sys
import traceback
from typing import Any, Iterator, Optional, Tuple

import torch.distributed as dist
import transformers

from . import protocol
from .distributed import Ranks, die_with_launcher
from .ops import OPS, State

log = logging.getLogger('thinkfl_engine')


def _finite(x: Any) -> Any:
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


class PeerLost(Exception):
    """A collective failed: a rank of the world is gone (its process died, or its node or the network did)."""

    def __init__(self, line: Optional[str], cause: BaseException):
        super().__init__(str(cause).splitlines()[0] if str(cause) else type(cause).__name__)
        self.line = line


def _collective_failure(e: BaseException) -> bool:
    # gloo reports a peer that went away as a RuntimeError naming itself; NCCL and the c10d store as DistError.
    return isinstance(e, dist.DistError) or (
        isinstance(e, RuntimeError)
        and any(
            k in str(e)
            for k in ('Connection closed by peer', 'Connection reset by peer', 'Broken pipe', 'gloo', 'NCCL')
        )
    )


def _requests(ranks: Optional[Ranks]) -> Iterator[Optional[str]]:
    """Request lines: read by rank 0 and handed to every rank, so all ranks run each op together."""
    if ranks is None:
        yield from sys.stdin
        return
    lines = sys.stdin if ranks.main else iter(())
    while True:
        line = next(lines, None) if ranks.main else None
        try:
            line = ranks.share(line)
        except Exception as e:  # noqa: BLE001 - only a failed collective is turned into PeerLost
            if _collective_failure(e):
                raise PeerLost(line, e) from e
            raise
        if line is None:
            return
        yield line


def _request_of(line: Optional[str]) -> Tuple[Any, Any]:
    """The id and op of a request line, as far as it can be read."""
    try:
        req = json.loads(line) if line else None
        return (req.get('id'), req.get('op')) if isinstance(req, dict) else (None, None)
    except ValueError:
        return None, None


def main() -> None:
    die_with_launcher()
    out = os.fdopen(os.dup(1), 'w', buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    ranks = Ranks.from_env()
    logging.basicConfig(
        stream=sys.stderr,
        level=os.environ.get('THINKFL_ENGINE_LOG', 'INFO'),
        format=f'[engine{"" if ranks is None else f" rank {ranks.rank}"}] %(levelname)s %(message)s',
    )
    # Per-file progress bars of transformers' loading and saving would flood the logs.
    transformers.utils.logging.disable_progress_bar()
    main_rank = ranks is None or ranks.main

    def respond(msg: Any) -> None:
        if main_rank:
            out.write(json.dumps(_finite(msg), allow_nan=False) + '\n')

    state = State(ranks)
    log.info('ready (pid %d)', os.getpid())

    def lost(rid: Any, op: Any, e: BaseException) -> None:
        """A world with a rank gone cannot run another collective: say so once, then exit."""
        msg = (
            f'{op or "request"}: lost a peer of the {ranks.world if ranks else 1}-process engine (a rank, or its node, is gone or '
            f'unreachable): {e}'
        )
        log.error(msg)
        respond({'id': rid, 'ok': False, 'fatal': True, 'error': msg})
        out.flush()
        os._exit(3)

    requests = _requests(ranks)
    while True:
        try:
            line = next(requests, None)
        except PeerLost as e:
            lost(*_request_of(e.line), e)
        if line is None:
            break
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                raise ValueError('a request is a JSON object')
        except ValueError as e:
            respond({'id': None, 'ok': False, 'error': f'bad request line: {e}'})
            continue
        rid, op = req.get('id'), req.get('op')
        if not isinstance(op, str) or op not in OPS:
            respond({'id': rid, 'ok': False, 'error': f'unknown op {op!r}; known: {sorted(OPS)}'})
            continue
        try:
            args = req.get('args', {})
            protocol.check_args(op, args)
            result = OPS[op](state, args)
            if protocol.CHECK_REPLIES:
                protocol.check_result(op, result)
            respond({'id': rid, 'ok': True, 'result': result})
        except protocol.ProtocolError as e:
            respond({'id': rid, 'ok': False, 'error': str(e)})
        except KeyError as e:
            respond({'id': rid, 'ok': False, 'error': f'{op}: missing argument {e}'})
        except Exception as e:  # noqa: BLE001 - every failure of an op is reported, the engine lives on
            if ranks is not None and ranks.world > 1 and _collective_failure(e):
                lost(rid, op, e)
            tb = traceback.format_exc()
            log.error('%s failed: %s', op, tb)
            respond({'id': rid, 'ok': False, 'error': f'{op}: {type(e).__name__}: {e}', 'traceback': tb[-4000:]})
        if op == 'shutdown':
            break
    log.info('exiting')
