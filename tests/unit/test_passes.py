"""The pass manager and its validator: one test per invariant showing the error a corrupted
graph gets, a pass that breaks the IR named in the error, fixed-point rounds and statistics,
pass plugins, the ``.keg`` record of an optimised graph, and ``kerac``'s pass options."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kera import keg, passes
from kera.dtypes import DType
from kera.ir import Function, FunctionBuilder, Graph, Node, TensorType, const
from kera.ops import Op
from kera.passes import InvariantError, Pass, PassError, PassManager, validate

ROOT = Path(__file__).resolve().parents[2]
_set = object.__setattr__


def _fn() -> Function:
    b = FunctionBuilder("f")
    x, y = b.param("x", DType.F32, [4]), b.param("y", DType.F32, [4])
    two = const(2.0, DType.F32, [4])
    return b.build(b.op("mul", b.op("add", x, y), b.op("add", two, two)))


@pytest.fixture
def fn() -> Iterator[Function]:
    f = _fn()
    yield f


def _broken(invariant: str, f: Function) -> None:
    with pytest.raises(InvariantError) as e:
        validate(f)
    assert e.value.invariant == invariant, str(e.value)
    assert f"invariant '{invariant}' broken" in str(e.value)


def test_a_sound_graph_validates(fn: Function) -> None:
    validate(fn)


def test_region_hash(fn: Function) -> None:
    _set(fn, "region_hash", b"\0" * 32)
    _broken("region", fn)


def test_region_params(fn: Function) -> None:
    _set(fn, "params", (fn.params[1], fn.params[0]))
    _broken("region", fn)


def test_order(fn: Function) -> None:
    nodes = fn.nodes()
    _set(fn, "_nodes", [*nodes[1:], nodes[0]])
    _broken("order", fn)


def test_acyclic(fn: Function) -> None:
    mul = fn.results[0]
    add = mul.inputs[0]
    _set(add, "inputs", (add.inputs[0], mul))  # a cycle: add <- mul <- add
    try:
        _broken("order", fn)  # the stored order no longer matches the (cyclic) walk
        _set(fn, "_nodes", fn.nodes())
        with pytest.raises(InvariantError) as e:
            from kera.passes.validate import _edges

            _edges(fn)
        assert e.value.invariant == "acyclic" and "does not come first" in str(e.value)
    finally:
        _set(add, "inputs", (add.inputs[0], fn.params[1]))


def test_inputs_foreign_param() -> None:
    b = FunctionBuilder("g")
    x = b.param("x", DType.F32, [4])
    fn = b.build(b.op("neg", x))
    other = FunctionBuilder("h").param("x", DType.F32, [4])
    assert other is x  # same content, same node: interning
    stranger = FunctionBuilder("h")
    stranger.param("a", DType.F32, [4])
    z = stranger.param("z", DType.F32, [4])
    _set(fn, "_nodes", [z, *fn.nodes()])
    with pytest.raises(InvariantError) as e:
        from kera.passes.validate import _edges

        _edges(fn)
    assert e.value.invariant == "inputs" and "does not declare" in str(e.value)


def test_hash(fn: Function) -> None:
    node = fn.results[0]
    saved = node.hash
    _set(node, "hash", b"\1" * 32)
    try:
        with pytest.raises(InvariantError) as e:
            from kera.passes.validate import _hashes

            _hashes(fn)
        assert e.value.invariant == "hash" and "mul f32[4]" in str(e.value)
    finally:
        _set(node, "hash", saved)


def test_interned(fn: Function) -> None:
    node = fn.results[0]
    twin = object.__new__(Node)
    for k in ("op", "type", "inputs", "attr_items", "hash"):
        _set(twin, k, getattr(node, k))
    _set(fn, "results", (twin,))
    _set(fn, "_nodes", [*fn.nodes()[:-1], twin])
    with pytest.raises(InvariantError) as e:
        from kera.passes.validate import _hashes

        _hashes(fn)
    assert e.value.invariant == "interned"


def test_type(fn: Function) -> None:
    add = fn.results[0].inputs[0]
    saved = add.type
    _set(add, "type", TensorType(DType.F32, (8,)))
    try:
        with pytest.raises(InvariantError) as e:
            from kera.passes.validate import _types

            _types(fn)
        assert e.value.invariant == "type" and "re-infers as f32[4], stored f32[8]" in str(e.value)
    finally:
        _set(add, "type", saved)


def test_type_of_a_constant(fn: Function) -> None:
    two = next(n for n in fn.nodes() if n.op is Op.CONST)
    saved = two.attr_items
    _set(two, "attr_items", (("value", b"\0\0"),))
    try:
        with pytest.raises(InvariantError) as e:
            from kera.passes.validate import _types

            _types(fn)
        assert e.value.invariant == "type" and "wrong bytes" in str(e.value)
    finally:
        _set(two, "attr_items", saved)


def test_results(fn: Function) -> None:
    from kera.passes.validate import _results

    _set(fn, "_nodes", fn.nodes()[:-1])
    with pytest.raises(InvariantError) as e:
        _results(fn)
    assert e.value.invariant == "results"


def test_a_pass_that_breaks_the_graph_is_named(fn: Function) -> None:
    def vandal(f: Function) -> tuple[Function, int]:
        g = _fn()
        _set(g, "region_hash", b"\0" * 32)
        return g, 1

    with pytest.raises(PassError, match=r"after pass 'vandal' on 'f': invariant 'region'"):
        PassManager([Pass("vandal", 1, vandal)]).run(fn)


def test_fixed_point_rounds_and_stats(fn: Function) -> None:
    out = passes.optimize(fn, passes.pipeline(2))
    assert out.converged and out.rounds == 2  # round 2 changes nothing
    first = [s for s in out.stats if s.round == 1]
    assert [s.name for s in first] == ["inline", "fold", "simplify", "cse"]
    fold = first[1]
    assert (fold.nodes_before, fold.nodes_after, fold.rewrites) == (
        6,
        6,
        1,
    )  # add(2, 2) -> broadcast(4.0): uniform results stay compact
    assert out.validate_seconds > 0


def test_round_limit_is_reported(fn: Function) -> None:
    flip = [0]

    def toggler(f: Function) -> tuple[Function, int]:  # never reaches a fixed point
        flip[0] += 1
        b = FunctionBuilder("f")
        x = b.param("x", DType.F32, [4])
        b.param("y", DType.F32, [4])
        return b.build(b.op("neg", x) if flip[0] % 2 else b.op("abs", x)), 1

    out = PassManager([Pass("toggle", 1, toggler)], max_rounds=3).run(fn)
    assert not out.converged and out.rounds == 3


def test_o0_is_the_identity(fn: Function) -> None:
    assert passes.pipeline(0) == []
    assert passes.optimize(fn, passes.pipeline(0)).function is fn


def test_unknown_pass_and_level() -> None:
    with pytest.raises(passes.PassSpecError, match="unknown pass 'nope'; known: cse, fold"):
        passes.resolve(["nope"])
    with pytest.raises(passes.PassSpecError, match="unknown optimisation level 3"):
        passes.pipeline(3)


def test_pass_plugin_from_a_file(tmp_path: Path, fn: Function) -> None:
    plugin = tmp_path / "mypass.py"
    plugin.write_text(
        "NAME = 'noop'\nVERSION = 3\n\ndef run(fn):\n    return fn, 0\n\n"
        "class Plain:\n    name = 'plain'\n    version = 1\n\n    def run(self, fn):\n"
        "        return fn, 0\n"
    )
    import types

    module = passes.load_plugin(f"{plugin}:Plain")
    assert (module.name, module.version) == ("plain", 1)
    p = passes.as_pass(types.SimpleNamespace(NAME="noop", VERSION=3, run=lambda f: (f, 0)), "test")
    assert passes.pipeline_id([p]) == ["noop@3"]
    with pytest.raises(passes.PassSpecError, match="has no attribute 'Nope'"):
        passes.load_plugin(f"{plugin}:Nope")
    with pytest.raises(passes.PassSpecError, match="does not exist"):
        passes.load_plugin(f"{tmp_path / 'missing.py'}:X")
    with pytest.raises(passes.PassSpecError, match="must be 'module:attr'"):
        passes.load_plugin("no_colon")


def test_keg_records_the_pipeline_and_source_fingerprint(fn: Function) -> None:
    graph = Graph([fn])
    opt, _ = passes.optimize_graph(graph, passes.pipeline(2))
    recorded = opt.with_provenance(graph, passes.pipeline_id(passes.pipeline(2)))
    data = keg.dumps(recorded)
    assert data[4:6] == b"\2\0"  # format version 2: has a provenance section
    back = keg.loads(data)
    assert back.provenance is not None
    assert back.provenance.pipeline == ("inline@1", "fold@2", "simplify@1", "cse@1")
    assert back.source_fingerprints() == {"f": fn.fingerprint}
    assert back.functions["f"].fingerprint != fn.fingerprint
    assert keg.dumps(Graph([fn]))[4:6] == b"\1\0"  # -O0 graphs keep format version 1
    with pytest.raises(keg.KegError, match="provenance section"):
        keg.loads(data[:-1])


def _kerac(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kera.cli", *args], cwd=cwd, capture_output=True, text=True
    )


def test_kerac_levels_and_options(tmp_path: Path) -> None:
    src = tmp_path / "k.kera"
    src.write_text("export fn k(x: i32[4]) -> i32[4] {\n    (x + 0i32) * (1i32 + 2i32)\n}\n")
    r = _kerac("build", "-O2", "--stats", str(src), "-o", str(tmp_path / "k2.keg"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "fold" in r.stderr and "fixed point" in r.stderr
    r0 = _kerac("build", "-O0", str(src), "-o", str(tmp_path / "k0.keg"), cwd=tmp_path)
    assert r0.returncode == 0
    fp = _kerac("fingerprint", str(tmp_path / "k2.keg"), str(tmp_path / "k0.keg"), cwd=tmp_path)
    opt, plain = fp.stdout.splitlines()
    assert plain.split()[0] in opt and "(source " in opt and "(source" not in plain
    shown = _kerac("show", str(tmp_path / "k2.keg"), cwd=tmp_path).stdout
    assert shown.startswith("; optimised by inline@1, fold@2, simplify@1, cse@1")
    assert "add" not in shown  # x + 0 is gone
    after = _kerac("show", "--after", "fold", str(src), cwd=tmp_path).stdout
    assert "; optimised by inline@1, fold@2\n" in after and "add" in after
    printed = _kerac(
        "build", "--print-after", "simplify", str(src), "-o", str(tmp_path / "x.keg"), cwd=tmp_path
    )
    assert printed.stdout.startswith("; after simplify\nexport fn k(")
    bad = _kerac("build", "--passes", "fold,nope", str(src), cwd=tmp_path)
    assert bad.returncode == 2 and "unknown pass 'nope'" in bad.stderr
    bad_level = _kerac("build", "-O7", str(src), cwd=tmp_path)
    assert bad_level.returncode == 2 and "not an optimisation level" in bad_level.stderr
    not_there = _kerac("build", "-O0", "--print-after", "fold", str(src), cwd=tmp_path)
    assert not_there.returncode == 2 and "not in the pipeline" in not_there.stderr
