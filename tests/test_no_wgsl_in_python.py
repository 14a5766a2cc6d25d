"""No WGSL in Python strings outside tests: shader code lives in shaders/*.wgsl.

Kernels choose shaders, variants and ops by name (template parameters carry names and
constants); a WGSL fragment in a Python string escapes the shader tests, the include
mechanism and the NaN rules of the .wgsl files. This test reads every string literal of
engine/ and workbench/ with ``ast`` (f-strings whole, docstrings left out: they document,
nothing compiles them) and fails on WGSL syntax, naming file:line."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "workbench")

#: WGSL syntax that English text and Python code do not produce
SYNTAX = [
    r"\b(vec[234]|mat[234]x[234])<",       # vector and matrix types
    r"\b(array|ptr|atomic|bitcast)<",
    r"\bvar<",                             # var<storage, ...>, var<uniform>, var<workgroup>
    r"@(compute|fragment|vertex|group|binding|builtin|location|workgroup_size)\b",
    r"\bfn \w+\s*\(",                      # a function declaration
    r"\blet \w+\s*(:\s*\w+\s*)?=",         # let x = ...
    r"\bvar \w+\s*(:\s*\w+\s*)?=",
    r"\bselect\(",
    r"\btexture(Load|Store|Sample|Dimensions)\b",
    r"\b(workgroupBarrier|storageBarrier)\b",
    r"\b(f32|i32|u32|f16)\(",              # conversions
    r"\breturn\b[^;\n]*;",                 # a statement
    r"\b\d+u\b(?!\w)",                     # an unsigned literal (1024u)
    r"\b(max|min)\(\w+, ?\w+\)",           # a bare two-operand fold such as max(a, u)
    # a whole string that is an expression: 'a + b', 'acc + exp(v - top)', 'a & b'
    r"^\s*!?[\w.]+(\([\w\s.,+\-*/]*\))?"
    r"(\s+([-+*/%&|^]|[<>=!]=|<<|>>|<|>)\s+!?[\w.]+(\([\w\s.,+\-*/]*\))?)+\s*$",
]

#: deliberate matches, (path, the string), each with its reason: none is shader code
ALLOWED = {
    # reads WGSL: counts the storage bindings in a loaded shader's source
    ("engine/backends/gpu_compute/planning.py", "var<storage"),
    # a legend label that reads like an expression
    ("workbench/graph_legend.py", "input / output"),
}


def _shader_functions() -> set[str]:
    """Names of the functions the .wgsl files define: a string calling one is WGSL."""
    names = set()
    for path in (ROOT / "shaders").rglob("*.wgsl"):
        names |= set(re.findall(r"^\s*fn (\w+)\s*\(", path.read_text(), re.M))
    # short generic names would match ordinary text; the others are distinctive
    return {n for n in names if "_" in n and n != "fs_main" and n != "vs_main"}


def _pattern() -> re.Pattern:
    calls = "|".join(sorted(map(re.escape, _shader_functions()), key=len, reverse=True))
    return re.compile("|".join(SYNTAX + [rf"\b({calls})\("]))


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _strings(tree: ast.AST):
    """(line, text) of every string literal; an f-string as one text, {} for its fields."""
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            for part in node.values:
                skip.add(id(part))
            text = "".join(p.value if isinstance(p, ast.Constant) else "{}" for p in node.values)
            yield node.lineno, text
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            yield node.lineno, node.value


def wgsl_in_python(root: Path = ROOT) -> list[str]:
    """``file:line: 'match' in 'string'`` for every string literal that holds WGSL."""
    pattern = _pattern()
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            tree = ast.parse(path.read_text(encoding="utf-8"), rel)
            for line, text in _strings(tree):
                match = pattern.search(text)
                if match and (rel, text) not in ALLOWED:
                    found.append(f"{rel}:{line}: {match.group(0)!r} in {text[:80]!r}")
    return sorted(found)


def test_no_wgsl_in_python_strings():
    found = wgsl_in_python()
    assert not found, ("WGSL in Python strings; move it to a .wgsl file under shaders/ and "
                       "pass a name:\n" + "\n".join(found))


def test_the_scan_sees_wgsl(tmp_path):
    """The scan flags the forms kernels used to build (so a pass means something)."""
    pkg = tmp_path / "engine"
    pkg.mkdir()
    (pkg / "k.py").write_text(
        '"""A docstring may say fn op_Add(a: T, b: T)."""\n'
        'A = "select(a * b, a, a >= 0.0)"\n'
        'B = {"max": "max(a, u)"}\n'
        'C = f"let i = base + {n} * s.w;"\n'
        'D = "pow_f(a, b)"\n'
        'E = "Mod with fmod=0 is undefined for floats"\n'
        'F = ("acc + v", "a & b", "exp(v - top) / sum")\n'
        'G = "resources/samples/digit_3.png"\n')
    (tmp_path / "workbench").mkdir()
    found = wgsl_in_python(tmp_path)
    assert [f.split(":")[1] for f in found] == ["2", "3", "4", "5", "7", "7", "7"], found
