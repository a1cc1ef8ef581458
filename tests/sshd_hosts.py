"""Real OpenSSH ``sshd`` mock hosts on loopback, for integration tests and the fan-out benchmark.

Each host is one ``sshd -D`` on ``127.0.0.1:<free port>`` with its own ed25519 host key, its
own folder (``bin/`` with fake tools, an empty ``home/``, ``sshd_config``, the log) and the
environment ``PATH=<host>/bin:/usr/bin:/bin HOME=<host>/home`` set by sshd itself. The fake
tools replay a mock profile (``clusterctl/mock/replay.py``), so a host answers
``nvidia-smi topo -m`` with the recorded output just like ``MockTransport`` does, but over
real SSH. See /work/shared/notes/mock-sshd.md for why each setting is there.

Every process started here is stopped by its PID (checked against /proc first), together
with the per-connection children it forked, never by name.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
SSHD = Path("/usr/sbin/sshd")
PRIVSEP_DIR = Path("/run/sshd")
BANNER_WAIT_S = 10.0


def sshd_missing_reason() -> str | None:
    """Why sshd mock hosts cannot run here, or None when they can."""
    if not SSHD.exists():
        return f"{SSHD} is missing (install openssh-server to run the sshd integration tests)"
    if not PRIVSEP_DIR.is_dir():
        if os.geteuid() != 0:
            return f"sshd needs its privilege separation folder {PRIVSEP_DIR}, which is missing"
        PRIVSEP_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
    return None


#: Folders an isolated host gets privately, bind-mounted from its tree (``<state>/hosts/<name>/fs``).
PRIVATE_DIRS = ("etc", "var/lib", "opt", "run")
CONTAINERD = Path("/usr/bin/containerd")


def isolation_missing_reason() -> str | None:
    """Why isolated hosts (own mount and UTS namespaces) cannot run here, or None when they can."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return "unshare (util-linux) is missing"
    probe = subprocess.run([unshare, "--mount", "--uts", "--propagation", "private", "true"],
                           capture_output=True, text=True, timeout=10)
    if probe.returncode != 0:
        return f"unshare --mount --uts is not permitted here: {probe.stderr.strip() or probe.returncode}"
    return None


def containerd_missing_reason() -> str | None:
    if not CONTAINERD.exists():
        return f"{CONTAINERD} is missing (install Debian's containerd to run the real-daemon tests)"
    return isolation_missing_reason()


def generate_ed25519(private_path: Path, comment: str) -> str:
    """Write an OpenSSH ed25519 private key (mode 600); return the public key line."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    )
    private_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(private)
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    line = f"{public.decode()} {comment}"
    private_path.with_name(private_path.name + ".pub").write_text(line + "\n")
    return line


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_banner(address: str, port: int, timeout_s: float = BANNER_WAIT_S) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((address, port), timeout=1.0) as s:
                if s.recv(64).startswith(b"SSH-"):
                    return True
        except OSError:
            time.sleep(0.05)
    return False


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _children_by_parent() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def descendants(pid: int) -> list[int]:
    tree = _children_by_parent()
    found: list[int] = []
    todo = list(tree.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo.extend(tree.get(child, []))
    return found


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


# -- profiles -> fake tools ---------------------------------------------------------------

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.+-]+$")
#: Words the shell answers itself: a wrapper in bin/ would never be called for them.
SHELL_BUILTINS = frozenset(
    {
        "echo", "printf", "test", "[", "cd", "export", "set", "unset", "true", "false", "exit", "type",
        "command", "read", "eval", "exec", "if", "then", "for", "while", "case", "kill", "pwd", "ulimit",
        "umask", "wait", "trap", ":", ".", "source",
    }
)


def profile_tools(profile_dir: Path) -> list[str]:
    """Tool names (first word) of every command rule of a profile, inherited ones included."""
    from clusterctl.mock.profile import load_profile

    tools: list[str] = []
    for rule in load_profile(str(profile_dir)).rules:
        if rule.match is not None:
            word = rule.match.split()[0] if rule.match.split() else ""
        elif rule.regex is not None:
            literal = re.match(r"\^?([A-Za-z0-9_.+-]+)", rule.regex.pattern)
            word = literal.group(1) if literal else ""
        else:
            word = ""
        if word and _TOOL_NAME.match(word) and word not in SHELL_BUILTINS and word not in tools:
            tools.append(word)
    return tools


_SAFE_LITERAL = re.compile(r"[A-Za-z0-9_./=:,+@% -]+")


#: More alternatives than this and a rule is not analysed (its calls all go to the replay).
_MAX_ALTERNATIVES = 16


def _literal_alternatives(items: Any) -> list[tuple[str, bool]] | None:
    """Every literal text a match of this regex sequence (``re._parser`` items) begins with, each
    with whether it could still grow; None past ``_MAX_ALTERNATIVES``. Sound, not exact: any match
    begins with one of the texts."""
    from re import _constants as c

    alts: list[tuple[str, bool]] = [("", True)]

    def extend(options: list[tuple[str, bool]]) -> list[tuple[str, bool]] | None:
        out = [a for a in alts if not a[1]]
        out += [(text + more, grows) for text, is_open in alts if is_open for more, grows in options]
        return out if len(out) <= _MAX_ALTERNATIVES else None

    for op, arg in items:
        result: list[tuple[str, bool]] | None
        if op is c.LITERAL:
            result = [(text + chr(arg), True) if is_open else (text, False) for text, is_open in alts]
        elif op is c.AT:
            result = alts  # zero-width: only narrows where a match may be
        elif op is c.SUBPATTERN:
            inner = _literal_alternatives(arg[3])
            result = None if inner is None else extend(inner)
        elif op is c.BRANCH:
            options: list[tuple[str, bool]] = []
            for branch in arg[1]:
                inner = _literal_alternatives(branch)
                if inner is None:
                    return None
                options += inner
            result = extend(options)
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT):
            low, _high, body = arg
            inner = _literal_alternatives(body)
            if inner is None:
                return None
            once = [(text, False) for text, _ in inner]
            # Skipping the repeat (none at all) keeps an alternative open: what follows still counts.
            result = extend([("", True), *once] if low == 0 else once)
        else:
            result = [(text, False) for text, _ in alts]
        if result is None:
            return None
        alts = result
    return alts


def _regex_patterns(pattern: str) -> list[str] | None:
    """Shell patterns that together match every line ``re.search(pattern, line)`` matches."""
    from re import _constants as c
    from re import _parser

    items = list(_parser.parse(pattern))
    anchored = bool(items) and items[0] == (c.AT, c.AT_BEGINNING)
    if not anchored:
        # A search matches anywhere: what comes after a leading zero-width or one-character
        # piece (``(^|\\s)``) must still be in the line.
        while items and (items[0][0] in (c.AT, c.IN, c.ANY, c.CATEGORY) or (
                items[0][0] is c.SUBPATTERN and all(
                    op in (c.AT, c.IN, c.BRANCH) for op, _ in items[0][1][3]))):
            items.pop(0)
    alts = _literal_alternatives(items)
    if alts is None:
        return None
    lead = "" if anchored else "*"
    out = []
    for text, _ in alts:
        # Only the beginning that needs no quoting in sh (a shorter beginning is still certain).
        safe = _SAFE_LITERAL.match(text)
        if safe is None:
            return None  # nothing certain about the line
        out.append(f'{lead}"{safe.group(0)}"*')
    return out


def rule_pattern(rule: Any) -> str | None:
    """A shell ``case`` pattern for the command line (``"TOOL $*"``) of every call that ``rule``
    could answer, or None when none can be given (every call then goes to the replay).

    The pattern may match more calls than the rule does (those reach the replay, which
    decides), never fewer: a ``match`` rule gives its words with ``*`` between them; a regex
    the literal texts its matches begin with (``_literal_alternatives``). Literal text is kept
    to characters that need no quoting, so the bare line the wrapper sees and the quoted one
    the rules are also tried on agree.
    """
    if rule.match is not None:
        words = rule.match.split()
        if not words or not all(_SAFE_LITERAL.fullmatch(w) for w in words):
            return None
        return "*".join(f'"{w}"' for w in words) + "*"
    if rule.regex is None:
        return None
    patterns = _regex_patterns(rule.regex.pattern)
    return None if patterns is None else "|".join(patterns)


def replay_filter(tool: str, profile: Any, real: str | None) -> str:
    """Shell lines that answer, without starting Python, the calls of a tool that nothing simulated
    can answer: the machine's own program runs (or "not found", as the replay would say).

    A wrapper exists for every program a profile rule names (``cat`` because of one rule for
    ``cat /tmp/clusterctl-bench-*.log``); without this filter every ``cat`` of a host, its
    ``cat /etc/os-release`` included, cost a Python start and a profile load, which a real host
    does not pay. The stateful simulated tools (``apt-get``, ``systemctl``...) always reach the
    replay, and so does any call some rule could match (``rule_pattern``).
    """
    from clusterctl.mock.tools import FILE_TOOLS, tool_module

    if tool_module(tool) is not None and tool not in FILE_TOOLS and profile.simulate:
        return ""
    patterns: list[str] = []
    for rule in profile.rules:
        pattern = rule_pattern(rule)
        if pattern is None:
            return ""  # a rule whose calls cannot be told apart in sh: every call goes to the replay
        for one in pattern.split("|"):
            literal = one.split('"')[1]
            # A pattern anchored at the line's start that cannot begin with this tool is left out.
            if one.startswith("*") or literal.startswith(tool + " ") or (tool + " ").startswith(literal) \
                    or literal == tool:
                patterns.append(one)
    otherwise = (f"exec {shlex.quote(real)} \"$@\"" if real
                 else f"echo {shlex.quote(f'sh: 1: {tool}: not found')} >&2; exit 127")
    return f"case \"{tool} $*\" in {'|'.join(patterns) or 'clusterctl-none'}) ;; *) {otherwise} ;; esac\n"


def _write_script(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


# -- hosts --------------------------------------------------------------------------------


@dataclass
class SSHDHost:
    """One running sshd mock host."""

    name: str
    address: str
    port: int
    folder: Path
    client_pubkey_file: Path
    profile: Path | None = None
    extra_config: tuple[str, ...] = ()
    #: Own mount and UTS namespaces: private /etc, /var/lib, /opt, /run and hostname.
    isolated: bool = False
    #: A real containerd behind the simulated ``systemctl`` (isolated hosts only).
    containerd: bool = False
    host_pubkey: str = ""
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    #: A host certificate (``ssh-keygen -s CA -h``) sshd presents besides its plain key.
    host_certificate: Path | None = None

    # -- paths ---------------------------------------------------------------------------

    @property
    def bin_dir(self) -> Path:
        return self.folder / "bin"

    @property
    def home(self) -> Path:
        return self.folder / "home"

    @property
    def config_file(self) -> Path:
        return self.folder / "sshd_config"

    @property
    def host_key_file(self) -> Path:
        return self.folder / "ssh_host_ed25519_key"

    @property
    def state_root(self) -> Path:
        """The mock cluster state folder this host shares with the other hosts of its farm."""
        return self.folder.parent / "mock-state"

    @property
    def state(self) -> Any:
        """This host's ``clusterctl.mock.state.HostState`` (its tree and its JSON document)."""
        from clusterctl.mock.state import MockCluster

        return MockCluster(self.state_root).host(self.name)

    @property
    def sudo_log(self) -> Path:
        """Every ``sudo`` invocation on the host, one line of arguments each."""
        return self.folder / "sudo.log"

    @property
    def log_file(self) -> Path:
        return self.folder / "sshd.log"

    @property
    def pid(self) -> int:
        if self.process is None:
            raise RuntimeError(f"{self.name} is not running")
        return self.process.pid

    @property
    def known_hosts_name(self) -> str:
        return self.address if self.port == 22 else f"[{self.address}]:{self.port}"

    def known_hosts_line(self) -> str:
        key_type, key_b64 = self.host_pubkey.split()[:2]
        return f"{self.known_hosts_name} {key_type} {key_b64}"

    # -- set-up --------------------------------------------------------------------------

    def prepare(self) -> None:
        self.bin_dir.mkdir(parents=True, exist_ok=True)
        self.home.mkdir(parents=True, exist_ok=True)
        if not self.host_key_file.exists():
            self.host_pubkey = generate_ed25519(self.host_key_file, f"host-key-of-{self.name}")
        if self.isolated:
            self._prepare_tree()
        else:
            # The fan-out benchmark and tests read a per-host answer without any profile.
            _write_script(self.bin_dir / "hostname", f"#!/bin/sh\necho {shlex.quote(self.name)}\n")
        # No real privilege change on a mock host: record how sudo was called, then run it.
        _write_script(
            self.bin_dir / "sudo",
            "#!/bin/sh\n"
            f"printf '%s\\n' \"$*\" >> {shlex.quote(str(self.sudo_log))}\n"
            'if [ "$1" = "-n" ]; then shift; fi\n'
            'exec "$@"\n',
        )
        if self.profile is not None:
            self._install_profile_tools(self.profile)
        if self.containerd:
            # The real ctr talks to the real daemon.
            (self.bin_dir / "ctr").unlink(missing_ok=True)
        self._write_config()

    @property
    def tree(self) -> Path:
        """The host's filesystem tree; /etc, /var/lib, /opt and /run of an isolated host live here."""
        return self.state_root / "hosts" / self.name / "fs"

    def _prepare_tree(self) -> None:
        """Seed the private folders: a copy of this machine's /etc (sshd and libc need it), the
        profile's files and simulated state on top, /run/sshd for sshd's privilege separation."""
        if not (self.tree / "etc").exists():
            self.tree.mkdir(parents=True, exist_ok=True)
            subprocess.run(["cp", "-a", "/etc", str(self.tree / "etc")], check=False, capture_output=True)
        for folder in PRIVATE_DIRS:
            (self.tree / folder).mkdir(parents=True, exist_ok=True)
        (self.tree / "run" / "sshd").mkdir(parents=True, exist_ok=True)
        (self.tree / "etc" / "hostname").write_text(self.name + "\n")
        if self.profile is not None:
            from clusterctl.mock.machine import MockMachine
            from clusterctl.mock.profile import load_profile

            MockMachine.open(load_profile(str(self.profile)), self.state_root, self.name, shell_builtins=False)
        if self.containerd:
            from clusterctl.mock.state import MockCluster

            version = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "containerd"], capture_output=True,
                                     text=True, check=False).stdout.strip() or "1.6.20~ds1-1+deb12u3"
            with MockCluster(self.state_root).host(self.name).edit() as data:
                data.setdefault("packages", {})["containerd"] = {"version": version}
                data.setdefault("services", {})["containerd"] = {"active": "inactive", "enabled": "enabled"}
                data.setdefault("daemons", {})["containerd"] = {
                    "argv": [str(CONTAINERD), "--config", "/etc/containerd/config.toml"],
                    "ready": "/run/containerd/containerd.sock",
                }

    def daemon_pids(self) -> list[int]:
        """PIDs of the real daemons this host's simulated systemctl started (still recorded)."""
        if not self.isolated:
            return []
        data = self.state.read() if self.state.seeded else {}
        return [int(s["pid"]) for s in (data.get("daemons") or {}).values() if isinstance(s, dict) and s.get("pid")]

    def _install_profile_tools(self, profile: Path) -> None:
        from clusterctl.mock.profile import load_profile
        from clusterctl.mock.tools import FILE_TOOLS, TOOLS

        python = shlex.quote(sys.executable)
        tools = profile_tools(profile)
        tools += [t for t in sorted(TOOLS) if t not in FILE_TOOLS and t not in tools]  # the machine tools
        loaded = load_profile(str(profile))
        for tool in tools:
            real = shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin")
            fallback = f"--fallback {shlex.quote(real)} " if real else ""
            replay = (f"PYTHONPATH={shlex.quote(str(REPO_ROOT))} exec {python} -m clusterctl.mock.replay "
                      f"--profile {shlex.quote(str(profile))} --state-dir {shlex.quote(str(self.state_root))} "
                      f"--host {shlex.quote(self.name)} {fallback}-- {shlex.quote(tool)} \"$@\"\n")
            _write_script(self.bin_dir / tool, "#!/bin/sh\n" + replay_filter(tool, loaded, real) + replay)

    def _write_config(self) -> None:
        # sshd keeps the first value it reads for most keywords: the test's own lines go first.
        lines = [
            *self.extra_config,
            f"Port {self.port}",
            f"ListenAddress {self.address}",
            f"HostKey {self.host_key_file}",
            f"PidFile {self.folder / 'sshd.pid'}",
            f"AuthorizedKeysFile {self.client_pubkey_file}",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "StrictModes no",
            "PermitRootLogin yes",
            "UseDNS no",
            "PrintMotd no",
            "PrintLastLog no",
            "X11Forwarding no",
            "AllowTcpForwarding yes",
            "MaxStartups 1000",
            "MaxSessions 100",
            "LogLevel ERROR",
            "Subsystem sftp internal-sftp",
            f"SetEnv PATH={self.bin_dir}:/usr/bin:/bin HOME={self.home}",
        ]
        if self.host_certificate is not None:
            lines.append(f"HostCertificate {self.host_certificate}")
        self.config_file.write_text("\n".join(lines) + "\n")

    # -- life cycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Start sshd and wait for its banner; moves to another free port if this one is taken."""
        for _attempt in range(5):
            self._write_config()
            log = open(self.log_file, "ab")  # noqa: SIM115 - handed to the daemon for its lifetime
            try:
                self.process = subprocess.Popen(
                    self._sshd_argv(),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            finally:
                log.close()
            if wait_for_banner(self.address, self.port):
                return
            self.stop()
            self.port = free_port()
        raise RuntimeError(f"sshd for {self.name} did not start; see {self.log_file}:\n{self.log_tail()}")

    def _sshd_argv(self) -> list[str]:
        sshd = [str(SSHD), "-D", "-e", "-f", str(self.config_file)]
        if not self.isolated:
            return sshd
        mounts = " && ".join(
            f"mount --bind {shlex.quote(str(self.tree / folder))} /{folder}" for folder in PRIVATE_DIRS
        )
        script = f"{mounts} && hostname {shlex.quote(self.name)} && exec {shlex.join(sshd)}"
        # unshare and sh both exec: the PID Popen returns is sshd's own.
        return ["unshare", "--mount", "--uts", "--propagation", "private", "sh", "-c", script]

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def _is_ours(self) -> bool:
        # sshd rewrites its command line to "sshd: /usr/sbin/sshd -D -e -f <cfg> [listener] ...".
        return self.process is not None and str(self.config_file) in _cmdline(self.process.pid)

    def stop(self) -> None:
        """Stop the daemon, every connection it forked and the real daemons it started (all by PID)."""
        if self.isolated and self.state.seeded:
            from clusterctl.mock.tools.daemons import stop_pid

            # Every real daemon (containerd...) the host's state lists, by PID.
            for spec in (self.state.read().get("daemons") or {}).values():
                if isinstance(spec, dict) and isinstance(spec.get("pid"), int):
                    stop_pid(spec["pid"], [str(a) for a in spec.get("argv") or []])
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None and str(self.config_file) in _cmdline(process.pid):
            children = [(p, _cmdline(p)) for p in descendants(process.pid)]
            for sig in (signal.SIGTERM, signal.SIGCONT):
                _signal(process.pid, sig)
            try:
                process.wait(timeout=3)
            except subprocess.TimeoutExpired:
                _signal(process.pid, signal.SIGKILL)
                process.wait(timeout=3)
            for pid, cmdline in children:
                # Only if it is still the same program (a PID may have been reused since).
                if cmdline and _cmdline(pid) == cmdline:
                    _signal(pid, signal.SIGKILL)
        elif process.poll() is None:
            process.kill()
            process.wait(timeout=3)

    def pause(self) -> None:
        """SIGSTOP the daemon: TCP connections are still accepted (by the kernel), nothing answers."""
        if self._is_ours():
            os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self._is_ours():
            os.kill(self.pid, signal.SIGCONT)

    def change_host_key(self) -> str:
        """Restart on the same port with a new host key (a reinstalled host, or an impostor)."""
        self.stop()
        self.host_key_file.unlink()
        self.host_pubkey = generate_ed25519(self.host_key_file, f"new-host-key-of-{self.name}")
        self.start()
        return self.host_pubkey

    def require_sudo_password(self, password: str) -> None:
        """Make this host's fake sudo behave like sudo without NOPASSWD.

        ``-n`` fails with sudo's own words until a password was accepted; ``-S`` reads one
        line from stdin and checks it (against a hash: the password itself is never written on
        the host); ``-v`` only validates; ``-k`` forgets. Accepted credentials are cached in
        ``sudo.ts`` like sudo's timestamp. Every call's arguments go to ``sudo.log`` as before.
        """
        import hashlib

        digest = hashlib.sha256(password.encode()).hexdigest()
        stamp = shlex.quote(str(self.folder / "sudo.ts"))
        _write_script(
            self.bin_dir / "sudo",
            "#!/bin/sh\n"
            f"printf '%s\\n' \"$*\" >> {shlex.quote(str(self.sudo_log))}\n"
            "nonint=0; fromstdin=0; validate=0\n"
            "while [ $# -gt 0 ]; do case \"$1\" in\n"
            "  -n) nonint=1;; -S) fromstdin=1;; -v) validate=1;; -k) rm -f " + stamp + ";;\n"
            "  -p) shift;; --) shift; break;; -*) ;; *) break;; esac; shift; done\n"
            f"if [ ! -e {stamp} ]; then\n"
            "  if [ $nonint = 1 ]; then echo 'sudo: a password is required' >&2; exit 1; fi\n"
            "  if [ $fromstdin = 0 ]; then echo 'sudo: a terminal is required to read the password' >&2; exit 1; fi\n"
            "  IFS= read -r pw || pw=\n"
            "  got=$(printf '%s' \"$pw\" | sha256sum | cut -d' ' -f1)\n"
            f"  if [ \"$got\" != {digest} ]; then echo 'sudo: 1 incorrect password attempt' >&2; exit 1; fi\n"
            f"  : > {stamp}\n"
            "fi\n"
            "if [ $validate = 1 ]; then exit 0; fi\n"
            'exec "$@"\n',
        )

    def certify_host_key(self, ca_key: Path, principals: Sequence[str], key_id: str = "") -> Path:
        """Sign this host's key with ``ca_key`` (``ssh-keygen -s -h``) and restart sshd presenting it."""
        pub = self.host_key_file.with_name(self.host_key_file.name + ".pub")
        subprocess.run(
            ["ssh-keygen", "-q", "-s", str(ca_key), "-I", key_id or f"{self.name}-host", "-h",
             "-n", ",".join(principals), "-V", "-5m:+1d", str(pub)],
            check=True, capture_output=True,
        )
        self.host_certificate = self.host_key_file.with_name(self.host_key_file.name + "-cert.pub")
        self.stop()
        self.start()
        return self.host_certificate

    def sshd_children(self) -> list[int]:
        return descendants(self.pid) if self.process is not None else []


class SSHDHosts:
    """Starts sshd mock hosts on demand and stops all of them at the end.

    ``farm(3)`` starts three hosts ``h1..h3``; ``farm(2, profile=DIR, names=[...])`` gives
    them a mock profile and names.
    """

    def __init__(self, root: Path) -> None:
        reason = sshd_missing_reason()
        if reason:
            raise RuntimeError(reason)
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.client_key = root / "client_ed25519"
        self.client_pubkey = generate_ed25519(self.client_key, "clusterctl-tests")
        self.user = getpass.getuser()
        self.hosts: list[SSHDHost] = []
        self.agents: list[subprocess.Popen[bytes]] = []

    def __call__(
        self,
        count: int,
        *,
        profile: Path | str | None = None,
        names: Sequence[str] | None = None,
        extra_config: Sequence[str] = (),
        isolated: bool = False,
        containerd: bool = False,
    ) -> list[SSHDHost]:
        """Start ``count`` hosts. ``isolated``: own namespaces and private trees (callers skip
        with ``isolation_missing_reason()``); ``containerd``: a real containerd too."""
        if names is not None and len(names) != count:
            raise ValueError("names must have one entry per host")
        started: list[SSHDHost] = []
        for i in range(count):
            number = len(self.hosts) + 1
            name = names[i] if names is not None else f"h{number}"
            host = SSHDHost(
                name=name,
                address="127.0.0.1",
                port=free_port(),
                folder=self.root / f"host{number}",
                client_pubkey_file=self.client_key.with_name(self.client_key.name + ".pub"),
                profile=Path(profile).resolve() if profile is not None else None,
                extra_config=tuple(extra_config),
                isolated=isolated or containerd,
                containerd=containerd,
            )
            host.prepare()
            self.hosts.append(host)
            host.start()
            started.append(host)
        return started

    # -- files for the client -----------------------------------------------------------

    def write_known_hosts(self, path: Path, hosts: Iterable[SSHDHost] = ()) -> Path:
        """A known_hosts file holding the keys of ``hosts`` (none: an empty file)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(h.known_hosts_line() + "\n" for h in hosts))
        return path

    def transport(self, known_hosts: Path, config_dir: Path) -> Any:
        """clusterctl's own SSH transport to the last host started, as the inventory would build it
        (this farm's user and client key, the given known_hosts, an empty ssh_config)."""
        from clusterctl.inventory.model import Host, SSHOptions
        from clusterctl.transport.ssh import SSHTransport

        config = config_dir / "ssh_config"
        config.write_text("")
        host = self.hosts[-1]
        return SSHTransport(Host(name=host.name, address=host.address, port=host.port, user=self.user,
                                 ssh=SSHOptions(key_file=str(self.client_key))),
                            known_hosts_path=str(known_hosts), ssh_config_path=str(config))

    def inventory_data(
        self, hosts: Sequence[SSHDHost], extra: Mapping[str, Mapping[str, Any]] | None = None
    ) -> dict[str, Any]:
        entries: dict[str, Any] = {}
        for h in hosts:
            entry: dict[str, Any] = {
                "address": h.address,
                "port": h.port,
                "user": self.user,
                "transport": "ssh",
                "ssh": {"key_file": str(self.client_key)},
            }
            for key, value in (extra or {}).get(h.name, {}).items():
                if isinstance(value, Mapping) and isinstance(entry.get(key), dict):
                    entry[key] = {**entry[key], **value}
                else:
                    entry[key] = value
            entries[h.name] = entry
        return {"cluster": "sshd-mock", "hosts": entries}

    def write_inventory(
        self,
        path: Path,
        hosts: Sequence[SSHDHost],
        extra: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> Path:
        """A clusterctl YAML inventory for ``hosts``; ``extra[name]`` adds or overrides fields."""
        import yaml

        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(self.inventory_data(hosts, extra), sort_keys=False))
        return path

    def write_client_files(
        self,
        folder: Path,
        hosts: Sequence[SSHDHost],
        extra: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> tuple[Path, Path]:
        """``folder/inv.yaml`` (``write_inventory``) and ``folder/known_hosts`` holding the keys of ``hosts``."""
        inventory = self.write_inventory(folder / "inv.yaml", hosts, extra)
        return inventory, self.write_known_hosts(folder / "known_hosts", hosts)

    # -- keys, CAs and agents for authentication and host-key tests --------------------------

    def authorize(self, pubkey_line: str) -> None:
        """Let another client key log in to every host of this farm."""
        pub = self.client_key.with_name(self.client_key.name + ".pub")
        with open(pub, "a", encoding="utf-8") as fh:
            fh.write(pubkey_line.strip() + "\n")

    def make_key(self, name: str, passphrase: str = "") -> Path:
        """An ed25519 key made by ``ssh-keygen`` (encrypted when ``passphrase`` is given)."""
        path = self.root / name
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-C", name, "-f", str(path)],
            check=True, capture_output=True,
        )
        return path

    def start_agent(self, keys: Sequence[tuple[Path, str]] = ()) -> Path:
        """A real ``ssh-agent`` on a socket of its own, holding ``keys`` ((path, passphrase) pairs).

        Stopped (by PID) with the farm. Returns the socket path, for ``SSH_AUTH_SOCK``.
        """
        sock = self.root / f"agent-{len(self.agents) + 1}.sock"
        agent = subprocess.Popen(
            ["ssh-agent", "-D", "-a", str(sock)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
        self.agents.append(agent)
        deadline = time.monotonic() + 10
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        for key, passphrase in keys:
            askpass = self.root / f"askpass-{key.name}"
            _write_script(askpass, f"#!/bin/sh\nprintf '%s\\n' {shlex.quote(passphrase)}\n")
            env = {**os.environ, "SSH_AUTH_SOCK": str(sock), "SSH_ASKPASS": str(askpass),
                   "SSH_ASKPASS_REQUIRE": "force", "DISPLAY": ":0"}
            subprocess.run(["ssh-add", "-q", str(key)], env=env, check=True, capture_output=True,
                           stdin=subprocess.DEVNULL, timeout=20)
            askpass.unlink()
        return sock

    def stop_all(self) -> None:
        for agent in getattr(self, "agents", []):
            if agent.poll() is None:
                agent.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    agent.wait(timeout=3)
        for host in self.hosts:
            try:
                host.stop()
            except Exception as exc:
                print(f"stopping {host.name} failed: {exc}", file=sys.stderr)
