"""The host's file and shell utilities (GNU coreutils, grep, hostname) on the state tree.

So that ``get``/``put`` and shell lines agree in the in-process mock: ``cat``, ``test``/``[``,
``mkdir``, ``rm``, ``rmdir``, ``cp``, ``mv``, ``ls``, ``touch``, ``chmod``, ``grep``, ``head``,
``tail``, ``install``, ``uname``, ``date``, ``hostname`` and ``sleep``: what clusterctl's command
lines use. Messages and exit codes are GNU's (see recordings/README.md); options that clusterctl
never sends are refused with the tool's own "invalid option" message rather than half-done.
"""

from __future__ import annotations

import os
import re
import shutil
import stat as stat_mod
from collections.abc import Callable
from datetime import datetime, timezone
from functools import reduce
from operator import or_

from clusterctl.mock.state import StateError, refuse_change
from clusterctl.mock.tools.base import ToolContext, ToolResult, UsageError, each, gnu_options

DEFAULT_KERNEL = "6.8.0-45-generic"


def cat(ctx: ToolContext) -> ToolResult:
    _none, paths = gnu_options(ctx.args, "")

    def read(path: str) -> ToolResult:
        if path == "-":
            return ToolResult(ctx.stdin.decode(errors="replace"))
        full = ctx.path(path)
        if ctx.fs.is_dir(full):
            return ctx.fail(f"cat: {path}: Is a directory\n")
        data = ctx.fs.read(full)
        return ctx.fail(f"cat: {path}: No such file or directory\n") if data is None else \
            ToolResult(data.decode(errors="replace"))

    return each(paths or ["-"], read)


def test(ctx: ToolContext) -> ToolResult:
    args = list(ctx.args)
    if ctx.name == "[":
        if not args or args[-1] != "]":
            return ToolResult("", "sh: 1: [: missing ]\n", 2)
        args = args[:-1]
    try:
        return ToolResult("", "", 0 if _test_expr(ctx, args) else 1)
    except ValueError as exc:
        return ToolResult("", f"sh: 1: {ctx.name}: {exc}\n", 2)


def _test_expr(ctx: ToolContext, args: list[str]) -> bool:
    """One test of a file, a string or two strings, maybe negated (clusterctl's lines use no more)."""
    if not args:
        return False
    if args[0] == "!":
        return not _test_expr(ctx, args[1:])
    if len(args) == 1:
        return args[0] != ""
    if len(args) == 2:
        op, operand = args
        if op == "-n":
            return operand != ""
        if op == "-z":
            return operand == ""
        try:
            local = ctx.fs.local(ctx.path(operand))
        except StateError:
            return False
        checks: dict[str, Callable[[], bool]] = {
            "-e": local.exists, "-f": local.is_file, "-d": local.is_dir,
            "-s": lambda: local.is_file() and local.stat().st_size > 0,
            "-x": lambda: local.exists() and bool(local.stat().st_mode & 0o111),
            "-w": lambda: local.exists() and os.access(local, os.W_OK),
        }
        if op in checks:
            return checks[op]()
        raise ValueError(f"{op}: unexpected operator")
    if len(args) == 3:
        left, op, right = args
        if op in ("=", "=="):
            return left == right
        if op == "!=":
            return left != right
        raise ValueError(f"{op}: unexpected operator")
    raise ValueError("too many arguments")


def mkdir(ctx: ToolContext) -> ToolResult:
    flags, paths = gnu_options(ctx.args, "pvm:", operand="operand")

    def make(path: str) -> ToolResult:
        full = ctx.path(path)
        if ctx.fs.exists(full):
            return ToolResult() if "p" in flags and ctx.fs.is_dir(full) else \
                ctx.fail(f"mkdir: cannot create directory '{path}': File exists\n")
        if "p" not in flags and not ctx.fs.is_dir(full.rsplit("/", 1)[0] or "/"):
            return ctx.fail(f"mkdir: cannot create directory '{path}': No such file or directory\n")
        ctx.fs.mkdir(full)
        if "m" in flags:  # the operand's own mode (parents -p makes get the default)
            ctx.fs.local(full).chmod(int(flags["m"], 8))
        return ToolResult()

    return each(paths, make)


def rm(ctx: ToolContext) -> ToolResult:
    flags, paths = gnu_options(ctx.args, "rfRv")
    if not paths and "f" not in flags:
        raise UsageError("missing operand")

    def remove(path: str) -> ToolResult:
        full = ctx.path(path)
        if not ctx.fs.exists(full) and not ctx.fs.local(full).is_symlink():
            return ToolResult() if "f" in flags else \
                ctx.fail(f"rm: cannot remove '{path}': No such file or directory\n")
        if ctx.fs.is_dir(full) and not flags.keys() & {"r", "R"}:
            return ctx.fail(f"rm: cannot remove '{path}': Is a directory\n")
        ctx.fs.remove(full, recursive=True)
        return ToolResult()

    return each(paths, remove)


def rmdir(ctx: ToolContext) -> ToolResult:
    """GNU ``rmdir``: removes empty folders only (the reset phase's clean-up of the folders bootstrap made)."""
    _none, paths = gnu_options(ctx.args, "", operand="operand")

    def remove(path: str) -> ToolResult:
        full = ctx.path(path)
        if not ctx.fs.exists(full):
            reason = "No such file or directory"
        elif not ctx.fs.is_dir(full):
            reason = "Not a directory"
        elif any(ctx.fs.local(full).iterdir()):
            reason = "Directory not empty"
        else:
            ctx.fs.remove(full, recursive=True)  # empty: nothing but the folder goes
            return ToolResult()
        return ctx.fail(f"rmdir: failed to remove '{path}': {reason}\n")

    return each(paths, remove)


def cp_mv(ctx: ToolContext) -> ToolResult:
    """``cp`` and ``mv``, told apart by the name they were called by."""
    tool = ctx.name
    move = tool == "mv"
    flags, paths = gnu_options(ctx.args, "fpaRrvnT" if not move else "fvnT")
    if len(paths) < 2:
        return ToolResult("", f"{tool}: missing destination file operand after '{paths[0] if paths else ''}'\n", 1)
    *sources, dest = paths
    dest_full = ctx.path(dest)

    def copy(source: str) -> ToolResult:
        local = ctx.fs.local(ctx.path(source))
        if not local.exists():
            return ctx.fail(f"{tool}: cannot stat '{source}': No such file or directory\n")
        target = f"{dest_full.rstrip('/')}/{source.rsplit('/', 1)[-1]}" if ctx.fs.is_dir(dest_full) else dest_full
        if not ctx.fs.is_dir(target.rsplit("/", 1)[0] or "/"):
            return ctx.fail(f"mv: cannot move '{source}' to '{dest}': No such file or directory\n" if move
                            else f"cp: cannot create regular file '{dest}': No such file or directory\n")
        if local.is_dir():
            if not move and not flags.keys() & {"r", "R", "a"}:
                return ctx.fail(f"cp: -r not specified; omitting directory '{source}'\n")
            if move:
                os.replace(local, ctx.fs.local(target))
            else:
                shutil.copytree(local, ctx.fs.local(target), dirs_exist_ok=True)
            return ToolResult()
        data = local.read_bytes()
        mode = stat_mod.S_IMODE(local.stat().st_mode)
        ctx.fs.write(target, data, mode=mode if (move or flags.keys() & {"p", "a"}) else 0o644)
        if move:
            local.unlink()
        elif flags.keys() & {"p", "a"}:
            st = local.stat()
            os.utime(ctx.fs.local(target), (st.st_atime, st.st_mtime))
        return ToolResult()

    return each(sources, copy)


def ls(ctx: ToolContext) -> ToolResult:
    """``ls [-1A] PATH...``, one name a line (what clusterctl's lines ask)."""
    flags, paths = gnu_options(ctx.args, "1A")

    def listing(path: str) -> ToolResult:
        full = ctx.path(path)
        if not ctx.fs.exists(full):
            return ctx.fail(f"ls: cannot access '{path}': No such file or directory\n", 2)
        names = [n for n in ctx.fs.listdir(full) if "A" in flags or not n.startswith(".")] if ctx.fs.is_dir(full) \
            else [path]
        return ToolResult("".join(n + "\n" for n in names))

    return each(paths or [ctx.cwd], listing)


def touch(ctx: ToolContext) -> ToolResult:
    _none, paths = gnu_options(ctx.args, "", operand="file operand")

    def touch_one(path: str) -> ToolResult:
        full = ctx.path(path)
        if ctx.fs.exists(full):
            os.utime(ctx.fs.local(full))
        elif not ctx.fs.is_dir(full.rsplit("/", 1)[0] or "/"):
            return ctx.fail(f"touch: cannot touch '{path}': No such file or directory\n")
        else:
            ctx.fs.write(full, b"")
        return ToolResult()

    return each(paths, touch_one)


def _mode(spec: str, current: int) -> int:
    if re.fullmatch(r"[0-7]{1,4}", spec):
        return int(spec, 8)
    match = re.fullmatch(r"([ugoa]*)([+-=])([rwx]+)", spec)
    if not match:
        raise UsageError(f"invalid mode: '{spec}'")
    who, op, perms = match.groups()
    mask = reduce(or_, ({"u": 0o700, "g": 0o070, "o": 0o007, "a": 0o777}[w] for w in who or "a"), 0)
    bits = reduce(or_, ({"r": 0o444, "w": 0o222, "x": 0o111}[p] for p in perms), 0) & mask
    if op == "+":
        return current | bits
    if op == "-":
        return current & ~bits
    return (current & ~mask) | bits


def chmod(ctx: ToolContext) -> ToolResult:
    dash_mode = [a for a in ctx.args if re.fullmatch(r"-[rwx]+", a)][:1]  # GNU chmod reads '-w' as a mode
    flags, operands = gnu_options([a for a in ctx.args if a not in dash_mode], "R")
    if len(args := dash_mode + operands) < 2:
        raise UsageError(f"missing operand after '{args[0]}'" if args else "missing operand")
    spec, *paths = args
    _mode(spec, 0)  # a bad mode is refused before any file is looked at, as GNU chmod does

    def change(path: str) -> ToolResult:
        local = ctx.fs.local(ctx.path(path))
        if not local.exists():
            return ctx.fail(f"chmod: cannot access '{path}': No such file or directory\n")
        # -R goes down the folder but, as GNU's does, changes no link it meets there
        below = local.rglob("*") if "R" in flags else iter(())
        for each_path in [local, *(p for p in below if not p.is_symlink())]:
            each_path.chmod(_mode(spec, stat_mod.S_IMODE(each_path.stat().st_mode)))
        return ToolResult()

    return each(paths, change)


def grep(ctx: ToolContext) -> ToolResult:
    """``grep [-qEFvcH] PATTERN [FILE]...``: the options clusterctl's command lines use."""
    flags, rest = gnu_options(ctx.args, "qEFvcH")
    if not rest:
        raise UsageError("")  # no pattern: grep says its usage alone
    pattern = rest.pop(0)
    try:
        regex = re.compile(re.escape(pattern) if "F" in flags else pattern if "E" in flags else _basic_regex(pattern))
    except re.error:
        return ToolResult("", f"grep: Invalid regular expression: {pattern}\n", 2)
    sources = rest or ["-"]
    out, err, found = "", "", False
    for source in sources:
        data = ctx.stdin if source == "-" else ctx.fs.read(ctx.path(source))
        if data is None:
            err += f"grep: {source}: No such file or directory\n"
            continue
        count = 0
        for line in data.decode(errors="replace").splitlines():
            if (regex.search(line) is not None) == ("v" in flags):
                continue
            count += 1
            found = True
            if "q" in flags:
                return ToolResult("", "", 0)
            if "c" not in flags:
                out += (f"{source}:" if len(sources) > 1 or "H" in flags else "") + line + "\n"
        if "c" in flags:
            out += (f"{source}:" if len(sources) > 1 else "") + f"{count}\n"
    return ToolResult(out, err, 0 if found else (2 if err else 1))  # 2: a file could not be read


def _basic_regex(pattern: str) -> str:
    """A POSIX basic regular expression as Python reads it (extended ones, ``grep -E``, it reads as they are)."""
    # Basic regular expressions: \( \) \| \+ \? \{ \} are the operators; bare ( ) | + ? { } are literals.
    return re.sub(r"\\([()|+?{}])|([()|+?{}])", lambda found: found.group(1) or "\\" + found.group(2), pattern)


def head_tail(ctx: ToolContext) -> ToolResult:
    """``head``/``tail`` ``[-n [+-]N | -N] [FILE]``, told apart by the name they were called by, as
    GNU's: ``head -n -N`` leaves out the last N lines, ``tail -n +N`` starts at line N."""
    args = list(ctx.args)
    if args[:1] and re.fullmatch(r"-\d+", args[0]):  # GNU's older -N, as the first argument only
        args[0] = "-n" + args[0][1:]
    flags, args = gnu_options(args, "n:")
    count = flags.get("n", "10")
    if not re.fullmatch(r"[+-]?\d+", count):
        return ToolResult("", f"{ctx.name}: invalid number of lines: '{count}'\n", 1)
    data = ctx.stdin if not args else ctx.fs.read(ctx.path(args[0]))
    if data is None:
        return ToolResult("", f"{ctx.name}: cannot open '{args[0]}' for reading: No such file or directory\n", 1)
    lines = data.decode(errors="replace").splitlines(keepends=True)
    n = int(count.lstrip("+-"))
    if ctx.name == "head":
        chosen = lines[:max(len(lines) - n, 0)] if count.startswith("-") else lines[:n]
    else:
        chosen = lines[max(n - 1, 0):] if count.startswith("+") else lines[-n:] if n else []
    return ToolResult("".join(chosen))


def install(ctx: ToolContext) -> ToolResult:
    flags, paths = gnu_options(ctx.args, "dDpvm:o:g:")
    mode = int(flags.get("m", "755"), 8)
    if "d" in flags:
        for path in paths:
            ctx.fs.mkdir(ctx.path(path))
            ctx.fs.local(ctx.path(path)).chmod(mode)
        return ToolResult()
    if len(paths) != 2:
        return ToolResult("", "install: missing destination file operand\n", 1)
    source, dest = (ctx.path(p) for p in paths)
    data = ctx.stdin if paths[0] == "/dev/stdin" else ctx.fs.read(source)
    if data is None:
        return ToolResult("", f"install: cannot stat '{paths[0]}': No such file or directory\n", 1)
    if ctx.fs.is_dir(dest):
        dest = f"{dest.rstrip('/')}/{source.rsplit('/', 1)[-1]}"
    if "D" not in flags and not ctx.fs.is_dir(dest.rsplit("/", 1)[0] or "/"):
        return ToolResult("", f"install: cannot create regular file '{paths[1]}': No such file or directory\n", 1)
    ctx.fs.write(dest, data, mode=mode)
    return ToolResult()


def uname(ctx: ToolContext) -> ToolResult:
    kernel = str(ctx.machine.get("kernel") or DEFAULT_KERNEL)
    parts = {"s": "Linux", "n": ctx.hostname, "r": kernel, "m": "x86_64", "o": "GNU/Linux"}
    flags, _rest = gnu_options(ctx.args, "snrmoav")
    if "a" in flags:
        return ToolResult(f"Linux {ctx.hostname} {kernel} #1 SMP x86_64 x86_64 x86_64 GNU/Linux\n")
    chosen = [parts[f] for f in "snrmo" if f in flags] or ["Linux"]
    return ToolResult(" ".join(chosen) + "\n")


def date(ctx: ToolContext) -> ToolResult:
    flags, operands = gnu_options(ctx.args, "u", longs={"utc": "u", "universal": "u"})
    fmt = next((a[1:] for a in operands if a.startswith("+")), "%a %b %e %H:%M:%S %Z %Y")
    # datetime's zone is named UTC, as GNU date -u names it (time.gmtime's is GMT).
    now = datetime.now(timezone.utc) if "u" in flags else datetime.now().astimezone()
    return ToolResult(now.strftime(fmt) + "\n")


def hostname(ctx: ToolContext) -> ToolResult:
    flags, names = gnu_options(ctx.args, "s", longs={"short": "s"})
    if names:
        return ToolResult("", "hostname: you must be root to change the host name\n", 1)
    return ToolResult((ctx.hostname.split(".")[0] if "s" in flags else ctx.hostname) + "\n")


HANDLERS: dict[str, Callable[[ToolContext], ToolResult]] = {
    "cat": cat, "test": test, "[": test, "mkdir": mkdir, "rm": rm, "rmdir": rmdir, "cp": cp_mv, "mv": cp_mv, "ls": ls,
    "touch": touch, "chmod": chmod, "grep": grep, "head": head_tail, "tail": head_tail, "install": install,
    "uname": uname, "date": date, "hostname": hostname, "sleep": lambda ctx: ToolResult(),
}


#: The file tools that change files; asked read-only, they are refused before they start
#: (some of them change the tree directly rather than through ``FileTree``'s guarded methods).
CHANGING = frozenset({"mkdir", "rm", "cp", "mv", "touch", "chmod", "install"})


def run(ctx: ToolContext) -> ToolResult:
    if ctx.name in CHANGING:
        refuse_change(f"run {ctx.name}")
    try:
        return HANDLERS[ctx.name](ctx)
    except StateError as exc:
        return ToolResult("", f"{ctx.name}: {exc}\n", 1)
    except NotADirectoryError:
        return ToolResult("", f"{ctx.name}: Not a directory\n", 1)
