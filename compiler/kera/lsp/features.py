"""What the server answers, in byte offsets: hover, definitions, references, rename, symbols,
semantic tokens, completion and formatting edits.  ``server`` turns offsets into positions.

Everything here reads an :class:`~kera.lsp.analysis.Analysis` and the names of
:mod:`kera.lsp.names`; tokens are classified by tables over token and node kinds
(:data:`TOKEN_CLASS`, :data:`NAME_CLASS`), so a kind added to the language is at worst left
unclassified.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from kera import frontend
from kera.dtypes import DType
from kera.lsp.analysis import Analysis, Item
from kera.lsp.names import ItemNames, Symbol, item_names
from kera.ops import ARITY, ATTRS, Op
from kera.syntax.builtins import (
    BUILTIN_NAMES,
    DYNAMIC_BUILTINS,
    ELEMENTWISE_BUILTINS,
    MATH_BUILTINS,
    OTHER_BUILTINS,
)
from kera.syntax.kinds import KEYWORDS, PUNCT, SyntaxKind
from kera.syntax.tree import Green, GreenNode, GreenToken, tree_bytes

K = SyntaxKind
Span = tuple[int, int]
IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
DTYPES = frozenset(d.value for d in DType)

# ---------------------------------------------------------------------------- tokens


def token_at(tree: GreenNode, offset: int) -> tuple[GreenToken, int, list[GreenNode]] | None:
    """The token holding ``offset`` (or ending at it, when none starts there), its start, and
    the nodes from the root down to it."""
    path: list[GreenNode] = []
    node: Green = tree
    start = 0
    while isinstance(node, GreenNode):
        path.append(node)
        pos = start
        chosen: tuple[Green, int] | None = None
        for child in node.children:
            end = pos + child.width
            if pos <= offset < end or (offset == end and chosen is None and child.width):
                chosen = (child, pos)
                if pos <= offset < end:
                    break
            pos = end
        if chosen is None:
            return None
        node, start = chosen
    return node, start, path


def tokens(tree: GreenNode) -> Iterator[tuple[GreenToken, int, int, int]]:
    """Every token with its start and the kinds of the node holding it and of that node's
    parent (iterative)."""
    stack: list[tuple[Green, int, int, int]] = [(tree, 0, K.SOURCE_FILE, K.SOURCE_FILE)]
    while stack:
        g, pos, parent, grand = stack.pop()
        if isinstance(g, GreenToken):
            yield g, pos, parent, grand
            continue
        kids = []
        for c in g.children:
            kids.append((c, pos, g.kind, parent))
            pos += c.width
        stack.extend(reversed(kids))


# ------------------------------------------------------------------------- builtins

_ATTR_FORM = {int: "k", tuple: "[..]", DType: "T"}
_OPERANDS = ("x", "y", "z")


def builtin_op(name: str) -> Op | None:
    for table in (OTHER_BUILTINS, DYNAMIC_BUILTINS):
        if name in table:
            return table[name]
    if name in ELEMENTWISE_BUILTINS:
        return ELEMENTWISE_BUILTINS[name].op
    return None


def builtin_signature(name: str) -> str:
    """``sum(x, axis = k)``: operands by position, then the attributes as keywords."""
    if name in MATH_BUILTINS:
        return f"{name}(x)"
    if name == "dynamic_slice":
        return "dynamic_slice(x, i0, i1, ..., size = [..])"
    if name == "dynamic_update_slice":
        return "dynamic_update_slice(x, v, i0, i1, ...)"
    op = builtin_op(name)
    if op is None:
        return f"{name}(...)"
    args = [*_OPERANDS[: ARITY.get(op, 1)]]
    if op is Op.SELECT:
        args = ["cond", "a", "b"]
    args += [f"{a} = {_ATTR_FORM.get(kind, '..')}" for a, kind in ATTRS.get(op, {}).items()]
    return f"{name}({', '.join(args)})"


@cache
def _sections() -> dict[str, str]:
    """``docs/semantics.md`` by section: the op name of each ``### op`` heading -> its text,
    and ``Transcendentals`` for the math functions."""
    path = Path(__file__).resolve().parents[3] / "docs" / "semantics.md"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return {}
    out: dict[str, str] = {}
    for block in re.split(r"(?m)^(?=#{1,3} )", text):
        head, _, body = block.partition("\n")
        title = head.lstrip("#").strip()
        out.setdefault(title, body.strip())
    return out


def builtin_contract(name: str) -> str | None:
    """The contract section of a builtin (its op's section; the math functions share one)."""
    if name in MATH_BUILTINS:
        return _sections().get("Transcendentals")
    op = builtin_op(name)
    return _sections().get(op.value) if op is not None else None


# ------------------------------------------------------------------------- resolving


@dataclass(frozen=True, slots=True)
class Target:
    """What a name at a position means: a variable of one item, or a function name."""

    item: Item | None
    symbol: Symbol | None
    function: str | None
    span: Span  # absolute span of the name under the cursor


def resolve(an: Analysis, offset: int) -> Target | None:
    found = token_at(an.tree, offset)
    if found is None or found[0].kind != K.IDENT:
        return None
    tok, start, _ = found
    span = (start, start + tok.width)
    item = an.item_at(start)
    if item is None:
        return None
    names = item_names(item.green)
    rel = start - item.offset
    sym = names.at.get(rel)
    if sym is not None:
        return Target(item, sym, None, span)
    text = tok.text.decode("utf-8", "replace")
    if names.fn_name is not None and names.fn_name[0] == rel:
        return Target(item, None, text, span)
    if any(s[0] == rel for s, _ in names.fn_refs):
        return Target(item, None, text, span)
    return None


def _abs(item: Item, span: Span) -> Span:
    return item.offset + span[0], item.offset + span[1]


def definition(an: Analysis, offset: int) -> Span | None:
    t = resolve(an, offset)
    if t is None:
        return None
    if t.symbol is not None and t.item is not None:
        return _abs(t.item, t.symbol.span)
    for it in an.by_name.get(t.function or "", [])[:1]:
        span = item_names(it.green).fn_name
        return _abs(it, span) if span else None
    return None


def references(an: Analysis, offset: int, declaration: bool = True) -> list[Span]:
    t = resolve(an, offset)
    if t is None:
        return []
    if t.symbol is not None and t.item is not None:
        spans = [t.symbol.span] if declaration else []
        return [_abs(t.item, s) for s in [*spans, *t.symbol.refs]]
    name = t.function
    if name not in an.by_name:
        return []
    out: list[Span] = []
    for it in an.items:
        names = item_names(it.green)
        if declaration and it.facts.name == name and names.fn_name is not None:
            out.append(_abs(it, names.fn_name))
        out += [_abs(it, s) for s, n in names.fn_refs if n == name]
    return sorted(out)


class RenameError(ValueError):
    """A rename that would not compile the same: the message says why."""


def rename(an: Analysis, offset: int, new: str) -> list[Span]:
    """Every span to replace with ``new``; RenameError when ``new`` cannot be that name."""
    t = resolve(an, offset)
    if t is None:
        raise RenameError("no variable or function here")
    if t.function is not None and t.function not in an.by_name:
        raise RenameError(f"'{t.function}' is not a function of this file")
    if not IDENT_RE.match(new) or new.encode() in KEYWORDS:
        raise RenameError(f"'{new}' is not a name")
    if new in DTYPES or new in BUILTIN_NAMES:
        raise RenameError(f"'{new}' is a {'type' if new in DTYPES else 'builtin'} name")
    if t.function is not None and new in an.by_name:
        raise RenameError(f"a function '{new}' exists already")
    if t.symbol is not None and t.item is not None:
        taken = {s.name for s in item_names(t.item.green).symbols if s is not t.symbol}
        if new in taken:  # it could capture or be captured: conservative, refuse
            raise RenameError(f"'{new}' is bound in this function already")
    return references(an, offset, declaration=True)


# ------------------------------------------------------------------------------ hover


def hover(an: Analysis, offset: int) -> str | None:
    """Markdown: what the name or expression at ``offset`` is, and the enclosing export."""
    item = an.item_at(offset)
    first = _hover_name(an, offset) or _hover_expr(an, item, offset)
    if first is None:
        return None
    if item is not None and item.facts.export:
        return f"{first}\n\n{export_summary(an, item)}"
    return first


def _hover_name(an: Analysis, offset: int) -> str | None:
    t = resolve(an, offset)
    if t is not None and t.symbol is not None and t.item is not None:
        ty = symbol_type(an, t.item, t.symbol) or "type unknown (see diagnostics)"
        return f"```kera\n({t.symbol.kind}) {t.symbol.name}: {ty}\n```"
    if t is not None and t.function in an.by_name:
        it = an.by_name[t.function or ""][0]
        return f"```kera\n{header(an, it)}\n```"
    found = token_at(an.tree, offset)
    if found is None or found[0].kind != K.IDENT:
        return None
    name = found[0].text.decode("utf-8", "replace")
    if found[2][-1].kind == K.TENSOR_TYPE and name in DTYPES:
        return _hover_type(found[2][-1])
    if name not in BUILTIN_NAMES:
        return None
    contract = builtin_contract(name)
    text = f"```kera\n{builtin_signature(name)}\n```\nbuiltin"
    return text + (f"\n\n{contract}" if contract else "")


def _hover_type(node: GreenNode) -> str:
    """``f32[4, 8]``: the dtype, the shape and the element count."""
    text = "".join(tree_bytes(node).decode("utf-8", "replace").split())
    dims = [int(d) for d in re.findall(r"\d+", text.partition("[")[2])] if "[" in text else []
    count = 1
    for d in dims:
        count *= d
    shape = "scalar" if not dims else f"shape ({', '.join(map(str, dims))}), {count} elements"
    dtype = re.match(r"\w*", text)
    space = f", in {text.partition('@')[2]} memory" if "@" in text else ""
    return f"type `{text}`: dtype {dtype.group() if dtype else '?'}, {shape}{space}"


def symbol_type(an: Analysis, item: Item, sym: Symbol) -> str | None:
    """What a variable holds: the builder's binding, a carried value's initial value, or
    ``i32`` for a loop index (docs/language.md)."""
    result = an.result(item)
    known = result.bindings.get(sym.span[0])
    if known is not None:
        return known
    if sym.kind == "index":
        return "i32"
    if sym.value is None:
        return None
    source = item_names(item.green).at.get(sym.value[0])  # a bare name: its binding's type
    if source is not None and source is not sym and len(source.name) == sym.value[1] - sym.value[0]:
        return symbol_type(an, item, source)
    return _type_of_span(result.types, sym.value)


def _type_of_span(types: list[tuple[int, int, str]], span: Span) -> str | None:
    for a, b, ty in types:
        if (a, b) == span:
            return ty
    return None


def _hover_expr(an: Analysis, item: Item | None, offset: int) -> str | None:
    if item is None:
        return None
    rel = offset - item.offset
    best: tuple[int, int, str] | None = None
    for a, b, ty in an.result(item).types:
        if a <= rel < b and (best is None or b - a < best[1] - best[0]):
            best = (a, b, ty)
    if best is None:
        return None
    text = an.data[item.offset + best[0] : item.offset + best[1]].decode("utf-8", "replace")
    shown = text if len(text) <= 60 and "\n" not in text else text[:57].split("\n")[0] + "..."
    return f"`{shown}`: `{best[2]}`"


def header(an: Analysis, it: Item) -> str:
    """``export fn f(x: f32[8]) -> f32[8]``: the item's text up to its body, on one line."""
    body = it.green.children[-1] if it.green.children else None
    cut = it.end - (body.width if isinstance(body, GreenNode) and body.kind == K.BLOCK else 0)
    text = an.data[it.offset : cut].decode("utf-8", "replace")
    return " ".join(text.split())


def export_summary(an: Analysis, it: Item) -> str:
    """``export fn f``: node count and fingerprint (at -O0, as ``kerac fingerprint``)."""
    fn = an.result(it).function
    name = it.facts.name or "?"
    if fn is None:
        return f"export fn `{name}`: not built (it has errors)"
    return f"export fn `{name}`: {len(fn.nodes())} nodes, fingerprint `{fn.fingerprint}`"


# ----------------------------------------------------------------------------- symbols


@dataclass(frozen=True, slots=True)
class Outline:
    name: str
    detail: str
    span: Span
    name_span: Span
    children: tuple[tuple[str, str, Span], ...]  # (name, kind, span)


def outline(an: Analysis) -> list[Outline]:
    out: list[Outline] = []
    for it in an.items:
        names = item_names(it.green)
        if names.fn_name is None:
            continue
        kids = tuple((s.name, s.kind, _abs(it, s.span)) for s in names.symbols)
        out.append(
            Outline(
                it.facts.name or "",
                header(an, it),
                (it.offset, it.end),
                _abs(it, names.fn_name),
                kids,
            )
        )
    return out


# ---------------------------------------------------------------------- semantic tokens

TOKEN_TYPES = ["function", "parameter", "variable", "type", "keyword", "number", "comment",
               "operator", "property"]  # fmt: skip
TOKEN_MODIFIERS = ["declaration", "defaultLibrary"]
_T = {name: i for i, name in enumerate(TOKEN_TYPES)}
#: token kind -> semantic token type (identifiers are classified by what they name)
TOKEN_CLASS: dict[int, int] = {
    **{int(k): _T["keyword"] for k in KEYWORDS.values() if k != K.FLOAT_NUMBER},
    **{int(k): _T["operator"] for k in PUNCT.values()},
    K.TRUE_KW: _T["keyword"],
    K.FALSE_KW: _T["keyword"],
    K.INT_NUMBER: _T["number"],
    K.FLOAT_NUMBER: _T["number"],
    K.LINE_COMMENT: _T["comment"],
    K.BLOCK_COMMENT: _T["comment"],
}
for _k in (K.L_PAREN, K.R_PAREN, K.L_BRACE, K.R_BRACE, K.L_BRACK, K.R_BRACK, K.COMMA, K.SEMI):
    TOKEN_CLASS.pop(int(_k), None)  # brackets and separators: left to the editor's grammar
#: nodes whose identifiers name types: a dtype, and a memory space (``@device``) where the
#: language has them
TYPE_PARENTS = frozenset(
    int(k) for k in (K.TENSOR_TYPE, getattr(K, "SPACE", K.TENSOR_TYPE)) if k is not None
)
#: symbol kind -> semantic token type
NAME_CLASS = {"parameter": _T["parameter"], "let": _T["variable"], "index": _T["variable"],
              "carried": _T["variable"]}  # fmt: skip


def semantic_tokens(an: Analysis) -> list[tuple[int, int, int, int]]:
    """(start, end, type, modifier bits) per classified token, in source order."""
    out: list[tuple[int, int, int, int]] = []
    item_iter = iter(an.items)
    item = next(item_iter, None)
    names = item_names(item.green) if item else None
    for tok, pos, parent, grand in tokens(an.tree):
        while item is not None and pos >= item.end:
            item = next(item_iter, None)
            names = item_names(item.green) if item else None
        end = pos + tok.width
        if tok.kind != K.IDENT:
            cls = TOKEN_CLASS.get(tok.kind)
            if cls is not None:
                out.append((pos, end, cls, 0))
            continue
        found = _ident_class(an, tok, pos, grand if parent == K.NAME else parent, item, names)
        if found is not None:
            out.append((pos, end, *found))
    return out


def _ident_class(
    an: Analysis, tok: GreenToken, pos: int, parent: int, item: Item | None, names: ItemNames | None
) -> tuple[int, int] | None:
    text = tok.text.decode("utf-8", "replace")
    if parent in TYPE_PARENTS or (parent in (K.NAME_REF, K.CAST_EXPR) and text in DTYPES):
        return _T["type"], 0
    if item is None or names is None:
        return None
    rel = pos - item.offset
    sym = names.at.get(rel)
    if sym is not None:
        return NAME_CLASS[sym.kind], 1 if sym.span[0] == rel else 0
    if names.fn_name is not None and names.fn_name[0] == rel:
        return _T["function"], 1
    if parent == K.KWARG and rel in {s[0] for s in names.attributes}:
        return _T["property"], 0
    if text in an.by_name:
        return _T["function"], 0
    if text in BUILTIN_NAMES:
        return _T["function"], 2
    return None


# -------------------------------------------------------------------------- completion


@dataclass(frozen=True, slots=True)
class Completion:
    label: str
    kind: str  # "builtin", "function", "variable", "keyword", "type"
    detail: str
    doc: str | None = None


def completions(an: Analysis, offset: int) -> list[Completion]:
    out = [
        Completion(name, "builtin", builtin_signature(name), _first_paragraph(name))
        for name in sorted(BUILTIN_NAMES)
    ]
    out += [Completion(n, "function", header(an, its[0])) for n, its in sorted(an.by_name.items())]
    item = an.item_at(offset)
    if item is not None:
        rel = offset - item.offset
        seen: set[str] = set()
        for s in reversed(item_names(item.green).symbols):
            if s.span[1] <= rel and s.name not in seen:
                seen.add(s.name)
                ty = symbol_type(an, item, s) or ""
                out.append(Completion(s.name, "variable", f"({s.kind}) {ty}".strip()))
    out += [
        Completion(k.decode(), "keyword", "keyword") for k in KEYWORDS if k not in (b"inf", b"nan")
    ]
    out += [Completion(d, "type", "dtype") for d in sorted(DTYPES)]
    return out


def _first_paragraph(name: str) -> str | None:
    text = builtin_contract(name)
    return text.split("\n\n")[0] if text else None


# -------------------------------------------------------------------------- formatting


def format_edits(
    text: str, lines: tuple[int, int] | None = None
) -> list[tuple[int, int, str]] | None:
    """Edits (first line, end line exclusive, new text) that format ``text``; only those
    touching ``lines`` (a range of 0-based lines, end exclusive) when given.  None when the
    text has syntax errors (the formatter leaves such text alone)."""
    formatted, diags = frontend.format_result(text)
    if diags:
        return None
    old, new = text.splitlines(keepends=True), formatted.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        # a block of lines changed one for one (the usual whitespace fix): one edit per line,
        # so that a range formats only its own lines
        pieces = (
            [(i1 + k, i1 + k + 1, new[j1 + k]) for k in range(i2 - i1)]
            if i2 - i1 == j2 - j1
            else [(i1, i2, "".join(new[j1:j2]))]
        )
        edits += [e for e in pieces if lines is None or _touches(e, lines)]
    return edits


def _touches(edit: tuple[int, int, str], lines: tuple[int, int]) -> bool:
    a, b, _ = edit
    return a < lines[1] and (b > lines[0] or a == b >= lines[0])
