"""The reaper: a supervisor that leaves no process of a sandboxed command behind.

On Linux the local sandbox runs every command under this module, started as a script
by the interpreter running pact (``python -I -S -B reaper.py ...``). The rules:

- The reaper makes itself a child subreaper (Linux ``prctl(PR_SET_CHILD_SUBREAPER)``):
  a process that leaves the command's tree by ``setsid`` or a double fork is
  re-parented to the reaper, never to init, so it stays a descendant.
- It starts the command in a process group of its own (a command that signals its
  whole group does not hit the reaper) and waits for it, up to the timeout; at the
  timeout, or when the reaper itself gets SIGTERM, SIGINT or SIGHUP, it SIGKILLs it.
- Then, until it has no child left, it SIGKILLs every descendant it finds in
  ``/proc`` and reaps the dead. No child left means no descendant left: every
  descendant's chain of parents ends at one of the reaper's children.
- It reports one line on the status pipe and exits: ``exit CODE TIMED_OUT LEFT``
  (the command's exit code as :mod:`subprocess` gives it, minus the signal for a
  kill; 1 when the timeout killed it; how many processes were still there after
  :data:`SWEEP_LIMIT_S`), or ``error ERRNO STRERROR`` when the command could not
  be started.

Standard library only, and nothing heavier than it needs: it runs for every
verification. Where ``prctl`` is refused the reaper still kills everything that
stayed in its tree; what left it is out of reach, as with a process group.
"""

from __future__ import annotations

import os
import sys
import time

# Imports cost the reaper's start-up, paid by every verification: typing only for mypy,
# and the C module under ``signal`` without the enum wrappers (a quarter of the start-up).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from collections.abc import Iterator, Mapping, Sequence
else:
    try:
        import _signal as signal
    except ImportError:  # an interpreter that has no such module
        import signal

#: ``prctl`` option of <linux/prctl.h>.
PR_SET_CHILD_SUBREAPER = 36

#: Only Linux has subreapers and ``/proc``; elsewhere the sandbox kills a process group.
SUPPORTED = sys.platform.startswith("linux")

#: How long the reaper keeps killing descendants before it reports what is left.
SWEEP_LIMIT_S = 10.0

#: Signals that end the command early, as the timeout does.
STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP})

#: Dispositions CPython sets to "ignore" at start-up; the command gets the defaults,
#: as subprocess's ``restore_signals`` gives them.
_RESTORED = (signal.SIGPIPE, signal.SIGXFSZ)

#: Variables CPython's locale coercion (PEP 538) adds to the reaper's environment when
#: the locale is C; ``-I`` ignores the opt-out, so the reaper is told which to drop.
_COERCED = ("LC_CTYPE",)

_SEPARATOR = "--"


class StartError(OSError):
    """The command could not be started; ``errno`` and ``strerror`` say why."""


def command_line(
    argv: Sequence[str], *, status_fd: int, timeout_s: float, env: Mapping[str, str]
) -> list[str]:
    """The argv that runs ``argv`` under the reaper, for an environment of ``env``."""
    unset = [arg for name in _COERCED if name not in env for arg in ("--unset", name)]
    script = os.path.abspath(__file__)
    return [
        sys.executable,
        "-I",
        "-S",
        "-B",
        script,
        str(status_fd),
        repr(float(timeout_s)),
        *unset,
        _SEPARATOR,
        *argv,
    ]


def parse_report(data: bytes) -> tuple[int, bool, int] | None:
    """The reaper's report, or None when it died before writing one.

    Returns:
        The command's exit code, whether the timeout killed it, and how many
        processes were still alive after the sweep gave up (0: the tree is gone).

    Raises:
        StartError: the reaper could not start the command.
    """
    line = data.decode("utf-8", "replace").strip()
    kind, _, rest = line.partition(" ")
    if kind == "error":
        number, _, reason = rest.partition(" ")
        raise StartError(int(number), reason)
    if kind != "exit":
        return None
    code, timed_out, left = rest.split()
    return int(code), timed_out == "1", int(left)


def processes() -> Iterator[tuple[int, int, int, bytes]]:
    """``(pid, ppid, session id, state)`` of every process ``/proc`` shows."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:  # gone since the listing
            continue
        # The command name may hold spaces and parentheses; the fields after it do not.
        fields = stat[stat.rfind(b")") + 2 :].split()
        yield int(name), int(fields[1]), int(fields[3]), fields[0]


def descendants(root: int) -> list[int]:
    """Every process whose chain of parents reaches ``root``."""
    children: dict[int, list[int]] = {}
    for pid, ppid, _sid, _state in processes():
        children.setdefault(ppid, []).append(pid)
    found: list[int] = []
    pending = [root]
    while pending:
        for child in children.get(pending.pop(), ()):
            found.append(child)
            pending.append(child)
    return found


def kill_session(sid: int, limit_s: float = SWEEP_LIMIT_S) -> int:
    """SIGKILL every process of session ``sid`` until none is alive (for a reaper that
    must go itself); return how many are still alive after ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while True:
        # A zombie is dead already; its parent (or init) reaps it.
        alive = [pid for pid, _, session, state in processes() if session == sid and state != b"Z"]
        for pid in alive:
            _kill(pid)
        if not alive or time.monotonic() > deadline:
            return len(alive)
        time.sleep(0.01)


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants; False where refused."""
    import ctypes  # only here: the parent side never pays for it

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def supervise(argv: Sequence[str], timeout_s: float) -> tuple[int, bool, int]:
    """Run ``argv`` to its end or its timeout, then remove its whole tree.

    Returns:
        The command's exit code (minus the signal that killed it), whether the timeout
        killed it, and how many processes were still alive when the sweep gave up.

    Raises:
        OSError: the command could not be started.
    """
    watched = {signal.SIGCHLD, *STOP_SIGNALS}
    # Blocked, so that they wait for sigtimedwait: no wake-up can fall between a
    # check and the wait that follows it.
    signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    command = os.posix_spawnp(
        argv[0], list(argv), os.environ, setpgroup=0, setsigmask=(), setsigdef=_RESTORED
    )
    deadline = time.monotonic() + timeout_s
    status: int | None = None
    timed_out = False
    while True:
        status, _ = _reap(command)
        if status is not None:
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        woken = signal.sigtimedwait(watched, remaining)
        if woken is not None and woken.si_signo != signal.SIGCHLD:
            break
    if status is None:
        _kill(command)
        # Unreaped, so the pid is still the command's; SIGKILL ends even a stopped one.
        _, status = os.waitpid(command, 0)
    left = sweep(SWEEP_LIMIT_S)
    code = -signal.SIGKILL if timed_out else os.waitstatus_to_exitcode(status)
    return code, timed_out, left


def sweep(limit_s: float) -> int:
    """SIGKILL and reap every descendant; return how many remain after ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while True:
        _, children_left = _reap(None)
        if not children_left:
            return 0
        found = descendants(os.getpid())
        for pid in found:
            _kill(pid)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return len(found)
        # A killed child's SIGCHLD ends the wait early; grandchildren come back to us
        # as their parents die, for the next round.
        signal.sigtimedwait({signal.SIGCHLD}, min(remaining, 0.05))


def _reap(command: int | None) -> tuple[int | None, bool]:
    """Reap every dead child: the command's wait status if it was one, and whether any
    child is left."""
    status: int | None = None
    while True:
        try:
            pid, wait_status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return status, False
        if pid == 0:
            return status, True
        if pid == command:
            status = wait_status


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # gone already, or not ours to kill (a set-uid program)


def _report(fd: int, line: str) -> None:
    # The sandbox may have given up on us already; the tree is removed all the same.
    try:
        os.write(fd, line.encode("utf-8", "replace") + b"\n")
    except OSError:
        pass


def main(args: Sequence[str]) -> int:
    """``reaper.py STATUS_FD TIMEOUT_S [--unset NAME]... -- ARGV...``"""
    status_fd, timeout_s = int(args[0]), float(args[1])
    rest = list(args[2:])
    split = rest.index(_SEPARATOR)
    options, argv = rest[:split], rest[split + 1 :]
    for name in options[1::2]:
        os.environ.pop(name, None)
    os.set_inheritable(status_fd, False)  # the command must not hold the pipe open
    become_subreaper()
    try:
        code, timed_out, left = supervise(argv, timeout_s)
    except OSError as exc:
        _report(status_fd, f"error {exc.errno or 0} {exc.strerror or exc}")
        sweep(SWEEP_LIMIT_S)
        return 127
    _report(status_fd, f"exit {code} {int(timed_out)} {left}")
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
