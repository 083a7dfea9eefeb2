"""The syscall policy of sandboxed workers, as a classic-BPF seccomp program built here.

No binding library is needed: a seccomp filter is an array of ``struct sock_filter``
(``u16 code, u8 jt, u8 jf, u32 k``, 8 bytes, little-endian here) that the kernel runs on each
system call over ``struct seccomp_data``::

    offset  0  int   nr        the system call number
    offset  4  u32   arch      AUDIT_ARCH_* of the calling convention
    offset  8  u64   instruction_pointer
    offset 16  u64   args[6]   (the low 32 bits of args[i] at 16 + 8 i)

:func:`program` compiles a :class:`Policy` (a table from syscall name to action, plus argument
rules) into those bytes; bubblewrap loads them (``bwrap --seccomp FD``) after it set
``PR_SET_NO_NEW_PRIVS``, so the worker's interpreter runs under the filter from its first
instruction and every process it starts inherits it.  :func:`install` loads a further filter
into the calling process with ``prctl(PR_SET_SECCOMP)`` (filters stack: the strictest action
wins); the batch server uses it to forbid a batch's processes to signal the server.

Actions (``SECCOMP_RET_*``), chosen so that what happened can be named in the report:

* ``kill`` (KILL_PROCESS) for calls no worker makes and that only an escape attempt would
  (ptrace, mount, kexec, module loading, bpf ...): the process dies of SIGSYS, which the server
  reports as ``seccomp: killed by the syscall filter``.
* ``eperm`` (ERRNO EPERM) for calls a library may probe and must survive being refused
  (keyctl, perf_event_open, userfaultfd, io_uring ...).
* ``socket`` with a family other than AF_UNIX returns EACCES: the worker sees a
  ``PermissionError`` from ``socket()``, reported as ``sandbox: network access denied``.
* a foreign calling convention (i386 ``int 0x80`` on x86-64, x32) is killed: its numbers
  differ, so it could reach any call of this table under another number.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

# --------------------------------------------------------------------------- kernel constants

RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000

# classic BPF opcodes used here
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K

_OFF_NR, _OFF_ARCH, _OFF_ARGS = 0, 4, 16

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2

AF_UNIX = 1

#: machine -> (AUDIT_ARCH_*, numbers at or above this belong to another ABI, or None)
ARCHES: dict[str, tuple[int, int | None]] = {
    "x86_64": (0xC000003E, 0x40000000),  # x32 calls carry bit 30 (__X32_SYSCALL_BIT)
    "aarch64": (0xC00000B7, None),
}

#: system call numbers (asm/unistd_64.h on x86-64, asm-generic/unistd.h on AArch64); a name
#: missing from an architecture's table has no such call there and needs no rule
SYSCALLS: dict[str, dict[str, int]] = {
    "x86_64": {
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "mount": 165,
        "umount2": 166, "pivot_root": 155, "chroot": 161, "move_mount": 429, "open_tree": 428,
        "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
        "kexec_load": 246, "kexec_file_load": 320, "reboot": 169, "init_module": 175,
        "finit_module": 313, "delete_module": 176, "swapon": 167, "swapoff": 168, "acct": 163,
        "setns": 308, "unshare": 272, "open_by_handle_at": 304, "iopl": 172, "ioperm": 173,
        "bpf": 321, "keyctl": 250, "add_key": 248, "request_key": 249, "perf_event_open": 298,
        "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "name_to_handle_at": 303, "kcmp": 312, "lookup_dcookie": 212,
        "quotactl": 179, "quotactl_fd": 443, "syslog": 103, "vhangup": 153,
        "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159,
        "modify_ldt": 154, "uselib": 134, "fanotify_init": 300, "pidfd_getfd": 438,
        "socket": 41, "kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129,
        "rt_tgsigqueueinfo": 297, "pidfd_open": 434,
    },
    "aarch64": {
        "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "mount": 40,
        "umount2": 39, "pivot_root": 41, "chroot": 51, "move_mount": 429, "open_tree": 428,
        "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
        "kexec_load": 104, "kexec_file_load": 294, "reboot": 142, "init_module": 105,
        "finit_module": 273, "delete_module": 106, "swapon": 224, "swapoff": 225, "acct": 89,
        "setns": 268, "unshare": 97, "open_by_handle_at": 265, "bpf": 280, "keyctl": 219,
        "add_key": 217, "request_key": 218, "perf_event_open": 241, "userfaultfd": 282,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "name_to_handle_at": 264, "kcmp": 272, "lookup_dcookie": 18, "quotactl": 60,
        "quotactl_fd": 443, "syslog": 116, "vhangup": 58, "settimeofday": 170,
        "clock_settime": 112, "clock_adjtime": 266, "adjtimex": 171, "fanotify_init": 262,
        "pidfd_getfd": 438, "socket": 198, "kill": 129, "tkill": 130, "tgkill": 131,
        "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240, "pidfd_open": 434,
    },
}  # fmt: skip

#: action names of a Policy -> SECCOMP_RET_* value
ACTIONS = {
    "kill": RET_KILL_PROCESS,
    "eperm": RET_ERRNO | errno.EPERM,
    "eacces": RET_ERRNO | errno.EACCES,
    "allow": RET_ALLOW,
}


@dataclass(frozen=True)
class ArgRule:
    """``name`` with 32-bit argument ``arg`` equal to one of ``values`` gets ``action``
    (``allow_others`` False), or: anything but ``values`` gets ``action`` (True)."""

    name: str
    arg: int
    values: tuple[int, ...]
    action: str
    allow_others: bool = False


@dataclass(frozen=True)
class Policy:
    """Syscall name -> action, plus argument rules; everything else is allowed."""

    calls: Mapping[str, str]
    args: Sequence[ArgRule] = field(default_factory=tuple)


#: escape, tracing and system administration: only an attack makes these (killed)
KILLED = (
    "ptrace", "process_vm_readv", "process_vm_writev", "mount", "umount2", "pivot_root",
    "chroot", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
    "mount_setattr", "kexec_load", "kexec_file_load", "reboot", "init_module", "finit_module",
    "delete_module", "swapon", "swapoff", "acct", "setns", "unshare", "open_by_handle_at",
    "iopl", "ioperm", "bpf",
)  # fmt: skip

#: kernel facilities a library may probe and must survive being refused (EPERM)
REFUSED = (
    "keyctl", "add_key", "request_key", "perf_event_open", "userfaultfd", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "name_to_handle_at", "kcmp", "lookup_dcookie",
    "quotactl", "quotactl_fd", "syslog", "vhangup", "settimeofday", "clock_settime",
    "clock_adjtime", "adjtimex", "modify_ldt", "uselib", "fanotify_init", "pidfd_getfd",
)  # fmt: skip

#: what every sandboxed worker runs under (docs/security.md, "Syscall policy"); no network:
#: only local (AF_UNIX) sockets, which the network namespace confines as well
WORKER = Policy(
    calls={**dict.fromkeys(KILLED, "kill"), **dict.fromkeys(REFUSED, "eperm")},
    args=(ArgRule("socket", 0, (AF_UNIX,), "eacces", allow_others=True),),
)


def guard_server(server_pid: int) -> Policy:
    """A batch's extra filter: it may not signal the server that runs it, nor the sandbox's
    init (pid 1), nor every process at once (pid -1), so a hostile batch cannot take the
    results of the others with it."""
    targets = (1, server_pid, (-1) & 0xFFFFFFFF, (-server_pid) & 0xFFFFFFFF)
    pids = (1, server_pid)
    return Policy(
        calls={},
        args=(
            ArgRule("kill", 0, targets, "eperm"),
            ArgRule("rt_sigqueueinfo", 0, pids, "eperm"),
            ArgRule("tgkill", 0, pids, "eperm"),
            ArgRule("tkill", 0, pids, "eperm"),
            ArgRule("rt_tgsigqueueinfo", 0, pids, "eperm"),
            ArgRule("pidfd_open", 0, pids, "eperm"),
        ),
    )


class Unsupported(Exception):
    """No syscall table for this machine's architecture."""


def machine() -> str:
    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)


# --------------------------------------------------------------------------- compiling


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> tuple[int, int, int, int]:
    return (code, jt, jf, k & 0xFFFFFFFF)


def _arg_block(nr: int, rule: ArgRule) -> list[tuple[int, int, int, int]]:
    """``if nr == N: load arg; if arg in values -> hit else miss``, falling through when the
    call is another one.  Jumps are short and forward only."""
    hit, miss = ACTIONS[rule.action], RET_ALLOW
    if rule.allow_others:
        hit, miss = RET_ALLOW, ACTIONS[rule.action]
    n = len(rule.values)
    body = [_ins(_LD_W_ABS, _OFF_ARGS + 8 * rule.arg)]
    for i, v in enumerate(rule.values):
        body.append(_ins(_JEQ_K, v, jt=n - i))  # to the 'hit' return below
    body += [_ins(_RET_K, miss), _ins(_RET_K, hit)]
    # after the arguments are loaded, nr is gone: the block must end in returns (it does)
    return [_ins(_JEQ_K, nr, jt=0, jf=len(body)), *body]


def program(policy: Policy, arch: str | None = None) -> bytes:
    """The filter as ``struct sock_filter`` bytes for ``arch`` (default: this machine)."""
    arch = arch or machine()
    if arch not in ARCHES:
        raise Unsupported(f"no seccomp syscall table for {arch} (known: {', '.join(ARCHES)})")
    audit, foreign = ARCHES[arch]
    table = SYSCALLS[arch]
    out = [
        _ins(_LD_W_ABS, _OFF_ARCH),
        _ins(_JEQ_K, audit, jt=1),
        _ins(_RET_K, RET_KILL_PROCESS),
        _ins(_LD_W_ABS, _OFF_NR),
    ]
    if foreign is not None:
        out += [_ins(_JGE_K, foreign, jf=1), _ins(_RET_K, RET_KILL_PROCESS)]
    for name, action in sorted(policy.calls.items()):
        if name in table:
            out += [_ins(_JEQ_K, table[name], jf=1), _ins(_RET_K, ACTIONS[action])]
    for rule in policy.args:
        if rule.name in table:
            out += _arg_block(table[rule.name], rule)
    out.append(_ins(_RET_K, RET_ALLOW))
    return b"".join(struct.pack("<HBBI", *ins) for ins in out)


def evaluate(prog: bytes, nr: int, arch: int, args: Sequence[int] = ()) -> int:
    """Run ``prog`` on one system call, as the kernel would (the instructions :func:`program`
    emits only): the SECCOMP_RET_* value.  For tests and ``docs/security.md``'s table."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *(list(args) + [0] * 6)[:6])
    ins = [struct.unpack_from("<HBBI", prog, i) for i in range(0, len(prog), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = ins[pc]
        if code == _LD_W_ABS:
            acc = struct.unpack_from("<I", data, k)[0]
        elif code in (_JEQ_K, _JGE_K):
            taken = acc == k if code == _JEQ_K else acc >= k
            pc += jt if taken else jf
        elif code == _RET_K:
            return int(k)
        else:
            raise ValueError(f"unexpected BPF opcode {code:#x} at {pc}")
        pc += 1


# --------------------------------------------------------------------------- installing


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(policy: Policy) -> None:
    """Load ``policy`` into this process (and everything it starts from now on); raises
    OSError when the kernel refuses."""
    code = program(policy)
    buf = ctypes.create_string_buffer(code, len(code))
    prog = _Fprog(len(code) // 8, ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [
        ctypes.c_int,
        ctypes.c_ulong,
        ctypes.c_void_p,
        ctypes.c_ulong,
        ctypes.c_ulong,
    ]
    for option, arg, ptr in (
        (PR_SET_NO_NEW_PRIVS, 1, None),
        (PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog)),
    ):
        if libc.prctl(option, arg, ptr, 0, 0) != 0:  # unused arguments must be 0
            err = ctypes.get_errno()
            raise OSError(err, f"prctl({option}): {errno.errorcode.get(err, err)}")
