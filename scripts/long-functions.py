"""Python's half of scripts/long-functions.ts: prints, as JSON, every function under a folder
longer than a limit (lines from `def` to its last line, decorators and inner functions counted
with the function that holds them). Usage: long-functions.py LIMIT FOLDER"""

import ast
import json
import sys
from pathlib import Path


def long_functions(limit: int, folder: Path) -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))

        def visit(node: ast.AST, scope: str) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    name = f"{scope}{child.name}"
                    first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                    lines = (child.end_lineno or child.lineno) - first + 1
                    if lines > limit:
                        found.append({"file": str(path), "line": first, "name": name, "lines": lines})
                    visit(child, f"{name}.")
                elif isinstance(child, ast.ClassDef):
                    visit(child, f"{scope}{child.name}.")
                else:
                    visit(child, scope)

        visit(tree, "")
    return found


if __name__ == "__main__":
    json.dump(long_functions(int(sys.argv[1]), Path(sys.argv[2])), sys.stdout)
