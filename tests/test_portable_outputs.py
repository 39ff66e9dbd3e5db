"""Stored outputs that nbval compares must hold on any processor.

Floating-point rounding depends on the SIMD kernels the BLAS, numba and torch pick for a
processor, so a residue such as ``2.1e-17`` or ``1.6e-05`` printed by a cell (or glued into
the prose) differs on another machine and fails the README's test command there.  Such
figures are printed as bounds that hold everywhere (``below 1e-12``) or kept in cells whose
output nbval does not compare (``nbval-ignore-output``), with the bound asserted in a test.

This test reads every notebook's stored outputs and fails on a compared output that shows a
number in scientific notation with an exponent of -4 or below, unless it is a bound of the form
"below 1e-N" (also "under", "<", "<=", "less than", "within"), which the cell asserts.

A bound passes that test by its form, so the second half reads the code that prints it: a
printed or glued bound is a constant, chosen with a margin over what every kernel gives, never
computed from the value it bounds.  ``10.0 ** np.ceil(np.log10(off))``, the decade of a float32
rounding residue, looks like a bound ("1e-04") and is the residue itself, rounded: 1e-04 on one
processor and 1e-05 on another.  ``computed_bounds`` finds, in the cells whose outputs nbval
compares, a decade taken of a computed value (``ceil``/``floor``/``round`` of a logarithm), a
power of ten raised to a computed exponent, and a computed value rounded to one significant
digit (format ``.0e``/``.0g``), where a constant (a literal, or a name the notebook assigns
only literals) would be the honest form.
"""

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))

#: A number in scientific notation with an exponent of -4 or below: 2e-14, 1.6e-05, 7.4E-6,
#: 3x10^-5 (the scale of float64 and float32 rounding; 7.4e-02 is an ordinary figure).
SMALL = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*(?:[eE]|x\s*10\^)\s*-\s*0*([4-9]|[1-9]\d+)(?![\w.])")
#: The one allowed form: a bound with mantissa 1 after a word that makes it a bound.
BOUND = re.compile(r"(?:below|under|<|<=|≤|less than|smaller than|within|at most)\s*\(?\s*$", re.I)
#: The output kinds nbval compares (it skips images, metadata and tracebacks), the values that
#: myst-nb's glue stores included: nbval compares those records like any other output.
TEXT_KEYS = ("text/plain", "text/markdown", "text/html", "text/latex",
             "application/papermill.record/text/plain", "application/papermill.record/text/markdown")


def compared_texts(nb: dict):
    """(cell index, text) of every output nbval compares."""
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code" or "nbval-ignore-output" in cell["metadata"].get("tags", []):
            continue
        for out in cell.get("outputs", []):
            if out["output_type"] == "stream":
                yield i, "".join(out["text"])
            elif out["output_type"] == "error":
                yield i, f"{out.get('ename', '')}: {out.get('evalue', '')}"
            for key in TEXT_KEYS:
                if key in out.get("data", {}):
                    value = out["data"][key]
                    yield i, "".join(value) if isinstance(value, list) else str(value)


def residues(text: str) -> list[str]:
    """The rounding residues in ``text``: numbers of 1e-4 or less in scientific notation that are not bounds."""
    found = []
    for m in SMALL.finditer(text):
        mantissa = float(m.group(1))
        if mantissa == 1.0 and BOUND.search(text[max(0, m.start() - 20):m.start()]):
            continue
        if mantissa == 1.0 and text.strip().strip("'\"") == m.group(0):
            continue  # a glued bound on its own (the prose reads "below {glue}"): a constant, not a residue
        found.append(m.group(0))
    return found


def test_the_rule_finds_residues_and_lets_bounds_pass():
    # what failed on another processor, and the forms that replace them
    for bad in ("'2e-14'", "by at most 1.6e-05", "largest gap 2.1e-17)", "7.4E-06", "gap 1e-13", "3.8e-17",
                "'1e-47 and 2e-12'"):
        assert residues(bad), bad
    for good in ("below 1e-12", "differ by less than 1e-4", "(< 1e-12)", "0.70", "1e5 tokens", "k = 4",
                 "7.4e-02", "1.67e-03", "1e-12", "'1e-12'"):  # the last two: a glued bound alone
        assert not residues(good), good


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_compared_outputs_hold_on_any_processor(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    bad = [(i, r) for i, text in compared_texts(nb) for r in residues(text)]
    assert not bad, (f"{path.name}: outputs that nbval compares show rounding residues {bad[:5]}: print a bound "
                     "(e.g. 'below 1e-12') or tag the cell nbval-ignore-output and assert the bound in a test")


# --- bounds computed from the value they bound ---------------------------------------------------

LOGS = {"log10", "log", "log2", "log1p", "frexp"}
ROUNDERS = {"ceil", "floor", "round", "rint", "trunc", "int", "fix"}
PURE = {"sqrt", "exp", "abs", "float", "power", "pow"}  #: functions of constants that stay constant
ONE_DIGIT = re.compile(r"^\.(?:0[eEgG]|1[gG])$")  #: one significant digit: .0e, .0g, .1g


def _source(cell: dict) -> str:
    """A code cell's source as Python: IPython's magics and shell lines left out."""
    text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in text.splitlines())


def _name(node: ast.AST) -> str:
    """The called name of a call's function: ``np.ceil`` and ``ceil`` both give ``ceil``."""
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def _is_constant(node: ast.AST, constants: set[str]) -> bool:
    """Whether ``node`` is built from number literals and names bound only to such (``BOUND = 1e-9``)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, ast.Name):
        return node.id in constants
    if isinstance(node, ast.UnaryOp):
        return _is_constant(node.operand, constants)
    if isinstance(node, ast.BinOp):
        return _is_constant(node.left, constants) and _is_constant(node.right, constants)
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_is_constant(e, constants) for e in node.elts)
    if isinstance(node, ast.Call) and _name(node.func) in LOGS | ROUNDERS | PURE and not node.keywords:
        return all(_is_constant(a, constants) for a in node.args)  # np.log10(1000) is a constant
    return False


def constant_names(trees: list[ast.AST]) -> set[str]:
    """Names that every assignment in the notebook binds to a constant expression."""
    assigned: dict[str, list[ast.AST]] = {}
    for tree in trees:
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)) else []
            value = getattr(node, "value", None) if not isinstance(node, ast.For) else None
            for target in targets:
                if isinstance(target, ast.Name):
                    assigned.setdefault(target.id, []).append(value if not isinstance(node, ast.AugAssign) else None)
                elif isinstance(target, (ast.Tuple, ast.List)):
                    values = value.elts if isinstance(value, (ast.Tuple, ast.List)) and \
                        len(value.elts) == len(target.elts) else [None] * len(target.elts)
                    for t, v in zip(target.elts, values):
                        if isinstance(t, ast.Name):
                            assigned.setdefault(t.id, []).append(v)
    constants: set[str] = set()
    while True:
        more = {name for name, values in assigned.items()
                if name not in constants and all(v is not None and _is_constant(v, constants) for v in values)}
        if not more:
            return constants
        constants |= more


def _computed(node: ast.AST, constants: set[str]) -> bool:
    return not _is_constant(node, constants)


def computed_bounds(source: str, constants: set[str] = frozenset()) -> list[str]:
    """The expressions in ``source`` that make a bound out of a computed value (see the module's doc)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) in ROUNDERS and node.args:
            inner = node.args[0]
            if any(isinstance(n, ast.Call) and _name(n.func) in LOGS for n in ast.walk(inner)) \
                    and _computed(inner, constants):
                found.append(f"a decade of a computed value: {ast.unparse(node)}")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and \
                isinstance(node.left, ast.Constant) and node.left.value in (10, 10.0) and \
                _computed(node.right, constants):
            found.append(f"a power of ten raised to a computed exponent: {ast.unparse(node)}")
        if isinstance(node, ast.Call) and _name(node.func) in ("power", "pow") and len(node.args) == 2 and \
                isinstance(node.args[0], ast.Constant) and node.args[0].value in (10, 10.0) and \
                _computed(node.args[1], constants):
            found.append(f"a power of ten raised to a computed exponent: {ast.unparse(node)}")
        if isinstance(node, ast.FormattedValue) and node.format_spec is not None:
            spec = "".join(v.value for v in node.format_spec.values if isinstance(v, ast.Constant))
            if ONE_DIGIT.match(spec) and _computed(node.value, constants):
                found.append(f"a computed value rounded to one digit: {{{ast.unparse(node.value)}:{spec}}}")
        if isinstance(node, ast.Call) and _name(node.func) == "format" and len(node.args) == 2 and \
                isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str) and \
                ONE_DIGIT.match(node.args[1].value) and _computed(node.args[0], constants):
            found.append(f"a computed value rounded to one digit: {ast.unparse(node)}")
        if isinstance(node, ast.Call) and _name(node.func) in ("bounded", "below"):
            bound = node.args[1] if len(node.args) > 1 else \
                next((k.value for k in node.keywords if k.arg == "bound"), None)
            if bound is not None and _computed(bound, constants):
                found.append(f"a bound passed as a computed value: {ast.unparse(node)}")
    return found


def notebook_computed_bounds(nb: dict) -> list[tuple[int, str]]:
    """(cell index, what) for every bound computed from data in a cell whose outputs nbval compares."""
    cells = [(i, c) for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"]
    trees = []
    for _, cell in cells:
        try:
            trees.append(ast.parse(_source(cell)))
        except SyntaxError:
            pass
    constants = constant_names(trees)
    return [(i, what) for i, cell in cells if "nbval-ignore-output" not in cell["metadata"].get("tags", [])
            for what in computed_bounds(_source(cell), constants)]


def test_the_code_rule_finds_bounds_computed_from_data_and_lets_constants_pass():
    # what chapter 16 glued as "portable": the decade of a float32 residue
    bad = ['glue("f32_off", f"{10.0 ** np.ceil(np.log10(off)):.0e}", display=False)',
           "decade = np.floor(np.log10(gap))",
           "print(f'largest gap {gap:.0e}')",
           "label = format(worst, '.0e')",
           "bound = 10 ** int(math.log10(err) + 1)",
           "bound = np.power(10.0, np.ceil(np.log10(err)))",
           "glue('gap', bounded(gap, bound=2 * gap))",
           "print(below(tv, worst))"]
    for source in bad:
        assert computed_bounds(source), source
    # the honest forms: a constant bound, asserted; and figures that are no bounds at all
    good = ['BOUND = 1e-9\nassert worst < BOUND\nglue("var_bound", f"{BOUND:.0e}", display=False)',
            'glue("gap_bound", f"{1e-4:g}", display=False)',
            "print('below 1e-12' if gap < 1e-12 else f'{gap:.2e}')",
            "n_digits = int(np.ceil(np.log10(1000)))",
            "scale = 10 ** 3",
            "print(f'{speedup:.2f}x')",
            "print('below 1e-4' if gap < 1e-4 else f'{gap:.1e}')",
            "glue('p', bounded(p_control, 1e-4))",
            "print(below(tv), bounded(gap, bound=BOUND))"]
    trees = [ast.parse(s) for s in good]
    constants = constant_names(trees)
    for source in good:
        assert not computed_bounds(source, constants), source
    # a name bound once to a literal and once to data is not a constant
    mixed = [ast.parse("LIMIT = 1e-6"), ast.parse("LIMIT = worst * 10")]
    assert "LIMIT" not in constant_names(mixed)
    assert computed_bounds("print(f'{LIMIT:.0e}')", constant_names(mixed))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_compared_bound_is_computed_from_the_value_it_bounds(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    bad = notebook_computed_bounds(nb)
    assert not bad, (f"{path.name}: compared outputs print bounds computed from the data {bad[:5]}: a bound "
                     "is a constant with a tenfold margin over what every kernel gives (e.g. BOUND = 1e-4; "
                     "assert x < BOUND; print 'below 1e-04'), or the cell is tagged nbval-ignore-output")
