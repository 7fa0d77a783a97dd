"""Validates requests (and, on demand, replies) against protocol.schema.json.

The schema is generated from the TypeScript side's zod definitions
(packages/trainer-ctl/src/engine/protocol.ts, `npx tsx scripts/engine-schema.ts`), so both sides
read one contract: an op's args are checked here before its handler runs, and a field that one
side adds without the other is refused. Checks between values (lengths, the vocabulary) stay
with the handlers. THINKFL_ENGINE_CHECK_REPLIES=1 checks every reply too (tests).
"""

import json
import os
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

from jsonschema import Draft202012Validator, ValidationError

SCHEMA_FILE = Path(__file__).with_name('protocol.schema.json')
_SCHEMA: Dict[str, Any] = json.loads(SCHEMA_FILE.read_text())
OP_NAMES = sorted(_SCHEMA['ops'])
_VALIDATORS = {
    (op, part): Draft202012Validator(spec[part]) for op, spec in _SCHEMA['ops'].items() for part in ('args', 'result')
}
CHECK_REPLIES = os.environ.get('THINKFL_ENGINE_CHECK_REPLIES') == '1'


class ProtocolError(ValueError):
    """A request (or reply) that the protocol schema refuses."""


def _path(parts: Iterable[Any]) -> str:
    out = ''
    for p in parts:
        out += f'[{p}]' if isinstance(p, int) else (f'.{p}' if out else str(p))
    return out


def _rule(schema: Dict[str, Any], schema_path: List[Any]) -> Optional[str]:
    """The description of the innermost if/then rule on the error's schema path, if any."""
    node: Any = schema
    found = None
    for key in schema_path:
        node = node[key]
        if isinstance(node, dict) and key == 'then' and 'description' in node:
            found = node['description']
    return found


def _message(schema: Dict[str, Any], e: ValidationError) -> str:
    where = _path(e.absolute_path)
    rule = _rule(schema, list(e.absolute_schema_path))
    if rule:
        return f'{where + ": " if where else ""}{rule}'
    if e.validator == 'required':
        missing = e.message.split("'")[1] if "'" in e.message else e.message
        return f"{where + ': ' if where else ''}missing argument '{missing}'"
    if e.validator == 'additionalProperties':
        return f'{where + ": " if where else ""}{e.message} (not in the protocol: protocol.schema.json)'
    if e.validator == 'enum':
        return f'{where or "value"} must be one of {e.validator_value}, got {e.instance!r}'
    return f'{where or "args"}: {e.message}'


def _check(op: str, part: str, value: Any) -> None:
    validator = _VALIDATORS[(op, part)]
    errors = sorted(validator.iter_errors(value), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:
        schema = _SCHEMA['ops'][op][part]
        raise ProtocolError(f'{op}: ' + '; '.join(_message(schema, e) for e in errors[:3]))


def check_args(op: str, args: Any) -> None:
    """Raises ProtocolError naming the op and the path of each (of the first three) problems."""
    _check(op, 'args', args)


def check_result(op: str, result: Any) -> None:
    _check(op, 'result', result)
