"""keracheck run end to end: verdicts, exit codes, bad input, isolation, baselines, outputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kera import keg
from kera.dtypes import DType
from kera.ir import FunctionBuilder, Graph
from keracheck.cli import main

PLUGINS = str(Path(__file__).parent / "plugins" / "fake_targets.py")


def plugin(name: str) -> list[str]:
    return ["--backend-plugin", f"{PLUGINS}:{name}"]


def write_corpus(root: Path) -> Path:
    b = FunctionBuilder("mins")
    x, y = b.param("x", DType.F32, [4]), b.param("y", DType.F32, [4])
    f1 = b.build(b.op("min", x, y))
    c = FunctionBuilder("ints")
    i = c.param("i", DType.I32, [3])
    f2 = c.build(c.op("div", i, c.op("add", i, i)))
    root.mkdir(parents=True, exist_ok=True)
    keg.dump(Graph([f1, f2]), str(root / "a.keg"))
    return root


def run_json(tmp_path: Path, *args: str) -> tuple[int, dict[str, Any]]:
    out = tmp_path / "out.json"
    code = main(
        ["run", *args, "--format", "json", "--output", str(out), "--no-cache", "--inputs", "16"]
    )
    return code, json.loads(out.read_text())


def test_agreeing_targets_exit_0(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "c")
    code, doc = run_json(tmp_path, str(corpus), "--targets", "ref", *plugin("Clone"))
    assert code == 0
    assert doc["summary"]["cases"] == 2 and doc["summary"]["agree"] == 2
    case = doc["cases"][0]
    assert case["targets"]["clone"]["loadedFingerprint"] == case["fingerprint"]
    assert (
        case["targets"]["ref"]["outputs"][0]["sha256"]
        == case["targets"]["clone"]["outputs"][0]["sha256"]
    )


def test_divergence_exit_1_is_classified(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "c")
    code, doc = run_json(
        tmp_path, str(corpus), "--targets", "ref", *plugin("Minss"), "--inputs", "64"
    )
    assert code == 1
    mins = next(c for c in doc["cases"] if c["function"] == "mins")
    assert mins["verdict"] == "diverge"
    (d,) = mins["divergences"]
    assert d["targets"] == ["ref", "minss"] and d["kind"] == "diverge"
    assert set(d["classes"]) <= {"nan-payload", "nan-vs-value", "signed-zero"}
    ex = d["examples"][0]
    assert set(ex["bits"]) == {"ref", "minss"} and "|" in ex["fields"]["ref"]
    ints = next(c for c in doc["cases"] if c["function"] == "ints")
    assert ints["verdict"] == "agree"


def test_bad_inputs_exit_2_and_keep_other_results(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "c")
    (corpus / "broken.keg").write_bytes(b"KEG\0garbage")
    (corpus / "unreadable.kera").mkdir()  # a directory named like a source file is skipped...
    # Any: numpy's stub would match a dict of arrays against savez's allow_pickle: bool
    wrong_shape: dict[str, Any] = {"ints.i": np.zeros((5, 2), np.int32)}
    np.savez(corpus / "a.inputs.npz", **wrong_shape)
    code, doc = run_json(
        tmp_path, str(corpus), str(tmp_path / "nope.kera"), "--targets", "ref,nosuch"
    )
    assert code == 2
    messages = "\n".join(e["message"] for e in doc["errors"])
    assert "broken.keg: invalid .keg: header section" in messages
    assert "nope.kera: no such file" in messages
    assert "array 'ints.i' has shape (5, 2), expected (N, 3)" in messages
    assert "unknown target 'nosuch'" in messages
    assert [c["function"] for c in doc["cases"]] == ["mins"]  # the rest of the run is kept


def test_companion_npz_inputs_are_used(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "c")
    i = np.array([[7, 0, -1]], np.int32)
    arrays: dict[str, Any] = {"ints.i": i}  # Any: as in the test above (savez's stub)
    np.savez(corpus / "a.inputs.npz", **arrays)
    code, doc = run_json(tmp_path, str(corpus), "--targets", "ref")
    ints = next(c for c in doc["cases"] if c["function"] == "ints")
    assert ints["inputs"]["source"] == "npz" and ints["inputs"]["n"] == 1
    assert code == 0


def test_crash_is_contained_exit_3(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "c")
    b = FunctionBuilder("bad")
    p = b.param("boom", DType.I32)
    keg.dump(Graph([b.build(b.op("neg", p))]), str(corpus / "b.keg"))
    code, doc = run_json(tmp_path, str(corpus), "--targets", "ref", *plugin("Crash"))
    assert code == 3
    verdicts = {c["function"]: c["verdict"] for c in doc["cases"]}
    assert verdicts == {"mins": "agree", "ints": "agree", "bad": "error"}
    bad = next(c for c in doc["cases"] if c["function"] == "bad")
    assert "crashed" in bad["targets"]["crash"]["message"]


def test_hang_times_out(tmp_path: Path) -> None:
    b = FunctionBuilder("h")
    p = b.param("x", DType.I32)
    tmp_path.mkdir(exist_ok=True)
    keg.dump(Graph([b.build(b.op("neg", p))]), str(tmp_path / "h.keg"))
    code, doc = run_json(
        tmp_path, str(tmp_path / "h.keg"), "--targets", "ref", *plugin("Hang"), "--timeout", "1"
    )
    assert code == 3
    assert "timed out" in doc["cases"][0]["targets"]["hang"]["message"]


def test_required_target_unavailable_exit_4(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = write_corpus(tmp_path / "c")
    code, doc = run_json(
        tmp_path, str(corpus), "--targets", "ref", *plugin("Missing"), "--require", "missing"
    )
    assert code == 4
    assert "faketool not on PATH: apt-get install faketool" in capsys.readouterr().err
    missing = next(t for t in doc["targets"] if t["id"] == "missing")
    assert missing["fix"] == "apt-get install faketool"


def test_nothing_to_run_exit_5(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    code, doc = run_json(tmp_path, str(tmp_path / "empty"), "--targets", "ref")
    assert code == 5 and doc["cases"] == []


def test_repeat_reports_nondeterminism(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "c")
    code, doc = run_json(
        tmp_path, str(corpus), "--targets", "ref", *plugin("Flaky"), "--repeat", "2"
    )
    assert code == 1
    kinds = {d["kind"] for c in doc["cases"] for d in c["divergences"]}
    assert "nondeterministic" in kinds


def test_unsupported_ops_are_reported(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "c")
    code, doc = run_json(tmp_path, str(corpus), "--targets", "ref", *plugin("NoMin"))
    mins = next(c for c in doc["cases"] if c["function"] == "mins")
    assert mins["targets"]["nomin"] == {"status": "unsupported", "message": "unsupported: min"}
    assert mins["verdict"] == "skipped" and code == 0


def test_baseline_accepts_and_reports_stale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = write_corpus(tmp_path / "c")
    base = tmp_path / "baseline.json"
    args = [str(corpus), "--targets", "ref", *plugin("Minss"), "--no-cache", "--inputs", "16"]
    assert (
        main(["baseline", "write", *args, "--output", str(base), "--reason", "x86 MINSS, tracked"])
        == 0
    )
    entries = json.loads(base.read_text())["entries"]
    assert len(entries) == 1 and entries[0]["reason"] == "x86 MINSS, tracked"
    code, doc = run_json(
        tmp_path, str(corpus), "--targets", "ref", *plugin("Minss"), "--baseline", str(base)
    )
    assert code == 0 and doc["summary"]["baselined"] == 1
    code, doc = run_json(
        tmp_path, str(corpus), "--targets", "ref", *plugin("Clone"), "--baseline", str(base)
    )
    assert code == 0 and doc["summary"]["staleBaseline"] == 1
    assert "stale baseline entry" in capsys.readouterr().err


def test_dump_outputs_layout(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "c")
    dump = tmp_path / "dump"
    main(
        [
            "run",
            str(corpus),
            "--targets",
            "ref",
            "--dump-outputs",
            str(dump),
            "--format",
            "json",
            "--output",
            str(tmp_path / "o.json"),
            "--no-cache",
        ]
    )
    fp = json.loads((tmp_path / "o.json").read_text())["cases"][0]["fingerprint"]
    assert (dump / fp / "ref" / "0.npy").is_file()
    assert {p.name for p in (dump / fp / "inputs").iterdir()} == {"x.npy", "y.npy"}


def test_generated_inputs_are_deterministic(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "c")
    _, a = run_json(tmp_path, str(corpus), "--targets", "ref", "--seed", "3")
    _, b = run_json(tmp_path, str(corpus), "--targets", "ref", "--seed", "3")
    _, c = run_json(tmp_path, str(corpus), "--targets", "ref", "--seed", "4")
    assert a["cases"][0]["inputs"] == b["cases"][0]["inputs"] != c["cases"][0]["inputs"]


@pytest.mark.parametrize("fmt", ["text", "json", "junit", "sarif", "github", "html"])
def test_every_format_renders(tmp_path: Path, fmt: str) -> None:
    corpus = write_corpus(tmp_path / "c")
    out = tmp_path / f"out.{fmt}"
    code = main(
        [
            "run",
            str(corpus),
            "--targets",
            "ref",
            *plugin("Minss"),
            "--format",
            fmt,
            "--output",
            str(out),
            "--no-cache",
        ]
    )
    assert code == 1
    text = out.read_text()
    assert "mins" in text or fmt == "github"
    if fmt == "json":
        assert json.loads(text)["schemaVersion"] == 1


def test_targets_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["targets", "--format", "json", *plugin("Missing")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schemaVersion"] == 1
    ids = {t["id"]: t for t in doc["targets"]}
    assert ids["ref"]["available"] is True
    assert ids["missing"]["available"] is False and ids["missing"]["reason"].startswith("faketool")


def test_bad_plugin_spec_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", ".", "--backend-plugin", "no_such_module_xyz:Thing"]) == 2
    assert "no_such_module_xyz" in capsys.readouterr().err
    assert main(["run", ".", "--backend-plugin", f"{PLUGINS}:Nope"]) == 2


def test_signed_report_verify_tamper_and_rerun(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = write_corpus(tmp_path / "c")
    keys = tmp_path / "keys"
    assert main(["keygen", "--out", str(keys)]) == 0
    report = tmp_path / "r.intoto.jsonl"
    code = main(
        [
            "run",
            str(corpus),
            "--targets",
            "ref",
            *plugin("Clone"),
            "--report",
            str(report),
            "--key",
            str(keys / "keracheck.key"),
            "--format",
            "json",
            "--output",
            str(tmp_path / "o.json"),
            "--no-cache",
        ]
    )
    assert code == 0
    lines = report.read_bytes().splitlines()
    assert len(lines) == 3  # two cases + run summary
    pub = str(keys / "keracheck.pub")
    assert main(["verify", str(report), "--key", pub]) == 0
    assert "VERIFIED" in capsys.readouterr().out
    data = bytearray(report.read_bytes())
    data[len(data) // 2] ^= 0x04
    tampered = tmp_path / "t.intoto.jsonl"
    tampered.write_bytes(bytes(data))
    assert main(["verify", str(tampered), "--key", pub]) == 1
    assert "FAILED" in capsys.readouterr().out
    # --rerun: the cases are .keg files with generated inputs; outputs must reproduce
    assert main(["verify", str(report), "--key", pub, "--rerun"]) == 0
    out = capsys.readouterr().out
    assert "a.keg:mins on ref: outputs reproduce" in out
    assert "not re-run" in out and "on clone: unavailable" in out
    assert main(["verify", str(report), "--key", pub, "--rerun", *plugin("Clone")]) == 0
    assert "a.keg:mins on clone: outputs reproduce" in capsys.readouterr().out
    # a case whose outputs no longer reproduce fails the rerun
    assert (
        main(
            [
                "verify",
                str(report),
                "--key",
                pub,
                "--rerun",
                "--backend-plugin",
                f"{PLUGINS}:MinssAsClone",
            ]
        )
        == 1
    )
    assert "outputs differ from the report" in capsys.readouterr().out


def test_a_large_run_goes_to_the_workers_in_bounded_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each worker batch holds at most ``BATCH_CASES`` cases (so a worker's memory does not
    grow with the corpus), and every case's result still comes back and is compared."""
    from keracheck import harness, worker

    sizes: list[int] = []
    real = worker.run_isolated

    def counted(spec: str, jobs: list[Any], repeat: int, timeout: float) -> Any:
        sizes.append(len(jobs))
        return real(spec, jobs, repeat, timeout)

    monkeypatch.setattr(harness, "BATCH_CASES", 1)
    monkeypatch.setattr(harness, "run_isolated", counted)
    corpus = write_corpus(tmp_path / "c")
    code, doc = run_json(tmp_path, str(corpus), "--targets", "ref", *plugin("Clone"))
    assert code == 0 and doc["summary"]["agree"] == 2
    assert sizes == [1, 1, 1, 1]  # two cases on two targets, one case per batch


class _Hinted:
    def __init__(self, name: str, hint: object = None) -> None:
        self.name = name
        if hint is not None:
            self.cost = hint


def test_the_costliest_targets_start_first_ties_in_plan_order() -> None:
    from keracheck.harness import costliest_first
    from keracheck.targets import Target

    def target(name: str, hint: object = None) -> Target:
        return Target(name, name, _Hinted(name, hint), None)  # type: ignore[arg-type]

    plan = [
        (target("ref"), None),
        (target("cpu", 10), None),
        (target("wasm"), None),
        (target("sim", 500), None),
        (target("bad", "many"), None),  # a hint that is not a number counts as 1
        (target("neg", -3), None),
        (target("sim-2", 300), None),
    ]
    order = [t.id for t, _ in costliest_first(plan)]
    assert order == ["sim", "sim-2", "cpu", "ref", "wasm", "bad", "neg"]


def test_the_simulators_are_costlier_than_every_software_target() -> None:
    """The hint that makes the main job start the Verilog targets first (they take most of a
    cold run: started after the software targets, one of them ran alone at the end)."""
    from keracheck.target import cost
    from keracheck.targets import BUILTIN, instantiate

    hints = {tid: cost(instantiate(spec)) for tid, spec in BUILTIN.items()}
    slow = {tid for tid in hints if tid.startswith("verilog")}
    assert slow == {"verilog", "verilog-verilator"}
    assert min(hints[t] for t in slow) > max(h for t, h in hints.items() if t not in slow)
