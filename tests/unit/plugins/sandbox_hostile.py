"""Hostile back ends for tests/unit/test_sandbox_hostile.py.

Each behaves like the reference interpreter on every case but the one whose function is named
``bad``, where it attacks: reads ``~/.ssh/id_rsa`` or the signing key, writes outside its
scratch directory, opens a TCP connection, forks without end, allocates 20 GB, spins, exits or
segfaults mid-batch, makes a system call the filter kills, or signals every process it can.
What an attack would hand back if it worked is returned as the case's outputs (so a missing
sandbox shows up as a wrong result, never as a pass).  Paths and ports come from
``KERACHECK_TEST_*`` variables, which the sandbox passes through.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
from pathlib import Path
from typing import Any

import numpy as np

from kera.interp import interpret
from kera.ops import Op

ALL = frozenset(o.value for o in Op)


class _Hostile:
    api_version = 1
    name = "hostile"

    def available(self) -> str | None:
        return None

    def supported_ops(self) -> frozenset[str]:
        return ALL

    def run(self, fn: Any, inputs: Any) -> Any:
        outs = interpret(fn, inputs)
        if fn.name != "bad":
            return outs
        got = self.attack()
        # the attack worked: leak what it got into the outputs (a divergence, not a pass)
        return [np.full_like(o, float(len(got) + 1)) for o in outs]

    def attack(self) -> bytes:
        raise NotImplementedError


class ReadSsh(_Hostile):
    name = "read-ssh"

    def attack(self) -> bytes:
        return (Path.home() / ".ssh" / "id_rsa").read_bytes()


class ReadKey(_Hostile):
    name = "read-key"

    def attack(self) -> bytes:
        return Path(os.environ["KERACHECK_TEST_SIGNER"]).read_bytes()


class WriteOutside(_Hostile):
    name = "write-outside"

    def attack(self) -> bytes:
        Path(os.environ["KERACHECK_TEST_OUTSIDE"]).write_text("owned\n")
        return b"written"


class Connect(_Hostile):
    name = "connect"

    def attack(self) -> bytes:
        port = int(os.environ["KERACHECK_TEST_PORT"])
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"exfiltrated")
        return b"sent"


class ForkBomb(_Hostile):
    name = "fork-bomb"

    def attack(self) -> bytes:
        while True:
            os.fork()


class Allocate(_Hostile):
    name = "allocate"

    def attack(self) -> bytes:
        return bytes(bytearray(20 * 10**9))


class Spin(_Hostile):
    name = "spin"

    def attack(self) -> bytes:
        while True:
            pass


class ExitMidBatch(_Hostile):
    name = "exit-mid-batch"

    def attack(self) -> bytes:
        os._exit(3)


class Segfault(_Hostile):
    name = "segfault"

    def attack(self) -> bytes:
        return bytes([ctypes.c_int.from_address(8).value])  # a read of unmapped memory


class Ptrace(_Hostile):
    name = "ptrace"

    def attack(self) -> bytes:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.ptrace(0, 0, None, None)  # PTRACE_TRACEME: the filter kills the process
        return b"traced"


class KillAll(_Hostile):
    name = "kill-all"

    def attack(self) -> bytes:
        os.kill(-1, signal.SIGKILL)  # every process this one may signal: the server too
        return b"killed"


class NetInAvailable(_Hostile):
    """available() runs in the plugin's host, which is sandboxed the same way."""

    name = "net-in-available"

    def available(self) -> str | None:
        try:
            socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
        except OSError as e:
            return f"no network here: {e}"
        return None


class ReadEnv(_Hostile):
    name = "read-env"

    def attack(self) -> bytes:
        value = os.environ.get("KERACHECK_KEY")
        if value is None:
            raise LookupError("KERACHECK_KEY is not in this environment")
        return value.encode()


class ForgeAnswer(_Hostile):
    """Looks for the server's socket to keracheck among its descriptors, to answer for it."""

    name = "forge-answer"

    def attack(self) -> bytes:
        import stat

        for fd in range(3, 1024):
            try:
                if stat.S_ISSOCK(os.fstat(fd).st_mode):
                    os.write(fd, b"\x00\x00\x00\x10forged answer!!!")
                    return b"forged"
            except OSError:
                continue
        raise LookupError("no socket to keracheck in this process")
