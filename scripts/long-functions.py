"""Python's half of scripts/long-functions.ts: prints, as JSON, every function under a folder
longer than a limit (lines from its first decorator or `def` to its last line, inner functions
counted with the function that holds them). Usage: long-functions.py LIMIT FOLDER"""

import ast
import json
import sys
from pathlib import Path


def _visit(node: ast.AST, scope: str, path: Path, limit: int, found: list[dict[str, object]]) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f'{scope}{child.name}'
            first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
            lines = (child.end_lineno or child.lineno) - first + 1
            if lines > limit:
                found.append({'file': str(path), 'line': first, 'name': name, 'lines': lines})
            _visit(child, f'{name}.', path, limit, found)
        elif isinstance(child, ast.ClassDef):
            _visit(child, f'{scope}{child.name}.', path, limit, found)
        else:
            _visit(child, scope, path, limit, found)


def long_functions(limit: int, folder: Path) -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    for path in sorted(folder.rglob('*.py')):
        tree = ast.parse(path.read_text(encoding='utf-8'), filename=str(path))
        _visit(tree, '', path, limit, found)
    return found


if __name__ == '__main__':
    json.dump(long_functions(int(sys.argv[1]), Path(sys.argv[2])), sys.stdout)
