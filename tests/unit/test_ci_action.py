"""The GitHub action (``action.yml``) and its script (``scripts/ci-gate``): the action file is
read as GitHub reads it (``yamlsubset``), every input is used and every use declared, the gate
step's environment is what the script reads, the packages are named per target as
``scripts/setup`` names them, and the action's own run steps execute here under ``bash -e``
against a tiny corpus, as the runner would run them, with the verdict each exit code gives."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from yamlsubset import load

ROOT = Path(__file__).resolve().parents[2]
GATE = ROOT / "scripts" / "ci-gate"
ACTION: dict[str, Any] = load((ROOT / "action.yml").read_text())
PLUGINS = Path(__file__).parent / "plugins" / "fake_targets.py"
BIN = Path(sys.executable).parent  # where this environment's keracheck is
BASH = shutil.which("bash") or "/bin/bash"
SOURCE = "export fn mins(x: f32[8], y: f32[8]) -> f32[8] { min(x, y) }\n"


def steps() -> list[dict[str, Any]]:
    return list(ACTION["runs"]["steps"])


def step(ident: str) -> dict[str, Any]:
    (found,) = [s for s in steps() if s.get("id") == ident]
    return found


# ------------------------------------------------------------------------------ the file


def test_a_composite_action_with_the_inputs_of_the_issue() -> None:
    assert ACTION["runs"]["using"] == "composite"
    inputs = ACTION["inputs"]
    assert {"paths", "targets", "require", "key"} <= set(inputs)
    assert inputs["paths"]["required"] == "true"
    assert all(spec.get("description") for spec in inputs.values())
    assert all("default" in spec for name, spec in inputs.items() if name != "paths")
    assert inputs["repeat"]["default"] == "2"  # the in-target nondeterminism rule can fire


def test_every_input_is_used_and_every_use_is_declared() -> None:
    used = set(re.findall(r"\binputs\.([A-Za-z0-9_-]+)", json.dumps(ACTION["runs"])))
    assert used == set(ACTION["inputs"])


def test_run_steps_are_bash_calling_the_gate_script() -> None:
    """Composite run steps need a shell; the logic lives in scripts/ci-gate, so it is tested."""
    runs = [s for s in steps() if "run" in s]
    assert runs and all(s["shell"] == "bash" for s in runs)
    for s in runs:
        for sub in re.findall(r'scripts/ci-gate" (\w+)', s["run"]):
            assert f"\n    {sub})" in GATE.read_text(), sub
    assert '"$GITHUB_ACTION_PATH[targets]"' in step("install")["run"]  # the action's checkout


def test_the_gate_env_is_what_the_script_reads() -> None:
    env = step("gate")["env"]
    read = set(re.findall(r"\$\{?(KC_[A-Z_]+|KERACHECK_KEY)\b", GATE.read_text()))
    read_by_keracheck = {"KERACHECK_CACHE", "KERACHECK_KEY_PASSWORD"}
    assert set(env) == read | read_by_keracheck
    (cache,) = [s for s in steps() if s.get("uses", "").startswith("actions/cache@")]
    assert env["KERACHECK_CACHE"] == cache["with"]["path"]  # the cached folder is the one used
    assert env["KC_DEFER_EXIT"] == "true"  # the uploads run before the verdict fails the job


def test_outputs_are_the_gates() -> None:
    for name, spec in ACTION["outputs"].items():
        assert spec["value"] == "${{ steps.gate.outputs." + name + " }}"


# ------------------------------------------------------------------------------ packages


def packages(targets: str, path: str | None = None) -> set[str]:
    env = dict(os.environ, PATH=path) if path is not None else None
    proc = subprocess.run(
        [BASH, "-e", str(GATE), "packages", targets],
        capture_output=True, text=True, check=True, env=env,
    )  # fmt: skip
    return set(proc.stdout.split())


def test_packages_are_named_per_target_as_setup_names_them() -> None:
    from keracheck.targets import known_specs

    table = set(re.findall(r"^\s+\[([a-z0-9-]+)\]=", GATE.read_text(), re.M))
    assert table == {t.split(":")[0] for t in known_specs()}  # a new target needs a row
    block = re.search(r"APT_PKGS=\((.*?)\)", (ROOT / "scripts" / "setup").read_text(), re.S)
    assert block is not None
    setup = set(block[1].split()) | {"nodejs"}  # setup adds nodejs when there is no node
    assert packages("") <= setup
    assert packages("cpu:avx2,ref") == {"gcc", "libc6-dev"}
    assert packages("cpu-aarch64") == {
        "gcc-aarch64-linux-gnu",
        "libc6-dev-arm64-cross",
        "qemu-user",
    }
    assert packages("ref,wasm,ptx-emu") == set()


def test_nodejs_only_without_a_node(tmp_path: Path) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("sort", "tr", "sed"):
        found = shutil.which(tool)
        assert found is not None
        (tools / tool).symlink_to(found)
    assert packages("wasm-node", str(tools)) == {"nodejs"}
    (tools / "node").write_text("#!/bin/sh\n")
    (tools / "node").chmod(0o755)
    assert packages("wasm-node", str(tools)) == set()


# ------------------------------------------------------------------------------ running it


def _substitute(value: str, known: dict[str, str]) -> str:
    """``${{ inputs.x }}`` and the other expressions of the action, as the runner fills them."""

    def one(m: re.Match[str]) -> str:
        if m[1] not in known:
            raise AssertionError(f"the test does not know the expression {m[1]!r}")
        return known[m[1]]

    return re.sub(r"\$\{\{\s*([^}]+?)\s*\}\}", one, value)


def run_action(tmp_path: Path, **given: str) -> tuple[dict[str, str], str, int]:
    """The gate step and the verdict step of action.yml, run as the runner runs them: inputs
    with their defaults, the workspace as the working folder, the step's env, ``bash -e``.
    Returns (the step outputs, the gate's stdout, the verdict step's exit code)."""
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    inputs = {k: str(spec.get("default", "")) for k, spec in ACTION["inputs"].items()} | given
    known = {f"inputs.{k}": v for k, v in inputs.items()} | {"runner.temp": str(tmp_path)}
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "KERACHECK"))}
    outputs_file, summary = tmp_path / "github_output", tmp_path / "step_summary.md"
    base |= {
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "GITHUB_ACTIONS": "true",
        "GITHUB_ACTION_PATH": str(ROOT),
        "GITHUB_OUTPUT": str(outputs_file),
        "GITHUB_STEP_SUMMARY": str(summary),
        "NO_COLOR": "1",
    }
    gate = step("gate")
    env = base | {k: _substitute(v, known) for k, v in gate["env"].items()}
    proc = subprocess.run(
        ["bash", "-e", "-c", gate["run"]], cwd=workspace, env=env, capture_output=True,
        text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]  # the verdict is deferred
    outputs = dict(line.split("=", 1) for line in outputs_file.read_text().splitlines())
    assert set(outputs) <= set(ACTION["outputs"])
    (verdict,) = [s for s in steps() if s.get("name") == "Verdict"]
    known |= {f"steps.gate.outputs.{k}": v for k, v in outputs.items()}
    env = base | {k: _substitute(v, known) for k, v in verdict["env"].items()}
    last = subprocess.run(
        ["bash", "-e", "-c", verdict["run"]], cwd=workspace, env=env, capture_output=True,
        text=True, check=False,
    )  # fmt: skip
    assert last.stdout.startswith(f"keracheck: exit {outputs['exit-code']}: ")
    return outputs, proc.stdout, last.returncode


def corpus(tmp_path: Path) -> None:
    folder = tmp_path / "workspace" / "corpus"
    folder.mkdir(parents=True)
    (folder / "mins.kera").write_text(SOURCE)


def keygen(tmp_path: Path, name: str) -> Path:
    out = tmp_path / "workspace" / name
    env = {k: v for k, v in os.environ.items() if k != "KERACHECK_KEY_PASSWORD"}
    subprocess.run(
        [str(BIN / "keracheck"), "keygen", "--out", str(out)], check=True, env=env,
        capture_output=True,
    )  # fmt: skip
    return out


def test_an_agreeing_run_passes_with_every_report(tmp_path: Path) -> None:
    corpus(tmp_path)
    outputs, stdout, verdict = run_action(
        tmp_path, paths="corpus/", targets="ref", require="ref,clone",
        args=f"--backend-plugin {PLUGINS}:Clone --inputs 16",
    )  # fmt: skip
    assert verdict == 0 and outputs["exit-code"] == "0"
    ws = tmp_path / "workspace"
    assert set(outputs) == {"exit-code", "json", "sarif", "html"}  # unsigned: no report
    doc = json.loads((ws / outputs["json"]).read_text())
    assert doc["summary"]["exitCode"] == 0 and doc["run"]["repeat"] == 2
    assert [c["verdict"] for c in doc["cases"]] == ["agree"]
    assert doc["run"]["inputs"] == 16  # the args input reached keracheck
    assert json.loads((ws / outputs["sarif"]).read_text())["version"] == "2.1.0"
    assert "<html" in (ws / outputs["html"]).read_text()
    assert "::error" not in stdout and "::group::keracheck report (text)" in stdout
    assert "keracheck" in (tmp_path / "step_summary.md").read_text()


def test_a_divergence_fails_with_annotations_and_a_verified_report(tmp_path: Path) -> None:
    corpus(tmp_path)
    keys = keygen(tmp_path, "keys")
    outputs, stdout, verdict = run_action(
        tmp_path, paths="corpus/mins.kera", targets="ref", require="ref",
        args=f"--backend-plugin {PLUGINS}:Minss", key=(keys / "keracheck.key").read_text(),
        **{"public-key": "keys/keracheck.pub", "outputs": "reports"},
    )  # fmt: skip
    assert verdict == 1 and outputs["exit-code"] == "1"
    assert outputs["report"] == "reports/keracheck.intoto.jsonl"
    assert "::error " in stdout and "KC00" in stdout
    assert "VERIFIED reports/keracheck.intoto.jsonl: 2 envelopes" in stdout  # verify passed


def test_a_report_that_does_not_verify_fails_the_gate(tmp_path: Path) -> None:
    corpus(tmp_path)
    signer = keygen(tmp_path, "keys")
    keygen(tmp_path, "other")  # a key pair that did not sign it
    outputs, stdout, verdict = run_action(
        tmp_path, paths="corpus/", targets="ref", require="ref",
        args=f"--backend-plugin {PLUGINS}:Clone --inputs 8",
        key=(signer / "keracheck.key").read_text(), **{"public-key": "other/keracheck.pub"},
    )  # fmt: skip
    assert verdict == 1 and outputs["exit-code"] == "1"
    assert "no signature verifies with key" in stdout
    doc = json.loads((tmp_path / "workspace" / outputs["json"]).read_text())
    assert doc["summary"]["exitCode"] == 0  # every case agrees: the verification failed it


def test_a_required_target_that_is_missing_is_exit_4(tmp_path: Path) -> None:
    corpus(tmp_path)
    outputs, _, verdict = run_action(
        tmp_path, paths="corpus/", targets="ref", require="missing",
        args=f"--backend-plugin {PLUGINS}:Missing",
    )  # fmt: skip
    assert verdict == 4 and outputs["exit-code"] == "4"


def test_the_script_refuses_an_empty_paths_and_an_unknown_command() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KC_")}
    proc = subprocess.run(["bash", "-e", str(GATE), "run"], env=env, capture_output=True, text=True)
    assert proc.returncode == 2 and "KC_PATHS is empty" in proc.stderr
    proc = subprocess.run(["bash", "-e", str(GATE), "nope"], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("usage: scripts/ci-gate")
    for code in range(6):
        proc = subprocess.run(
            ["bash", str(GATE), "verdict", str(code)], capture_output=True, text=True
        )
        assert proc.returncode == code and proc.stdout.startswith(f"keracheck: exit {code}: ")
    proc = subprocess.run(["bash", str(GATE), "verdict", ""], capture_output=True, text=True)
    assert proc.returncode == 3  # no code recorded: the gate itself failed


# ------------------------------------------------------------------------------ the docs


DOCS = ROOT / "docs" / "ci-github-actions.md"


def doc_workflows() -> list[dict[str, Any]]:
    return [load(block) for block in re.findall(r"```yaml\n(.*?)```", DOCS.read_text(), re.S)]


def test_the_documented_uses_step_passes_declared_inputs() -> None:
    uses = [
        s
        for wf in doc_workflows()
        for job in wf["jobs"].values()
        for s in job["steps"]
        if s.get("uses", "").endswith("@v1")
    ]
    assert uses, "docs/ci-github-actions.md shows the action with uses: <owner>/<repo>@v1"
    for s in uses:
        assert set(s["with"]) <= set(ACTION["inputs"])
        assert {k for k, spec in ACTION["inputs"].items() if spec.get("required") == "true"} <= set(
            s["with"]
        )


def test_every_input_is_in_the_docs_table() -> None:
    documented = set(re.findall(r"^\| `([a-z-]+)` \|", DOCS.read_text(), re.M))
    assert documented == set(ACTION["inputs"])
