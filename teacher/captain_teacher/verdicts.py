"""Finds verdicts a cell writes instead of measuring: the check that decides ``finish()``
(or that prints ``within tolerance:``) must be computed from something the cell or an
earlier one measured, never a literal such as ``ok = True``.

The scan reads Python source as text (``ast``); it runs nothing. A verdict variable is a
name tested by an ``if`` whose body calls ``finish`` or a name printed after the
``"within tolerance:"`` label; a verdict is literal when an assignment to it (or the test or
print itself) is an expression without any name in it (``True``, ``1 > 0``, ``not False``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

#: The label the teacher's verifying cell prints its verdict under.
VERDICT_LABEL = "within tolerance:"


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _calls_finish(nodes: Iterable[ast.stmt]) -> bool:
    for stmt in nodes:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Call):
                f = n.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                if name == "finish":
                    return True
    return False


def _verdict_expressions(tree: ast.AST) -> list[ast.expr]:
    """Expressions that decide a finish or are printed as the verdict."""
    out: list[ast.expr] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.If) and _calls_finish(n.body):
            out.append(n.test)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "print" and len(n.args) >= 2:
            first = n.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str) \
                    and first.value.strip() == VERDICT_LABEL.strip():
                out.append(n.args[1])
    return out


def literal_verdicts(code: str) -> list[str]:
    """The lines of ``code`` that hard-code a verdict (empty when none does; code that does
    not parse has none to find)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    lines = code.splitlines()
    assigned: dict[str, list[ast.AST]] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name):
                    assigned.setdefault(t.id, []).append(n)
        elif isinstance(n, (ast.AnnAssign, ast.AugAssign)) and isinstance(n.target, ast.Name) and n.value is not None:
            assigned.setdefault(n.target.id, []).append(n)
    bad: list[int] = []
    for expr in _verdict_expressions(tree):
        names = _names(expr)
        if not names:
            bad.append(expr.lineno)
            continue
        for name in names:
            for stmt in assigned.get(name, []):
                value = stmt.value  # type: ignore[attr-defined]
                if not isinstance(stmt, ast.AugAssign) and not _names(value):
                    bad.append(stmt.lineno)
    return [lines[i - 1].strip() for i in sorted(set(bad))]
