"""A small POSIX-shell subset, so command lines sent to an in-process mock host behave as on ``sh``.

It covers what clusterctl and its phases send: ``;``, ``&&``, ``||``, pipes, ``if/then/elif/
else/fi``, ``{ ...; }`` groups, ``!``, quoting (single, double, backslash), ``$VAR``/``${VAR}``/``$?``/``$$`` and
``$(...)``, redirections (``>``, ``>>``, ``<``, ``2>``, ``2>&1``, ``>&2``, ``&>``; files land in
the host's tree, ``/dev/null`` discards), ``NAME=value`` prefixes, ``export``, ``set -e``,
``exit``, ``cd``, ``sh -c``/``bash -c``, ``sudo``, ``env``, ``timeout``, ``command -v``,
``echo``, ``printf`` and ``eval``. Glob patterns in unquoted words expand against the host's
tree. Every other word is run by the ``dispatch`` callback (profile rules, then simulated
tools). Anything else (background ``&``, subshells, here-documents, loops) is refused with a
clear message and exit 2, never silently mis-run: add a profile rule for such a line.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

#: A command's outcome: stdout, stderr, exit code.
Outcome = tuple[bytes, bytes, int]
#: Runs one simple command: (argv, stdin, environment, shell) -> outcome.
Dispatch = Callable[[list[str], bytes, dict[str, str], "Shell"], Outcome]

FAKE_PID = "4242"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=")
_UNSUPPORTED = {"for", "while", "until", "case", "do", "done", "esac", "function", "select"}


class ShellSyntaxError(Exception):
    pass


class ExitShell(Exception):
    def __init__(self, code: int) -> None:
        self.code = code
        super().__init__(code)


# -- tokens ---------------------------------------------------------------------------------

#: One piece of a word: ("lit", text, quoted) | ("var", name, quoted) | ("cmd", script, quoted).
Segment = tuple[str, str, bool]


@dataclass
class Word:
    segments: list[Segment] = field(default_factory=list)
    #: What ``Shell.expand`` needs of a word with nothing to expand (``_fixed_fields``), worked out
    #: on first use: parsed trees are kept and shared (``parse``), so a fleet's hosts work out each
    #: word once. ``False``: the word has a ``$`` expansion.
    _fixed: tuple[str, list[str] | None] | Literal[False] | None = field(default=None, compare=False, repr=False)

    def literal(self, *, unquoted: bool = False) -> str | None:
        """The word's text when it has no expansion at all (and, with ``unquoted``, no quoting: reserved words)."""
        if all(kind == "lit" and not (unquoted and quoted) for kind, _, quoted in self.segments):
            return "".join(text for _, text, _ in self.segments)
        return None


def _fixed_fields(word: Word) -> tuple[str, list[str] | None] | Literal[False]:
    """For a word of text alone: its text, and its fields as a command's word (None when an
    unquoted pattern in it globs against the host's tree); False for a word with an expansion."""
    text = word.literal()
    if text is None:
        return False
    if any(not quoted and any(c in value for c in "*?[") for _, value, quoted in word.segments):
        return text, None
    kept = bool(text) or any(quoted for _, _, quoted in word.segments)
    return text, [text] if kept else []


@dataclass
class Op:
    text: str


Token = Word | Op

_OPERATORS = ("&&", "||", ">>", "&>", ">&", "<<", ";", "|", "&", ">", "<", "(", ")", "\n")
#: A run of characters that are plain word text outside quotes (no blank, quote, escape, ``$``,
#: backquote, comment or operator character): taken as one piece instead of one at a time.
_PLAIN_RUN = re.compile(r"[^ \t\n'\"\\$`#&|<>;()]+")
#: The same inside double quotes: everything but the closing quote, ``\``, ``$`` and backquotes.
_QUOTED_RUN = re.compile(r'[^"\\$`]+')
_OPERATOR_STARTS = frozenset(o[0] for o in _OPERATORS)
_REDIRECT_OP = re.compile(r"(\d?)(>>|>&|&>|<<|>|<)")


def _read_dollar(text: str, i: int, quoted: bool, segments: list[Segment]) -> int:
    """Parse ``$...`` at ``text[i] == '$'``; append a segment; return the index after it."""
    nxt = text[i + 1] if i + 1 < len(text) else ""
    if nxt == "{":
        end = text.find("}", i + 2)
        if end < 0:
            raise ShellSyntaxError("unterminated ${")
        name = text[i + 2 : end]
        if not (_NAME.fullmatch(name) or name in ("?", "$")):
            raise ShellSyntaxError(f"unsupported parameter expansion ${{{name}}}")
        segments.append(("var", name, quoted))
        return end + 1
    if nxt == "(":
        if text.startswith("((", i + 1):
            raise ShellSyntaxError("arithmetic $(( )) is not supported")
        depth, j = 1, i + 2
        while j < len(text) and depth:
            ch = text[j]
            if ch == "'":
                j = text.find("'", j + 1)
                if j < 0:
                    raise ShellSyntaxError("unterminated quote in $(...)")
            elif ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
            j += 1
        if depth:
            raise ShellSyntaxError("unterminated $(")
        segments.append(("cmd", text[i + 2 : j - 1], quoted))
        return j
    if nxt in ("?", "$"):
        segments.append(("var", nxt, quoted))
        return i + 2
    match = _NAME.match(text, i + 1)
    if match:
        segments.append(("var", match.group(0), quoted))
        return match.end()
    segments.append(("lit", "$", quoted))
    return i + 1


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    segments: list[Segment] = []
    in_word = False
    i = 0

    def end_word() -> None:
        nonlocal segments, in_word
        if in_word:
            merged: list[Segment] = []
            for seg in segments:
                if merged and seg[0] == "lit" and merged[-1][0] == "lit" and merged[-1][2] == seg[2]:
                    merged[-1] = ("lit", merged[-1][1] + seg[1], seg[2])
                else:
                    merged.append(seg)
            tokens.append(Word(merged))
        segments, in_word = [], False

    while i < len(text):
        ch = text[i]
        if ch in " \t":
            end_word()
            i += 1
        elif ch == "#" and not in_word:
            while i < len(text) and text[i] != "\n":
                i += 1
        elif ch == "\\":
            if i + 1 < len(text) and text[i + 1] == "\n":
                i += 2
                continue
            segments.append(("lit", text[i + 1 : i + 2], True))
            in_word = True
            i += 2
        elif ch == "'":
            end = text.find("'", i + 1)
            if end < 0:
                raise ShellSyntaxError("unterminated single quote")
            segments.append(("lit", text[i + 1 : end], True))
            in_word = True
            i = end + 1
        elif ch == '"':
            in_word = True
            i += 1
            buf = ""
            while True:
                if i >= len(text):
                    raise ShellSyntaxError("unterminated double quote")
                c = text[i]
                if c == '"':
                    i += 1
                    break
                if c == "\\" and i + 1 < len(text) and text[i + 1] in '"\\$`\n':
                    buf += text[i + 1] if text[i + 1] != "\n" else ""
                    i += 2
                elif c == "$":
                    if buf:
                        segments.append(("lit", buf, True))
                        buf = ""
                    i = _read_dollar(text, i, True, segments)
                elif c == "`":
                    raise ShellSyntaxError("backquotes are not supported; use $(...)")
                else:
                    run = _QUOTED_RUN.match(text, i)
                    end = run.end() if run is not None else i + 1
                    buf += text[i:end]
                    i = end
            segments.append(("lit", buf, True))
        elif ch == "$":
            in_word = True
            i = _read_dollar(text, i, False, segments)
        elif ch == "`":
            raise ShellSyntaxError("backquotes are not supported; use $(...)")
        else:
            op = next((o for o in _OPERATORS if text.startswith(o, i)), None) if ch in _OPERATOR_STARTS else None
            if op is not None:
                # "2>" / "2>&1": a bare number right before a redirection is its file descriptor.
                if op[0] in "<>" and in_word and len(segments) == 1:
                    kind, word_text, quoted = segments[0]
                    if kind == "lit" and not quoted and word_text.isdigit():
                        segments, in_word = [], False
                        tokens.append(Op(word_text + op))
                        i += len(op)
                        continue
                end_word()
                tokens.append(Op(op))
                i += len(op)
            else:
                # A plain character (and the plain run it starts) is word text. A single digit
                # stays a piece of its own, so "2>" above still sees a lone file descriptor.
                run = _PLAIN_RUN.match(text, i)
                end = run.end() if run is not None and not ch.isdigit() else i + 1
                segments.append(("lit", text[i:end], False))
                in_word = True
                i = end
    end_word()
    return tokens


# -- syntax tree ----------------------------------------------------------------------------


@dataclass
class Redirect:
    fd: int
    #: ">", ">>", "<", ">&" (duplicate), "&>" (stdout and stderr).
    op: str
    target: Word


@dataclass
class Simple:
    assigns: list[tuple[str, Word]]
    words: list[Word]
    redirects: list[Redirect]


@dataclass
class If:
    branches: list[tuple[Sequence_, Sequence_]]
    otherwise: Sequence_ | None
    redirects: list[Redirect]


@dataclass
class Pipeline:
    commands: list[Simple | If]
    negate: bool = False


@dataclass
class AndOr:
    first: Pipeline
    rest: list[tuple[str, Pipeline]]


@dataclass
class Sequence_:
    items: list[AndOr]


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.pos = 0

    def peek(self) -> Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def peek_word(self) -> str | None:
        tok = self.peek()
        return tok.literal(unquoted=True) if isinstance(tok, Word) else None

    def take(self) -> Token:
        tok = self.tokens[self.pos]
        self.pos += 1
        return tok

    def is_op(self, *ops: str) -> bool:
        tok = self.peek()
        return isinstance(tok, Op) and tok.text in ops

    def skip(self, *ops: str) -> None:
        while self.is_op(*ops):
            self.take()

    def sequence(self, stop: tuple[str, ...] = ()) -> Sequence_:
        items: list[AndOr] = []
        self.skip(";", "\n")
        while self.peek() is not None and self.peek_word() not in stop:
            items.append(self.and_or())
            if self.is_op("&"):
                raise ShellSyntaxError("background jobs (&) are not supported")
            if self.peek() is not None and not self.is_op(";", "\n") and self.peek_word() not in stop:
                tok = self.peek()
                raise ShellSyntaxError(f"unexpected {tok.text if isinstance(tok, Op) else 'word'!r}")
            self.skip(";", "\n")
        return Sequence_(items)

    def and_or(self) -> AndOr:
        first = self.pipeline()
        rest: list[tuple[str, Pipeline]] = []
        while self.is_op("&&", "||"):
            op = self.take()
            assert isinstance(op, Op)
            self.skip("\n")
            rest.append((op.text, self.pipeline()))
        return AndOr(first, rest)

    def pipeline(self) -> Pipeline:
        negate = self.peek_word() == "!"
        if negate:
            self.take()
        commands = [self.command()]
        while self.is_op("|"):
            self.take()
            self.skip("\n")
            commands.append(self.command())
        return Pipeline(commands, negate)

    def command(self) -> Simple | If:
        word = self.peek_word()
        if word in _UNSUPPORTED:
            raise ShellSyntaxError(f"'{word}' is not supported by the mock shell")
        if word == "if":
            return self.if_clause()
        if word == "{":
            return self.brace_group()
        if word == "}":
            raise ShellSyntaxError("unexpected '}'")
        if self.is_op("(", ")"):
            raise ShellSyntaxError("subshells ( ... ) are not supported")
        return self.simple()

    def expect(self, word: str) -> None:
        if self.peek_word() != word:
            raise ShellSyntaxError(f"expected '{word}'")
        self.take()

    def if_clause(self) -> If:
        self.expect("if")
        branches = [self.if_branch()]
        otherwise = None
        while self.peek_word() == "elif":
            self.take()
            branches.append(self.if_branch())
        if self.peek_word() == "else":
            self.take()
            otherwise = self.sequence(("fi",))
        self.expect("fi")
        return If(branches, otherwise, self.redirects())

    def if_branch(self) -> tuple[Sequence_, Sequence_]:
        """``CONDITION then BODY``, after ``if`` or ``elif``."""
        condition = self.sequence(("then",))
        self.expect("then")
        return condition, self.sequence(("elif", "else", "fi"))

    def brace_group(self) -> If:
        """``{ LIST; }``: run LIST in this shell, its output redirected as one (an ``if`` with no test)."""
        self.expect("{")
        body = self.sequence(("}",))
        self.expect("}")
        return If([(Sequence_([]), body)], None, self.redirects())

    def redirects(self) -> list[Redirect]:
        found: list[Redirect] = []
        while True:
            tok = self.peek()
            if not isinstance(tok, Op) or not _REDIRECT_OP.fullmatch(tok.text):
                return found
            found.append(self.redirect())

    def redirect(self) -> Redirect:
        op = self.take()
        assert isinstance(op, Op)
        match = _REDIRECT_OP.fullmatch(op.text)
        assert match
        digits, kind = match.groups()
        if kind == "<<":
            raise ShellSyntaxError("here-documents (<<) are not supported")
        fd = int(digits) if digits else (0 if kind == "<" else 1)
        target = self.peek()
        if not isinstance(target, Word):
            raise ShellSyntaxError(f"{op.text} needs a target")
        self.take()
        return Redirect(fd, kind, target)

    def simple(self) -> Simple:
        assigns: list[tuple[str, Word]] = []
        words: list[Word] = []
        redirects: list[Redirect] = []
        while True:
            tok = self.peek()
            if tok is None:
                break
            if isinstance(tok, Op):
                if _REDIRECT_OP.fullmatch(tok.text):
                    redirects.append(self.redirect())
                    continue
                break
            first = tok.segments[0] if tok.segments else None
            if not words and first and first[0] == "lit" and not first[2]:
                assign = _ASSIGN.match(first[1])
                if assign:
                    self.take()
                    rest = [("lit", first[1][assign.end() :], False), *tok.segments[1:]]
                    assigns.append((assign.group(1), Word(rest)))
                    continue
            if not words and not assigns and self.peek_word() in ("then", "fi", "else", "elif"):
                raise ShellSyntaxError(f"unexpected '{self.peek_word()}'")
            words.append(tok)
            self.take()
        if not words and not assigns and not redirects:
            tok = self.peek()
            raise ShellSyntaxError(f"syntax error near {tok.text if isinstance(tok, Op) else 'end of line'!r}")
        return Simple(assigns, words, redirects)


@functools.lru_cache(maxsize=512)
def parse(text: str) -> Sequence_:
    """The syntax tree of a script. Running a tree never changes it, so one tree serves every run
    of the same text: a fleet's hosts all receive the same probe lines, parsed once (the latest 512
    scripts are kept; one that does not parse is not: it raises again, with the same message)."""
    parser = _Parser(tokenize(text))
    tree = parser.sequence()
    if parser.peek() is not None:
        tok = parser.peek()
        raise ShellSyntaxError(f"unexpected {tok.text if isinstance(tok, Op) else parser.peek_word()!r}")
    return tree


# -- running --------------------------------------------------------------------------------


class Shell:
    """Runs a command line against one mock host. ``dispatch`` answers every external command.

    ``glob`` expands an absolute pattern against the host's tree; ``read_file``/``write_file``
    serve redirections.
    """

    def __init__(
        self,
        dispatch: Dispatch,
        *,
        env: dict[str, str] | None = None,
        glob: Callable[[str], list[str]],
        read_file: Callable[[str], bytes | None],
        write_file: Callable[[str, bytes, bool], None],
        cwd: str = "/root",
    ) -> None:
        self.dispatch = dispatch
        self.env: dict[str, str] = dict(env or {})
        self.glob = glob
        self.read_file = read_file
        self.write_file = write_file
        self.cwd = cwd
        self.status = 0
        self.errexit = False

    def subshell(self, env: dict[str, str]) -> Shell:
        """A shell for ``$(...)``, ``eval`` and ``sh -c`` on the same host, in the same folder."""
        return Shell(self.dispatch, env=env, glob=self.glob, read_file=self.read_file, write_file=self.write_file,
                     cwd=self.cwd)

    def absolute(self, path: str) -> str:
        return path if path.startswith("/") else f"{self.cwd.rstrip('/')}/{path}"

    def run(self, text: str, stdin: bytes = b"") -> Outcome:
        """Run a whole script; a syntax the mock cannot run answers exit 2 with the reason."""
        try:
            tree = parse(text)
        except ShellSyntaxError as exc:
            return b"", f"sh: 1: mock shell: {exc} (add a profile rule for this command line)\n".encode(), 2
        out: list[bytes] = []
        err: list[bytes] = []
        try:
            code = self.run_sequence(tree, stdin, out, err)
        except ExitShell as exc:
            code = exc.code
        except ShellSyntaxError as exc:
            err.append(f"sh: 1: mock shell: {exc}\n".encode())
            code = 2
        return b"".join(out), b"".join(err), code

    def run_sequence(self, seq: Sequence_, stdin: bytes, out: list[bytes], err: list[bytes]) -> int:
        code = 0
        for item in seq.items:
            code = self.run_and_or(item, stdin, out, err)
        return code

    def run_and_or(self, item: AndOr, stdin: bytes, out: list[bytes], err: list[bytes]) -> int:
        code = self.run_pipeline(item.first, stdin, out, err)
        last_ran = item.first
        for op, pipeline in item.rest:
            if (op == "&&" and code == 0) or (op == "||" and code != 0):
                code = self.run_pipeline(pipeline, stdin, out, err)
                last_ran = pipeline
        # Like sh, set -e ignores a failure inside an && / || list unless the list's last
        # command failed, and a failure negated with '!'.
        tail = item.rest[-1][1] if item.rest else item.first
        if self.errexit and code != 0 and last_ran is tail and not last_ran.negate:
            raise ExitShell(code)
        return code

    def run_pipeline(self, pipeline: Pipeline, stdin: bytes, out: list[bytes], err: list[bytes]) -> int:
        data = stdin
        code = 0
        for index, command in enumerate(pipeline.commands):
            sink: list[bytes] = []
            last = index == len(pipeline.commands) - 1
            code = self.run_command(command, data, out if last else sink, err)
            data = b"".join(sink)
        if pipeline.negate:
            code = 0 if code else 1
        self.status = code
        return code

    def run_command(self, command: Simple | If, stdin: bytes, out: list[bytes], err: list[bytes]) -> int:
        if isinstance(command, If):
            my_out: list[bytes] = []
            my_err: list[bytes] = []
            saved = self.errexit
            code = 0
            try:
                for condition, body in command.branches:
                    self.errexit = False
                    cond_code = self.run_sequence(condition, stdin, my_out, my_err)
                    self.errexit = saved
                    if cond_code == 0:
                        code = self.run_sequence(body, stdin, my_out, my_err)
                        break
                else:
                    if command.otherwise:
                        code = self.run_sequence(command.otherwise, stdin, my_out, my_err)
            except ExitShell:
                self._redirect(command.redirects, b"".join(my_out), b"".join(my_err), 0, out, err)
                raise
            return self._redirect(command.redirects, b"".join(my_out), b"".join(my_err), code, out, err)
        given = self._input(command.redirects, stdin)
        if given is None:
            return 1
        stdin = given
        argv = [a for w in command.words for a in self.expand(w, split_glob=True)]
        values = {name: self.expand(word)[0] if word.segments else "" for name, word in command.assigns}
        if not argv:
            self.env.update(values)
            return self._redirect(command.redirects, b"", b"", 0, out, err)
        env = {**self.env, **values}
        o, e, code = self.builtin(argv, stdin, env)
        self.status = code
        return self._redirect(command.redirects, o, e, code, out, err)

    def _input(self, redirects: list[Redirect], stdin: bytes) -> bytes | None:
        for r in redirects:
            if r.op == "<":
                path = self.absolute(self.expand(r.target)[0])
                data = b"" if path == "/dev/null" else self.read_file(path)
                if data is None:
                    return None
                stdin = data
        return stdin

    def _redirect(
        self,
        redirects: list[Redirect],
        o: bytes,
        e: bytes,
        code: int,
        out: list[bytes],
        err: list[bytes],
    ) -> int:
        if not redirects:
            out.append(o)
            err.append(e)
            return code
        streams = {1: o, 2: e}
        for r in redirects:
            if r.op == "<":
                continue
            target = self.expand(r.target)[0]
            if r.op == ">&":
                if target not in ("1", "2"):
                    raise ShellSyntaxError(f"unsupported redirection >&{target}")
                dst = int(target)
                if r.fd != dst:
                    streams[dst] = streams.get(dst, b"") + streams.get(r.fd, b"")
                    streams[r.fd] = b""
                continue
            data = streams[1] + streams[2] if r.op == "&>" else streams.get(r.fd, b"")
            if r.op == "&>":
                streams[1] = streams[2] = b""
            else:
                streams[r.fd] = b""
            path = self.absolute(target)
            if path == "/dev/null":
                continue
            try:
                self.write_file(path, data, r.op == ">>")
            except OSError as exc:
                err.append(f"sh: 1: cannot create {target}: {exc.strerror or exc}\n".encode())
                return 2
        out.append(streams[1])
        err.append(streams[2])
        return code

    # -- expansion ------------------------------------------------------------------------

    def variable(self, name: str) -> str:
        if name == "?":
            return str(self.status)
        if name == "$":
            return FAKE_PID
        return self.env.get(name, "")

    def expand(self, word: Word, *, split_glob: bool = False) -> list[str]:
        """The fields of ``word``. For a command's words (``split_glob``) an unquoted ``$VAR`` or
        ``$(...)`` is split on blanks as sh does (``x='a b'; cmd $x`` passes two arguments, an
        empty one none) and unquoted patterns glob; assignments keep one field."""
        fixed = word._fixed
        if fixed is None:
            fixed = word._fixed = _fixed_fields(word)
        if fixed:
            # Text alone (most words of most lines): the same fields every time.
            fixed_text, fixed_fields = fixed
            if not split_glob:
                return [fixed_text]
            if fixed_fields is not None:
                return list(fixed_fields)
        text = ""
        pattern = False
        fields: list[str] = [""]
        #: Whether the current field holds something that keeps it even when empty ("" or '').
        kept = [False]
        for kind, value, quoted in word.segments:
            if kind == "lit":
                expanded = value
                if not quoted and any(c in value for c in "*?["):
                    pattern = True
            elif kind == "var":
                expanded = self.variable(value)
            else:
                o, _e, code = self.subshell(self.env).run(value)
                self.status = code
                expanded = o.decode(errors="replace").rstrip("\n")
            text += expanded
            if kind == "lit" or quoted:
                fields[-1] += expanded
                kept[-1] = kept[-1] or quoted or bool(expanded)
                continue
            for piece in re.split(r"([ \t\n]+)", expanded):
                if not piece:
                    continue
                if piece.strip(" \t\n"):
                    fields[-1] += piece
                    kept[-1] = True
                elif fields[-1] or kept[-1]:
                    fields.append("")
                    kept.append(False)
        if not split_glob:
            return [text]
        words = [f for f, keep in zip(fields, kept, strict=True) if f or keep]
        if pattern and len(words) == 1:
            matches = self.glob(self.absolute(words[0]))
            if matches:
                return matches
        return words

    # -- builtins -------------------------------------------------------------------------

    def builtin(self, argv: list[str], stdin: bytes, env: dict[str, str]) -> Outcome:
        name = argv[0]
        if name in (":", "true"):
            return b"", b"", 0
        if name == "false":
            return b"", b"", 1
        if name == "exit":
            raise ExitShell(int(argv[1]) if len(argv) > 1 and argv[1].isdigit() else self.status)
        if name == "export":
            for arg in argv[1:]:
                key, sep, value = arg.partition("=")
                if sep:
                    self.env[key] = value
            return b"", b"", 0
        if name == "unset":
            for arg in argv[1:]:
                self.env.pop(arg, None)
            return b"", b"", 0
        if name == "set":
            for arg in argv[1:]:
                if arg.startswith("-") and "e" in arg:
                    self.errexit = True
                elif arg.startswith("+") and "e" in arg:
                    self.errexit = False
            return b"", b"", 0
        if name == "cd":
            self.cwd = self.absolute(argv[1]) if len(argv) > 1 else "/root"
            return b"", b"", 0
        if name == "echo":  # dash's: only a first -n is an option; the escapes of printf's %b, \c ends all output
            newline = argv[1:2] != ["-n"]
            text = " ".join(argv[1 if newline else 2:]) + ("\n" if newline else "")
            return _interpreted(_ECHO_PIECE, text)[0], b"", 0
        if name == "printf":
            return _printf(argv[1:])
        if name == "eval":
            return self.subshell(self.env).run(" ".join(argv[1:]), stdin)
        if name in ("sh", "bash", "dash") and len(argv) >= 3 and argv[1] in ("-c", "-ec", "-ce", "-euc", "-eu"):
            sub = self.subshell(env)
            if "e" in argv[1][1:]:
                sub.errexit = True
            return sub.run(argv[2], stdin)
        if name == "env":
            rest = argv[1:]
            extra: dict[str, str] = {}
            while rest and _ASSIGN.match(rest[0]):
                key, _, value = rest.pop(0).partition("=")
                extra[key] = value
            if not rest:
                text = "".join(f"{k}={v}\n" for k, v in {**env, **extra}.items())
                return text.encode(), b"", 0
            return self.builtin(rest, stdin, {**env, **extra})
        if name in _WRAPPERS:
            rest = argv[1:]
            while rest and rest[0].startswith("-"):
                flag = rest.pop(0)
                if flag == "--":
                    break
                if flag in _WRAPPERS[name] and rest:
                    rest.pop(0)  # the option's value
            if name == "timeout" and rest:
                rest.pop(0)  # the duration
            if not rest:
                return (b"", b"usage: sudo command\n", 1) if name == "sudo" else (b"", b"", 0)
            return self.builtin(rest, stdin, env)
        if name == "command" and len(argv) >= 3 and argv[1] == "-v":
            o, _e, code = self.dispatch(["command", "-v", argv[2]], stdin, env, self)
            return o, b"", code
        if name == "command" and len(argv) >= 2:
            return self.builtin(argv[1:], stdin, env)
        return self.dispatch(argv, stdin, env, self)


#: Programs that run the command after their options (``timeout`` after its duration too), with those of their
#: options that take the next word as their value.
_WRAPPERS = {"sudo": ("-u", "-g"), "timeout": ("-s", "-k"), "nice": ("-n",), "ionice": ("-c", "-n", "-p"),
             "nohup": (), "exec": ()}

#: A backslash escape as printf reads it: ``\xHH``, octal (``\NNN`` in the format; ``%b``
#: also takes ``\0NNN``), or one character (unknown ones are kept with their backslash; ``%b`` keeps
#: ``\"`` whole, as bash's and dash's do; bash's format reads it as ``"``).
_ESCAPE = r"\\(?:x([0-9A-Fa-f]{1,2})|(%s)|(%s))"
_FORMAT_PIECE = re.compile(_ESCAPE % ("[0-7]{1,3}", ".?") + r"|%([-+ #0]*\d*(?:\.\d*)?)(.?)|[^\\%]+", re.S)
_B_PIECE = re.compile(_ESCAPE % ("0[0-7]{0,3}|[0-7]{1,3}", '[^"]?') + r"|[^\\]+", re.S)
#: dash's echo: ``%b``'s escapes less ``\\xHH`` (group 1 never takes part), an unknown one kept whole.
_ECHO_PIECE = re.compile(r"\\(?:()(0[0-7]{0,3}|[0-7]{1,3})|([abcefnrtv\\]))|\\|[^\\]+", re.S)
_ESCAPES = {"a": b"\a", "b": b"\b", "e": b"\x1b", "f": b"\f", "n": b"\n", "r": b"\r", "t": b"\t", "v": b"\v",
            "\\": b"\\", '"': b'"'}
#: The start of an integer argument as printf reads it: decimal, octal with a leading 0, hex with 0x.
_INTEGER = re.compile(r"\s*([+-]?)(?:0[xX]([0-9A-Fa-f]+)|(0[0-7]*)|([1-9][0-9]*))")


def _escaped(match: re.Match[str]) -> bytes:
    """The bytes one piece of ``_FORMAT_PIECE``/``_B_PIECE`` stands for, when it is an escape or text."""
    hex_digits, octal, char = match.group(1, 2, 3)
    if hex_digits:
        return bytes([int(hex_digits, 16)])
    if octal:
        return bytes([int(octal, 8) & 0xFF])
    if char is None:
        return match.group(0).encode()
    return _ESCAPES.get(char, b"\\" + char.encode())


def _interpreted(pieces: re.Pattern[str], text: str) -> tuple[bytes, bool]:
    """``text`` with its escapes read by ``pieces`` (``_B_PIECE``, ``_ECHO_PIECE``) up to a ``\\c``, and
    whether a ``\\c`` ended it (then nothing more is printed)."""
    parts = list(pieces.finditer(text))
    ended = next((i for i, part in enumerate(parts) if part.group(3) == "c"), None)
    return b"".join(_escaped(part) for part in parts[:ended]), ended is not None


def _number(value: str, conversion: str) -> tuple[int | float, bool]:
    """What a ``%d``/``%x``/``%f``... argument stands for, and whether all of it was read (a
    leading quote gives the next character's code; a bad tail leaves the number before it)."""
    if value[:1] in ("'", '"'):
        return ord(value[1]) if len(value) > 1 else 0, True
    if conversion in "eEfFgG":
        try:
            return float(value or 0), True
        except ValueError:
            return 0.0, False
    match = _INTEGER.match(value)
    if match is None:
        return 0, not value
    sign, hex_digits, octal, decimal = match.groups()
    integer = int(hex_digits, 16) if hex_digits else int(octal, 8) if octal else int(decimal)
    return -integer if sign == "-" else integer, match.end() == len(value)


def _printf(args: list[str]) -> Outcome:
    """``printf FORMAT ARGS...`` as bash's: the escapes (octal ``\\NNN``, ``\\xHH``), ``%s %b %c``,
    the integer and floating conversions, with flags, width and precision; the format repeats
    while arguments are left. A bad number prints what it starts with and fails, as there; a
    ``\\c`` in a ``%b`` argument ends all output."""
    args = args[1:] if args[:1] == ["--"] else args  # the end of options, before the format
    if not args:
        return b"", b"sh: 1: printf: usage: printf format [arg ...]\n", 2
    fmt, values = args[0], args[1:]
    out, err = bytearray(), bytearray()
    while True:
        taken = len(values)
        for piece in _FORMAT_PIECE.finditer(fmt):
            flags, conversion = piece.group(4, 5)
            if conversion is None:
                out += _escaped(piece)
                continue
            if conversion == "%":
                out += b"%"
                continue
            if not conversion or conversion not in "sbcdiuoxXeEfFgG":
                err += f"sh: 1: printf: %{conversion}: invalid directive\n".encode()
                return bytes(out), bytes(err), 1
            value = values.pop(0) if values else ""
            spec = ("%" + flags).encode()
            if conversion == "b":
                text, ended = _interpreted(_B_PIECE, value)
                out += (spec + b"s") % text
                if ended:
                    return bytes(out), bytes(err), 1 if err else 0
            elif conversion in "sc":
                out += (spec + b"s") % (value[:1] if conversion == "c" else value).encode()
            else:
                number, whole = _number(value, conversion)
                if not whole:
                    err += f"sh: 1: printf: {value}: invalid number\n".encode()
                text = (spec + conversion.replace("u", "d").encode()) % number
                out += text.replace(b"0o", b"0", 1) if conversion == "o" else text  # C's %#o: 010, not 0o10
        if not values or len(values) == taken:
            return bytes(out), bytes(err), 1 if err else 0
