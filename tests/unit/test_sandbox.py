"""The sandbox's parts (keracheck/sandbox): the seccomp program, decided instruction by
instruction and then loaded into a real process; the bubblewrap command line; the environment
allow-list; naming violations; ``--sandbox`` and ``[tool.keracheck] sandbox``; refusing to run
on a machine that cannot sandbox.  The hostile plugins are in test_sandbox_hostile.py."""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from keracheck import sandbox
from keracheck.cli import main
from keracheck.sandbox import bwrap, explain, launch, policy, seccomp
from keracheck.sandbox.seccomp import ACTIONS, ARCHES, SYSCALLS, WORKER, evaluate, program

SOURCE = "export fn f(x: f32[4], y: f32[4]) -> f32[4] { x * y + y }\n"
HEADERS = {
    "x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
    "aarch64": Path("/usr/aarch64-linux-gnu/include/asm-generic/unistd.h"),
}
needs_bwrap = pytest.mark.skipif(
    bwrap.problem() is not None, reason=f"{bwrap.problem()} (scripts/setup installs it)"
)


# ------------------------------------------------------------------------------ seccomp


def _decide(arch: str, name: str, *args: int) -> int:
    audit = ARCHES[arch][0]
    return evaluate(program(WORKER, arch), SYSCALLS[arch][name], audit, args)


@pytest.mark.parametrize("arch", list(ARCHES))
@pytest.mark.parametrize(
    ("name", "args", "action"),
    [
        ("ptrace", (), "kill"),
        ("mount", (), "kill"),
        ("bpf", (), "kill"),
        ("unshare", (), "kill"),
        ("keyctl", (), "eperm"),
        ("io_uring_setup", (), "eperm"),
        ("socket", (socket.AF_INET,), "eacces"),
        ("socket", (socket.AF_INET6,), "eacces"),
        ("socket", (socket.AF_NETLINK,), "eacces"),
        ("socket", (socket.AF_UNIX,), "allow"),
        ("kill", (1234, 9), "allow"),
    ],
)
def test_the_worker_policy_decides_each_call(
    arch: str, name: str, args: tuple[int, ...], action: str
) -> None:
    assert _decide(arch, name, *args) == ACTIONS[action]


@pytest.mark.parametrize("arch", list(ARCHES))
def test_a_call_outside_the_table_is_allowed_and_a_foreign_abi_is_killed(arch: str) -> None:
    prog = program(WORKER, arch)
    audit, foreign = ARCHES[arch]
    assert evaluate(prog, 0, audit) == seccomp.RET_ALLOW  # read / io_setup
    assert evaluate(prog, 0, 0x40000003) == seccomp.RET_KILL_PROCESS  # i386 on x86-64
    if foreign is not None:  # x32: the x86-64 numbers with bit 30 set
        nr = foreign | SYSCALLS[arch]["ptrace"]
        assert evaluate(prog, nr, audit) == seccomp.RET_KILL_PROCESS


def test_the_server_guard_refuses_signals_to_the_server_its_init_and_everyone() -> None:
    arch = seccomp.machine() if seccomp.machine() in ARCHES else "x86_64"
    prog = program(seccomp.guard_server(2), arch)
    audit, nr = ARCHES[arch][0], SYSCALLS[arch]["kill"]
    for pid in (1, 2, -1, -2):
        assert evaluate(prog, nr, audit, (pid & 0xFFFFFFFF, 9)) == ACTIONS["eperm"], pid
    for pid in (3, 77, -77, 0):
        assert evaluate(prog, nr, audit, (pid & 0xFFFFFFFF, 9)) == seccomp.RET_ALLOW, pid


@pytest.mark.parametrize("arch", list(ARCHES))
def test_the_syscall_numbers_match_the_kernel_headers(arch: str) -> None:
    header = HEADERS[arch]
    if not header.is_file():
        pytest.skip(f"{header} missing (apt-get install libc6-dev libc6-dev-arm64-cross)")
    text = header.read_text()
    for name, nr in SYSCALLS[arch].items():
        m = re.search(rf"#define __NR(?:3264)?_{name}\s+(\d+)", text)
        assert m is not None and int(m.group(1)) == nr, name


def _in_child(body: Any) -> int:
    """Run ``body()`` in a forked child; its exit status (as os.waitstatus_to_exitcode)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = body()
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.mark.skipif(seccomp.machine() not in ARCHES, reason="no syscall table for this machine")
def test_the_kernel_enforces_the_filter() -> None:
    """Loaded with prctl into a real process: a TCP socket is refused with EACCES, a local one
    is made, and ptrace kills the process with SIGSYS."""

    def sockets() -> int:
        seccomp.install(WORKER)
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
        try:
            socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        except PermissionError as e:
            return 0 if e.errno == errno.EACCES else 2
        return 3

    def trace() -> int:
        import ctypes

        seccomp.install(WORKER)
        ctypes.CDLL(None).ptrace(0, 0, None, None)
        return 4

    assert _in_child(sockets) == 0
    assert _in_child(trace) == -signal.SIGSYS


# ------------------------------------------------------------------------------ bubblewrap


def _view(tmp_path: Path, **kw: Any) -> bwrap.View:
    base: dict[str, Any] = {
        "read_only": (str(tmp_path / "code"),),
        "writable": (str(tmp_path / "cache"),),
        "scratch": str(tmp_path / "scratch"),
        "masked": (str(tmp_path / "code" / "keracheck.key"),),
        "mask_file": str(tmp_path / "masked"),
        "env": (("PATH", "/usr/bin"),),
        "home": str(tmp_path / "code" / "home"),
    }
    return bwrap.View(**(base | kw))


def test_the_command_line_isolates_and_orders_mounts_parents_first(tmp_path: Path) -> None:
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "keracheck.key").write_text("k")
    argv = bwrap.argv(_view(tmp_path), 9)
    for flag in ("--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc"):
        assert flag in argv
    for flag in ("--die-with-parent", "--new-session", "--disable-userns", "--clearenv"):
        assert flag in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert argv[argv.index("--seccomp") + 1] == "9" and argv[-1] == "--"
    joined = " ".join(argv)
    code, home = str(tmp_path / "code"), str(tmp_path / "code" / "home")
    # scratch first, then the code bound on it, then the home tmpfs and the key mask inside it
    order = [
        f"--bind {tmp_path / 'scratch'} /tmp",
        f"--ro-bind-try {code} {code}",
        f"--tmpfs {home}",
        f"--ro-bind {tmp_path / 'masked'} {code}/keracheck.key",
    ]
    assert [joined.index(o) for o in order] == sorted(joined.index(o) for o in order)
    assert joined.index(f"--remount-ro {home}") > joined.index(order[-1])
    assert joined.endswith(
        "--remount-ro / --clearenv --setenv PATH /usr/bin --chdir /tmp --seccomp 9 --"
    )


def test_a_read_only_path_over_the_scratch_directory_is_never_bound(tmp_path: Path) -> None:
    argv = bwrap.argv(_view(tmp_path, read_only=("/tmp", "/", str(tmp_path))), None)
    pairs = {(argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a == "--ro-bind-try"}
    assert ("/tmp", "/tmp") not in pairs and ("/", "/") not in pairs


def test_the_environment_passes_the_allow_list_and_never_a_secret() -> None:
    source = {
        "PATH": "/usr/bin",
        "LC_ALL": "C",
        "KERACHECK_CACHE": "/c",
        "KERACHECK_ORPHAN_TEST": "x",
        "KERACHECK_KEY": "-----BEGIN PRIVATE KEY-----",
        "KERACHECK_KEY_PASSWORD": "hunter2",
        "KERACHECK_SIGNING_PEM": "pem",
        "GITHUB_TOKEN": "t",
        "AWS_SECRET_ACCESS_KEY": "s",
        "SSH_AUTH_SOCK": "/run/agent",
        "HOME": "/root",
    }
    env = dict(bwrap.environment(source, {"HOME": "/h"}, ["KERACHECK_SIGNING_PEM"]))
    assert env == {
        "PATH": "/usr/bin",
        "LC_ALL": "C",
        "KERACHECK_CACHE": "/c",
        "KERACHECK_ORPHAN_TEST": "x",
        "HOME": "/h",
    }


# ------------------------------------------------------------------------------ naming


def _raised(e: BaseException) -> BaseException:
    try:
        raise e
    except BaseException as caught:
        return caught


@pytest.mark.parametrize(
    ("error", "kind", "prefix"),
    [
        (MemoryError(), "address-space", "sandbox: address-space limit (16 GiB) reached"),
        (OSError(errno.EFBIG, "File too large"), "file-size", "sandbox: file-size limit"),
        (
            OSError(errno.EROFS, "Read-only file system", "/etc/x"),
            "read-only",
            "sandbox: write outside the scratch directory denied (/etc/x)",
        ),
        (
            FileNotFoundError(errno.ENOENT, "No such file", "/home/u/.ssh/id_rsa"),
            "hidden-path",
            "sandbox: the home directory is hidden",
        ),
        (
            PermissionError(errno.EACCES, "Permission denied", "/k/keracheck.key"),
            "hidden-path",
            "sandbox: /k/keracheck.key is hidden",
        ),
        (OSError(errno.ENETUNREACH, "unreachable"), "network", "sandbox: network access denied"),
        (RuntimeError("wrapped"), None, "RuntimeError"),
    ],
)
def test_an_exception_is_named_by_what_the_sandbox_did(
    error: BaseException, kind: str | None, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    context = explain.Context(policy.LIMITS["plugin"], ("/k/keracheck.key",), "/home/u")
    monkeypatch.setattr(explain, "CONTEXT", context)
    message, got = explain.describe(_raised(error), f"{type(error).__name__}: {error}")
    assert got == kind and message.startswith(prefix)


def test_a_refused_fork_is_a_process_limit_and_other_eagain_is_not() -> None:
    fork_refused = BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
    try:
        raise fork_refused  # the failing line names fork, as ``os.fork()`` does
    except BlockingIOError as e:
        assert explain.exception(e) == (
            "process-count",
            "sandbox: process-count limit reached (fork failed)",
        )
    try:
        raise BlockingIOError(errno.EAGAIN, "would block")
    except BlockingIOError as e:
        assert explain.exception(e) is None


@pytest.mark.skipif(seccomp.machine() not in ARCHES, reason="no syscall table for this machine")
def test_a_socket_the_filter_refuses_is_named_network_access() -> None:
    def body() -> int:
        seccomp.install(WORKER)
        try:
            socket.create_connection(("127.0.0.1", 9), timeout=1)
        except PermissionError as e:
            return 0 if explain.exception(e) == ("network", "sandbox: network access denied") else 5
        return 6

    assert _in_child(body) == 0


@pytest.mark.parametrize(
    ("code", "kind"),
    [(-signal.SIGSYS, "seccomp"), (-signal.SIGXCPU, "cpu-time"), (-signal.SIGXFSZ, "file-size")],
)
def test_a_death_by_a_limit_is_named(code: int, kind: str) -> None:
    message, got = explain.crashed(code)
    assert got == kind and message.endswith(f"target process crashed (exit code {code})")
    assert explain.crashed(-signal.SIGSEGV) == ("target process crashed (exit code -11)", None)


def test_the_wasm_engines_have_no_address_space_limit() -> None:
    wasm = policy.limits_for("builtin", "keracheck.targets.wasm:WasmNodeBackend")
    cpu = policy.limits_for("builtin", "keracheck.targets.cpu:cpu")
    assert (
        wasm.address_space is None and cpu.address_space == policy.LIMITS["builtin"].address_space
    )
    assert policy.limits_for("plugin", "keracheck.targets.wasm:WasmBackend").address_space


# ------------------------------------------------------------------------------ the CLI


def _run(tmp_path: Path, *flags: str) -> tuple[int, dict[str, Any]]:
    src = tmp_path / "a.kera"
    src.write_text(SOURCE)
    out = tmp_path / "out.json"
    out.unlink(missing_ok=True)
    args = ["run", str(src), "--targets", "ref", "--no-cache", "-q", "--format", "json"]
    code = main([*args, "--output", str(out), *flags])
    return code, json.loads(out.read_text()) if out.exists() else {}


def test_without_bubblewrap_keracheck_refuses_and_says_how_to_fix_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        bwrap, "problem", lambda: "bubblewrap (bwrap) is not installed: " + bwrap.INSTALL
    )
    code, doc = _run(tmp_path)
    err = capsys.readouterr().err
    assert code == 2 and not doc
    assert "apt-get install bubblewrap" in err and "--sandbox=off" in err


def test_sandbox_off_is_loud_and_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, doc = _run(tmp_path, "--sandbox=off")
    assert code == 0 and doc["sandbox"] == {"mode": "off", "mechanisms": []}
    assert "WARNING: --sandbox=off" in capsys.readouterr().err
    assert sandbox.mode() == "on"  # the next command in this process is sandboxed again


def test_the_config_can_turn_it_off_and_rejects_other_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.keracheck]\nsandbox = "off"\n')
    code, doc = _run(tmp_path)
    assert code == 0 and doc["sandbox"]["mode"] == "off"
    (tmp_path / "pyproject.toml").write_text('[tool.keracheck]\nsandbox = "maybe"\n')
    code, _ = _run(tmp_path)
    assert code == 2 and 'sandbox must be "on" or "off"' in capsys.readouterr().err
    assert main(["run", "x.kera", "--sandbox", "maybe"]) == 2


@needs_bwrap
def test_a_sandboxed_run_records_what_contained_it(tmp_path: Path) -> None:
    code, doc = _run(tmp_path, "--sandbox", "on")
    assert code == 0 and doc["sandbox"]["mode"] == "on"
    for mechanism in ("user-namespace", "network-namespace", "seccomp", "rlimits"):
        assert mechanism in doc["sandbox"]["mechanisms"]
    assert "violations" not in doc["sandbox"]


@needs_bwrap
def test_a_worker_runs_in_its_own_namespaces_without_capabilities_under_seccomp() -> None:
    """A look from outside at the batch server every target runs in (host /proc): its own
    user, pid and network namespaces, no capability, a seccomp filter, no new privileges, a
    read-only root, the sandbox's environment."""
    sb = launch.Sandboxed(launch.plan_for("builtin"), policy.LIMITS["builtin"])
    try:
        assert sb.pid is not None
        server = _wait_for_server(sb.pid)
        for ns in ("net", "pid", "user", "ipc", "uts"):
            assert os.readlink(f"/proc/{server}/ns/{ns}") != os.readlink(f"/proc/self/ns/{ns}")
        status = Path(f"/proc/{server}/status").read_text()
        for field in (r"CapEff:\s+0+$", r"CapBnd:\s+0+$", r"Seccomp:\s+2$", r"NoNewPrivs:\s+1$"):
            assert re.search(field, status, re.M), field
        root = [ln.split() for ln in Path(f"/proc/{server}/mountinfo").read_text().splitlines()]
        assert any(f[4] == "/" and f[5].split(",")[0] == "ro" for f in root)
        assert b"KERACHECK_SANDBOXED=1" in Path(f"/proc/{server}/environ").read_bytes()
    finally:
        sb.close()


def _wait_for_server(pid: int) -> int:
    """The host pid of the Python process inside the sandbox led by ``pid``."""
    for _ in range(500):
        for p in _descendants(pid):
            try:
                entry = b"keracheck.sandbox.entry" in Path(f"/proc/{p}/cmdline").read_bytes()
                if entry and Path(f"/proc/{p}/comm").read_text().strip() != "bwrap":
                    return p
            except OSError:
                continue
        time.sleep(0.02)
    raise AssertionError("no sandboxed server appeared")


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop(0)
        try:
            kids = [int(k) for k in Path(f"/proc/{p}/task/{p}/children").read_text().split()]
        except OSError:
            continue
        out += kids
        todo += kids
    return out
