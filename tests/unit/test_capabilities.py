"""Capabilities (keracheck.security): what the command line names is granted, everything else
denied; a restricting [tool.keracheck.policy] wins over the command line; a denial is exit 2
with a message naming the capability and how to grant it; the network is never granted."""

from __future__ import annotations

import argparse
import json
import os
import socket
import textwrap
from pathlib import Path

import pytest

from keracheck import harness, security
from keracheck.cli import main
from keracheck.collect import collect
from keracheck.options import Options
from keracheck.security import CapabilityDenied, Kind, PolicyBuilder, PolicyError, SecurityManager
from keracheck.security.startup import for_command

PLUGINS = Path(__file__).parent / "plugins" / "fake_targets.py"
SOURCE = "export fn twice(x: f32[4]) -> f32[4] {\n    x + x\n}\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder (the working directory) with a one-case corpus and its own cache."""
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.kera").write_text(SOURCE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KERACHECK_CACHE", str(tmp_path / "cache"))
    return tmp_path


def policy(project: Path, body: str) -> None:
    text = "[tool.keracheck]\n[tool.keracheck.policy]\n" + textwrap.dedent(body)
    (project / "pyproject.toml").write_text(text)


def run(*args: str) -> int:
    return main(["run", "corpus", "--targets", "ref", "-q", "--inputs", "4", *args])


# ------------------------------------------------------------------------------ the policy


def test_a_path_grant_covers_what_is_under_it_and_nothing_beside_it(tmp_path: Path) -> None:
    p = PolicyBuilder().read(str(tmp_path / "a")).build()
    assert p.covering(Kind.READ, str(tmp_path / "a" / "b" / "c.kera"))
    assert p.covering(Kind.READ, str(tmp_path / "a"))
    assert p.covering(Kind.READ, str(tmp_path / "ab")) is None  # a prefix is not a folder
    assert p.covering(Kind.WRITE, str(tmp_path / "a" / "x")) is None  # read is not write


def test_level_variants_need_their_targets_toolchain() -> None:
    m = SecurityManager(PolicyBuilder().toolchain("cpu").build())
    m.check(Kind.TOOLCHAIN, "cpu@O2")
    with pytest.raises(CapabilityDenied, match="toolchain 'wasm'"):
        m.check(Kind.TOOLCHAIN, "wasm@O2")


def test_plugin_specs_are_compared_by_real_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(PLUGINS.parent)
    m = SecurityManager(PolicyBuilder().plugin(f"{PLUGINS}:Clone").build())
    m.check(Kind.PLUGIN, "fake_targets.py:Clone")
    with pytest.raises(CapabilityDenied, match=r"fake_targets\.py:Minss"):
        m.check(Kind.PLUGIN, "fake_targets.py:Minss")


def test_the_network_is_never_granted() -> None:
    with pytest.raises(PolicyError, match="never granted"):
        PolicyBuilder().network()
    with pytest.raises(PolicyError):
        PolicyBuilder().grant(Kind.NETWORK, ["example.org:443"])
    m = SecurityManager(PolicyBuilder().build())
    with pytest.raises(CapabilityDenied, match="never granted"):
        m.check(Kind.NETWORK, "anything")


def test_a_check_is_audited_grants_first_use_and_denials() -> None:
    m = SecurityManager(PolicyBuilder().write("/out", source="test").build())
    m.check(Kind.WRITE, "/out/a.json")
    m.check(Kind.WRITE, "/out/b.json")  # the same grant: one "use" entry
    with pytest.raises(CapabilityDenied):
        m.check(Kind.WRITE, "/etc/passwd")
    kinds = [(e.kind, dict(e.data).get("scope")) for e in m.audit.entries()]
    assert kinds == [
        ("start", None),
        ("grant", "/out"),
        ("use", "/out/a.json"),
        ("deny", "/etc/passwd"),
    ]
    assert security.verify_log(m.snapshot()).ok


def test_checks_pass_outside_any_installed_manager_and_stack_inside() -> None:
    assert security.current() is None
    security.check_write("/anywhere")  # library code, the caller's own rights
    outer = SecurityManager(PolicyBuilder().write("/a").build())
    inner = SecurityManager(PolicyBuilder().write("/b").build())
    with security.installed(outer):
        security.check_write("/a/x")
        with security.installed(inner), pytest.raises(CapabilityDenied):
            security.check_write("/a/x")
        security.check_write("/a/x")
    assert security.current() is None


# ------------------------------------------------------------------------------ the network


def test_sockets_are_refused_while_a_manager_is_installed() -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    m = SecurityManager(PolicyBuilder().build())
    try:
        with security.installed(m):
            with pytest.raises(CapabilityDenied, match="capability denied: network"):
                socket.create_connection(("127.0.0.1", port), timeout=5)
            with pytest.raises(CapabilityDenied):
                socket.getaddrinfo("localhost", 80)
            a, b = socket.socketpair(socket.AF_UNIX)  # local IPC stays allowed
            a.sendall(b"x")
            assert b.recv(1) == b"x"
            a.close()
            b.close()
        denied = [e for e in m.audit.entries() if e.kind == "deny"]
        assert len(denied) == 2 and all(e.data["kind"] == "network" for e in denied)
        socket.create_connection(("127.0.0.1", port), timeout=5).close()  # uninstalled: allowed
    finally:
        server.close()


# ------------------------------------------------------------------------------ the command line


def test_what_the_command_line_names_is_granted_and_nothing_else(project: Path) -> None:
    conf: dict[str, object] = {}
    args = argparse.Namespace(
        command="run",
        paths=["corpus"],
        output="out/run.json",
        output_format=["html=site/run.html"],
        report=None,
        key=None,
        dump_outputs=None,
        baseline=None,
        targets="ref,cpu",
        require=None,
        backend_plugin=[f"{PLUGINS}:Clone"],
        pass_plugin=None,
    )
    m = for_command(args, conf)
    granted = {(g["kind"], g["scope"]) for g in m.grants()}
    real = os.path.realpath
    assert ("read", real("corpus")) in granted
    assert ("write", real("out/run.json")) in granted
    assert ("write", real("site/run.html")) in granted
    assert ("toolchain", "ref") in granted and ("toolchain", "cpu") in granted
    assert ("plugin", f"{PLUGINS}:Clone") in granted
    assert not any(kind == "key" for kind, _ in granted)
    for kind, scope in [
        (Kind.WRITE, "out/other.json"),
        (Kind.TOOLCHAIN, "wasm"),
        (Kind.KEY, "k.key"),
    ]:
        with pytest.raises(CapabilityDenied, match="command line names"):
            m.check(kind, scope)


def test_an_output_outside_a_restricting_policy_is_refused_before_anything_runs(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy(project, 'write = ["out"]\n')
    assert run("--format", "json", "--output", "elsewhere/run.json") == 2
    err = capsys.readouterr().err
    assert "capability denied: write" in err and "elsewhere/run.json" in err
    assert f"the policy in {project / 'pyproject.toml'}" in err
    assert "add it (or a folder above it) to write = [...] in [tool.keracheck.policy]" in err
    assert not (project / "elsewhere").exists()
    assert run("--output-format", "html=site/run.html") == 2
    assert "--output-format" in capsys.readouterr().err
    (project / "out").mkdir()
    assert run("--format", "json", "--output", "out/run.json") == 0
    assert json.loads((project / "out" / "run.json").read_text())["summary"]["cases"] == 1


def test_a_plugin_the_policy_does_not_list_is_refused_before_it_is_loaded(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy(project, f'plugins = ["{PLUGINS}:Clone"]\n')
    assert run("--backend-plugin", f"{PLUGINS}:Minss") == 2
    err = capsys.readouterr().err
    assert "capability denied: plugin" in err and "Minss" in err and "plugins = [...]" in err
    assert run("--backend-plugin", f"{PLUGINS}:Clone") == 0


def test_toolchains_and_keys_are_restricted_the_same_way(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy(project, 'toolchains = ["ref"]\nkeys = ["env://KERACHECK_TEST_KEY"]\n')
    assert main(["run", "corpus", "--targets", "ref,cpu", "-q"]) == 2
    assert "capability denied: toolchain 'cpu'" in capsys.readouterr().err
    assert run("--report", "r.intoto.jsonl", "--key", "other.key") == 2
    assert "capability denied: key" in capsys.readouterr().err


@pytest.mark.parametrize(
    "body,words",
    [
        ("network = true\n", "network can only be false"),
        ('write = "out"\n', "'write' must be a list of strings"),
        ("audit-capacity = 2\n", "audit-capacity must be an integer"),
        ("sockets = []\n", "unknown key 'sockets'"),
    ],
)
def test_a_bad_policy_is_a_configuration_error(
    project: Path, capsys: pytest.CaptureFixture[str], body: str, words: str
) -> None:
    policy(project, body)
    assert run() == 2
    assert words in capsys.readouterr().err


def test_a_symlink_out_of_the_corpus_is_an_input_error(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("secret") / "stolen.kera"
    outside.write_text(SOURCE.replace("twice", "stolen"))
    (project / "corpus" / "link.kera").symlink_to(outside)
    out = project / "run.json"
    assert run("--format", "json", "--output", str(out)) == 2
    doc = json.loads(out.read_text())
    assert [c["function"] for c in doc["cases"]] == ["twice"]
    (error,) = doc["errors"]
    assert "capability denied: read" in error["message"] and "stolen.kera" in error["message"]


def test_a_library_run_is_gated_by_the_installed_manager(project: Path) -> None:
    opts = Options(targets=["ref", "cpu"], n=4, cache_dir=None)
    m = SecurityManager(PolicyBuilder().read("corpus").toolchain("ref").build())
    with security.installed(m), pytest.raises(CapabilityDenied, match="toolchain 'cpu'"):
        harness.run(["corpus"], opts)
    # without one, the run grants what its Options name, and nothing else
    doc, code = harness.run(["corpus"], Options(targets=["ref"], n=4, cache_dir=None))
    assert code == 0 and doc["summary"]["cases"] == 1
    with security.installed(SecurityManager(PolicyBuilder().build())):
        assert collect(["corpus"], Options())  # a denied read is an input error, not a crash
        assert "capability denied: read" in collect(["corpus"], Options()).errors[0]["message"]
