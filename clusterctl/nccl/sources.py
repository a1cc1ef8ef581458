"""Reading NCCL settings out of the files people keep them in.

Formats: ``env`` (KEY=VALUE, also /etc/nccl.conf and ~/.nccl.conf), ``shell`` (export lines, plain
assignments, ``VAR=1 cmd``, ``mpirun -x K=V`` and ``-x K``, ``docker run -e K=V``, heredocs),
``slurm`` (a shell script; #SBATCH lines are comments, ``srun --export=ALL,K=V`` is read too),
``k8s`` (container ``env:`` lists and ``command``/``args`` in any manifest kind, ConfigMap
``data:`` with whole files and scripts, multi-document YAML) and ``dockerfile`` (``ENV``,
``ARG``, the shell of ``RUN`` with heredocs, ``CMD``/``ENTRYPOINT``). Every setting carries the
physical line it is written on, also inside continued lines.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
from contextvars import ContextVar
from dataclasses import dataclass

import yaml
from yaml import Node, ScalarNode

from clusterctl.errors import ParseError, UsageError
from clusterctl.findings import Finding, Severity
from clusterctl.inventory.values import ENV_NAME
from clusterctl.json_input import read_yaml

FORMATS: tuple[str, ...] = ("env", "shell", "slurm", "k8s", "dockerfile")
_ASSIGN_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
_NCCL_ASSIGN_RE = re.compile(r"\b(TORCH_)?NCCL_[A-Za-z0-9_]*=")
_DEFAULT_EXPANSION_RE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*):?-([^}]*)\}$")
_STATEMENT_BREAKS = frozenset({";", "&&", "||", "|", "&", "then", "do", "else", "{", "}", "(", ")", "if", "while"})


#: ``Setting.origin`` values: passed through from the caller's environment (``mpirun -x NAME``,
#: ``docker run -e NAME``) or a Dockerfile build argument (``ARG NAME=value``, gone at run time).
PASSTHROUGH = "passthrough"
BUILD_ARG = "build-arg"
#: ``NAME: null`` in Helm values: removes the chart's default for NAME (the variable is not set at all).
UNSET = "unset"
#: The scope of settings a Helm values file gives as a ``NAME: value`` mapping.
CHART_VALUES = "chart values"


@dataclass(frozen=True)
class Setting:
    """One ``NAME=value`` found in a file. ``dynamic`` when the value is computed at run time ($VAR)."""

    name: str
    value: str
    file: str
    line: int
    dynamic: bool = False
    #: "" for an assignment, else PASSTHROUGH or BUILD_ARG.
    origin: str = ""
    #: Shell ``if`` arms it sits in: ((if number, arm number), ...), outermost first.
    branch: tuple[tuple[int, int], ...] = ()
    #: The environment it belongs to inside its file: one per Kubernetes container (a RayCluster's
    #: head and workers, a JobSet's replicated jobs, a PyTorchJob's Master and Worker each have their
    #: own) or ConfigMap key, ``"container 'worker' (line 40)"``; ``""`` for a file with one environment.
    scope: str = ""
    #: The first line (other than its own) where the same file reads the name back (``$NAME``,
    #: ``${NAME}``): a script's own variable, such as an install path used in LD_LIBRARY_PATH.
    referenced_at: int | None = None

    def exclusive_with(self, other: Setting) -> bool:
        """Whether the two can never both run: different arms of the same ``if``."""
        return any(a[0] == b[0] and a[1] != b[1] for a, b in zip(self.branch, other.branch, strict=False))


class SettingsRead(list[Setting]):
    """The settings of one source (a list, as every caller uses it) and ``notes`` on what was not read."""

    def __init__(self, settings: list[Setting], notes: list[Finding]) -> None:
        super().__init__(settings)
        self.notes = tuple(notes)


_NOTES: ContextVar[list[Finding] | None] = ContextVar("clusterctl_nccl_source_notes", default=None)


def _note(file: str, line: int, message: str, severity: str = "warning") -> None:
    """Something in a settings file not read as a setting, and why (never dropped silently): ``warning`` for a
    value or line that could not be read, ``info`` for an NCCL-looking word that is no setting."""
    notes = _NOTES.get()
    found = Finding(Severity(severity), "SETTING_NOT_READ", message, file=file, line=line,
                    fix="write the value so the shell (or YAML) gives it as one word, or check it by hand")
    if notes is not None and found not in notes:
        notes.append(found)


#: NCCL's own, PyTorch's, aws-ofi-nccl's and the libfabric settings that plugin documents.
LINTED_PREFIXES: tuple[str, ...] = ("NCCL_", "TORCH_NCCL_", "OFI_NCCL_", "FI_")


def is_nccl_name(name: str) -> bool:
    """Names the linter looks at: NCCL_*, PyTorch's TORCH_NCCL_*, aws-ofi-nccl's OFI_NCCL_* and FI_*."""
    return name.startswith(LINTED_PREFIXES)


_RESEMBLES_RE = re.compile(r"(?:^|_)NCCL(?:_|$)")


def resembles_nccl_name(name: str) -> bool:
    """Environment names that only look like NCCL's (``USE_NCCL``, ``MY_NCCL_HOME``): reported as info,
    never judged. A script's lower-case variables (``nccl_algo``) are not environment settings."""
    return not is_nccl_name(name) and name.isupper() and _RESEMBLES_RE.search(name) is not None


_REFERENCE_RE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")


def _references(text: str) -> dict[str, list[int]]:
    """Where each name is read back (``$NAME``, ``${NAME...}``), by 1-based line."""
    found: dict[str, list[int]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if "$" in line:
            for name in _REFERENCE_RE.findall(line):
                found.setdefault(name, []).append(number)
    return found


def read_settings(text: str, format: str | None = None, *, name: str | None = None) -> SettingsRead:
    """The NCCL settings in ``text`` (a file a user names is read by ``inputfile.read_text_input`` first).

    ``format`` is one of FORMATS (``nccl lint --format`` refuses another), or None to detect it from the name
    and content. ``name`` is what findings call the source (default ``<text>``).
    """
    label = name or "<text>"
    fmt = format or detect_format(label, text)
    notes: list[Finding] = []
    token = _NOTES.set(notes)
    try:
        settings = _READERS[fmt](text, label)
    except ParseError as exc:
        # an input that cannot be read is a usage error (exit 2), never "nothing checked"
        shown = f" ({exc.text.strip()[:80]!r})" if exc.text else ""
        raise UsageError(f"cannot read it as {fmt}: {exc.reason}{shown}", file=label, line=exc.line,
                         hint=f"Give --format ({', '.join(FORMATS)}) if the detected format is wrong.") from None
    finally:
        _NOTES.reset(token)
    references = _references(text)
    kept = [s for s in settings if is_nccl_name(s.name) or resembles_nccl_name(s.name)]
    return SettingsRead([_with_reference(s, references) for s in kept], notes)


def _with_reference(setting: Setting, references: dict[str, list[int]]) -> Setting:
    lines = [n for n in references.get(setting.name, ()) if n != setting.line]
    return dataclasses.replace(setting, referenced_at=lines[0]) if lines else setting


def detect_format(label: str, text: str) -> str:
    """Guess the format from the file name, then from the content."""
    lowered = label.lower()
    base = lowered.rsplit("/", 1)[-1]
    if lowered.endswith((".yaml", ".yml")):
        return "k8s"
    if base.startswith(("dockerfile", "containerfile")) or base.endswith((".dockerfile", ".containerfile")):
        return "dockerfile"
    if re.search(r"^\s*FROM\s+\S+", text, re.MULTILINE | re.IGNORECASE) and re.search(
            r"^\s*(ENV|ARG|RUN|CMD|ENTRYPOINT)\s", text, re.MULTILINE):
        return "dockerfile"
    if lowered.endswith((".slurm", ".sbatch")) or re.search(r"^#SBATCH", text, re.MULTILINE):
        return "slurm"
    if lowered.endswith((".sh", ".bash")):
        return "shell"
    if re.search(r"^\s*(apiVersion|kind):", text, re.MULTILINE):
        return "k8s"
    if re.search(r"^\s*(export\s|#!)", text, re.MULTILINE):
        return "shell"
    return "env"


# -- KEY=VALUE files -------------------------------------------------------------------------


def _unquote(value: str) -> str:
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"" else value


def read_env_text(text: str, label: str, *, first_line: int = 1) -> list[Setting]:
    """KEY=VALUE lines, like /etc/nccl.conf; '#' comments and blank lines skipped, ``export`` tolerated."""
    settings: list[Setting] = []
    for offset, raw in enumerate(text.splitlines()):
        line_no = first_line + offset
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ").strip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not ENV_NAME.fullmatch(key):
            raise ParseError(f"settings file {label}", "expected NAME=VALUE", line=line_no, text=raw)
        value = value.strip()
        if value[:1] not in "'\"" and " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        settings.append(Setting(key, _unquote(value), label, line_no))
    return settings


# -- shell scripts ---------------------------------------------------------------------------


def _logical_lines(text: str) -> list[tuple[int, int, str]]:
    """Lines with backslash continuations joined: (first physical line, last physical line, text)."""
    joined: list[tuple[int, int, str]] = []
    buffer: list[str] = []
    start = 1
    number = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        if not buffer:
            start = number
        if raw.endswith("\\") and not raw.endswith("\\\\"):
            buffer.append(raw[:-1])
            continue
        buffer.append(raw)
        joined.append((start, number, " ".join(buffer)))
        buffer = []
    if buffer:
        joined.append((start, number, " ".join(buffer)))
    return joined


_OPENERS = (("$((", "))"), ("$(", ")"), ("${", "}"), ("`", "`"))
_PLACEHOLDER = "\x00{}\x00"


def _expansion_end(line: str, start: int, opener: str, closer: str) -> int | None:
    """Where the expansion opened at ``start`` ends (index after its closer), nesting and quotes minded."""
    if opener == "`":
        end = line.find("`", start + 1)
        return end + 1 if end >= 0 else None
    depth_char = "(" if closer.startswith(")") else "{"
    close_char = closer[0]
    depth = 0
    i = start + len(opener) - 1  # on the last opening character
    quote: str | None = None
    while i < len(line):
        char = line[i]
        if quote:
            if char == "\\" and quote == '"':
                i += 2
                continue
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "\\":
            i += 2
            continue
        elif char == depth_char:
            depth += 1
        elif char == close_char:
            depth -= 1
            if depth == 0:
                end = i + 1
                if closer == "))":
                    return end + 1 if line[end:end + 1] == ")" else None
                return end
        i += 1
    return None


def _protect_expansions(line: str) -> tuple[str, list[str], int | None]:
    """``$(( a * b ))``, ``$(cmd arg)``, ``${A:-x y}`` and backquotes as one word each: their spaces and
    ``|``/``;`` belong to the value, not to the statement. Returns the line with each expansion replaced
    by a placeholder, the expansions, and where an expansion that never closes starts (``None`` if all do)."""
    if "$" not in line and "`" not in line:
        return line, [], None
    out: list[str] = []
    found: list[str] = []
    i = 0
    quote: str | None = None
    while i < len(line):
        char = line[i]
        # Inside single quotes nothing is special but the closing quote; a backslash keeps the next character.
        opener = None if quote == "'" else next((o for o in _OPENERS if line.startswith(o[0], i)), None)
        if opener is None:
            if char == "'" and quote != '"':
                quote = None if quote == "'" else "'"
            elif char == '"' and quote != "'":
                quote = None if quote == '"' else '"'
            step = 2 if char == "\\" and quote != "'" else 1
            out.append(line[i:i + step])
            i += step
            continue
        end = _expansion_end(line, i, *opener)
        if end is None:
            return line, [], i
        found.append(line[i:end])
        out.append(_PLACEHOLDER.format(len(found) - 1))
        i = end
    return "".join(out), found, None


def _restore(token: str, expansions: list[str]) -> str:
    if "\x00" not in token:
        return token
    return re.sub("\x00(\\d+)\x00", lambda m: expansions[int(m.group(1))], token)


def _tokens(line: str) -> tuple[list[str] | None, int | None]:
    """The words of ``line`` (``None``: a quote never closes) and where an unclosed expansion starts, if any."""
    protected, expansions, unclosed = _protect_expansions(line)
    lexer = shlex.shlex(protected, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        return [_restore(token, expansions) for token in lexer], unclosed
    except ValueError:  # unbalanced quotes: a heredoc body or a multi-line string
        return None, unclosed


def _shell_value(raw: str) -> tuple[str, bool]:
    """A shell word's value; ``${NAME:-default}`` stands for its default, other $... are dynamic."""
    m = _DEFAULT_EXPANSION_RE.match(raw)
    return (m.group(2), "$" in m.group(2)) if m else (raw, "$" in raw or "`" in raw)


def _place(tokens: list[str], physical: list[str], first: int) -> list[tuple[str, int]]:
    """Each token with the physical line it sits on (``physical`` starts at line ``first``).

    shlex drops quotes and joins continuation lines, so each token is looked for (its NAME=
    part, or its first characters) from the line of the token before it on.
    """
    placed: list[tuple[str, int]] = []
    index = 0
    for token in tokens:
        assign = _ASSIGN_RE.match(token)
        needles = [assign.group(1) + "="] if assign else [token, token[:12]]
        for needle in needles:
            word = re.compile(r"(?<![A-Za-z0-9_])" + re.escape(needle) + (r"" if assign else r"(?![A-Za-z0-9_])"))
            found = next((i for i in range(index, len(physical)) if needle and word.search(physical[i])), None)
            if found is not None:
                index = found
                break
        placed.append((token, first + index))
    return placed


#: mpirun/mpiexec -x NAME[=VALUE], docker/podman run -e/--env NAME[=VALUE] (srun/sbatch take --export LIST).
_PASS_FLAGS = frozenset({"-x", "-e", "--env"})
_ASSIGNING_WORDS = frozenset({"export", "declare", "local", "readonly", "env", "typeset"})


class _Branches:
    """Where a script is in its ``if ... elif ... else ... fi`` arms, across lines."""

    def __init__(self) -> None:
        self.stack: list[list[int]] = []
        self.count = 0

    def word(self, token: str) -> None:
        if token == "if":
            self.count += 1
            self.stack.append([self.count, 0])
        elif token in ("elif", "else") and self.stack:
            self.stack[-1][1] += 1
        elif token == "fi" and self.stack:
            self.stack.pop()

    @property
    def current(self) -> tuple[tuple[int, int], ...]:
        return tuple((a, b) for a, b in self.stack)


def _scan(placed: list[tuple[str, int]], label: str, out: list[Setting], *, nccl_conf: bool = False,
          branches: _Branches | None = None) -> None:
    """Settings in one shell statement list (tokens with their lines)."""
    branches = branches or _Branches()

    def add(assignment: re.Match[str], line: int) -> None:
        value, dynamic = _shell_value(assignment.group(2))
        out.append(Setting(assignment.group(1), value, label, line, dynamic, branch=branches.current))

    at_statement_start = True
    command: str | None = None
    i = 0
    while i < len(placed):
        token, line = placed[i]
        if at_statement_start and token in ("if", "elif", "else", "fi"):
            branches.word(token)
        if token in _STATEMENT_BREAKS or token in ("fi", "elif"):
            at_statement_start, command = True, None
            i += 1
            continue
        assign = _ASSIGN_RE.match(token)
        if assign and (at_statement_start or (command in ("echo", "printf") and nccl_conf)):
            add(assign, line)
            i += 1
            continue
        if assign and is_nccl_name(assign.group(1)) and command is not None:
            _note(label, line, f"{assign.group(1)}=... is an argument of '{command}', not an assignment the shell "
                  "makes: not read as a setting", "info")
        if token in _ASSIGNING_WORDS or (at_statement_start and token in ("-x", "-g", "-r")):
            at_statement_start = True
            i += 1
            continue
        if token in _PASS_FLAGS and command is not None and i + 1 < len(placed):
            nxt, nxt_line = placed[i + 1]
            pair = _ASSIGN_RE.match(nxt)
            if pair:
                add(pair, nxt_line)
                i += 2
                continue
            if ENV_NAME.fullmatch(nxt) and is_nccl_name(nxt):
                # passed through from the caller's environment: the name is checked, the value is not known
                out.append(Setting(nxt, "", label, nxt_line, dynamic=True, origin=PASSTHROUGH, branch=branches.current))
                i += 2
                continue
        items: str | None = None
        if token.startswith(("--export=", "--env=")):
            items = token.split("=", 1)[1]
        elif token == "--export" and i + 1 < len(placed):
            items = placed[i + 1][0]
            i += 1
        if items is not None:
            for item in items.split(",") if token.startswith("--export") else [items]:
                pair = _ASSIGN_RE.match(item)
                if pair:
                    add(pair, line)
        if command is None:
            command = token.rsplit("/", 1)[-1]
        at_statement_start = False
        i += 1


def read_shell_text(text: str, label: str, *, first_line: int = 1) -> list[Setting]:
    settings: list[Setting] = []
    physical = text.splitlines()
    nccl_conf = "nccl.conf" in text
    branches = _Branches()
    for start, end, line in _logical_lines(text):
        tokens, unclosed = _tokens(line)
        if tokens is None and _NCCL_ASSIGN_RE.search(line):
            # Skipping it would silently drop a setting the shell itself would choke on.
            raise ParseError(f"shell script {label}", "unclosed quote in a line that sets an NCCL variable",
                             line=first_line + start - 1, text=line)
        if not tokens:
            continue
        if unclosed is not None and _NCCL_ASSIGN_RE.search(line):
            _note(label, first_line + start - 1, f"an expansion opened at {line[unclosed:unclosed + 12]!r} is not "
                  "closed on this line: the NCCL values here are read only up to their first space")
        placed = _place(tokens, physical[start - 1:end], first_line + start - 1)
        _scan(placed, label, settings, nccl_conf=nccl_conf and "nccl.conf" in line, branches=branches)
    return settings


def read_argv(items: list[tuple[str, int]], label: str) -> list[Setting]:
    """An exec-form command (container ``command``/``args``, Dockerfile ``CMD [...]``): one word per item.

    A word with a newline or spaces that holds a script (after ``-c``) is read as a shell script.
    """
    settings: list[Setting] = []
    words: list[tuple[str, int]] = []
    for text, line in items:
        if "\n" in text or " " in text.strip():
            settings.extend(read_shell_text(text, label, first_line=line))
        else:
            words.append((text, line))
    _scan(words, label, settings)
    return sorted(settings, key=lambda s: s.line)


# -- Dockerfiles -------------------------------------------------------------------------------

_INSTRUCTION_RE = re.compile(r"^\s*([A-Za-z]+)\s+(.*)$", re.DOTALL)
_HEREDOC_RE = re.compile(r"<<-?\s*['\"]?([A-Za-z_][A-Za-z0-9_]*)['\"]?")


def read_dockerfile_text(text: str, label: str) -> list[Setting]:
    """``ENV A=1 B=2``, ``ENV A 1``, ``ARG A=1``, and the shell in ``RUN`` (heredocs too), ``CMD``/``ENTRYPOINT``."""
    settings: list[Setting] = []
    physical = text.splitlines()
    # Docker drops comment and empty lines inside a continued instruction: a lone backslash in
    # their place keeps the instruction going and every other line on its own number.
    kept: list[str] = []
    continued = False
    for raw in physical:
        if continued and (not raw.strip() or raw.lstrip().startswith("#")):
            kept.append("\\")
            continue
        kept.append("" if raw.lstrip().startswith("#") else raw)
        continued = raw.endswith("\\")
    skip_until = 0
    for start, end, line in _logical_lines("\n".join(kept)):
        if start <= skip_until:
            continue
        m = _INSTRUCTION_RE.match(line)
        if m is None:
            continue
        instruction, rest = m.group(1).upper(), m.group(2)
        span = kept[start - 1:end]
        if instruction in ("ENV", "ARG"):
            tokens = _tokens(rest)[0] or []
            if instruction == "ENV" and tokens and "=" not in tokens[0]:
                # legacy form: ENV NAME the rest of the line is the value
                name, _, value = rest.strip().partition(" ")
                if ENV_NAME.fullmatch(name):
                    value = _unquote(value.strip())
                    settings.append(Setting(name, value, label, start, "$" in value))
                continue
            for token, token_line in _place(tokens, span, start):
                pair = _ASSIGN_RE.match(token)
                origin = BUILD_ARG if instruction == "ARG" else ""
                if pair:
                    settings.append(Setting(pair.group(1), pair.group(2), label, token_line, "$" in pair.group(2),
                                            origin))
                elif instruction == "ARG" and ENV_NAME.fullmatch(token):
                    settings.append(Setting(token, "", label, token_line, dynamic=True, origin=origin))
        elif instruction == "RUN":
            heredoc = _HEREDOC_RE.search(rest)
            if heredoc is not None:
                marker = heredoc.group(1)
                body_end = next((i for i in range(end, len(physical)) if physical[i].strip() == marker), len(physical))
                body = "\n".join(physical[end:body_end])
                settings.extend(read_shell_text(body, label, first_line=end + 1))
                skip_until = body_end + 1
            settings.extend(read_shell_text(_without_instruction(span), label, first_line=start))
        elif instruction in ("CMD", "ENTRYPOINT"):
            body = rest.strip()
            if body.startswith("["):
                try:
                    argv = json.loads(body)
                except ValueError:
                    argv = None
                if isinstance(argv, list):
                    settings.extend(read_argv([(str(a), start) for a in argv], label))
                    continue
            settings.extend(read_shell_text(_without_instruction(span), label, first_line=start))
    return settings


def _without_instruction(span: list[str]) -> str:
    """The instruction's lines with its keyword blanked (``RUN NCCL_X=1 cmd`` starts a statement)."""
    first = re.sub(r"^(\s*)[A-Za-z]+", lambda m: m.group(1) + " " * (len(m.group(0)) - len(m.group(1))), span[0])
    return "\n".join([first, *span[1:]])


# -- Kubernetes manifests --------------------------------------------------------------------


def read_k8s_text(text: str, label: str) -> list[Setting]:
    try:
        documents = read_yaml(text, lambda loader: [loader.get_node() for _ in iter(loader.check_node, False)])
    except UsageError as exc:
        raise UsageError(exc.message, file=label, line=exc.line) from None
    settings: list[Setting] = []
    for doc in documents:
        if doc is None:
            continue
        skip: set[int] = set()
        if _scalar_of(doc, "kind") == "ConfigMap":
            settings.extend(_configmap_settings(doc, label))
            skip.add(id(_child(doc, "data")))
        _walk_env_lists(doc, label, settings, _document_scope(doc), skip=skip)
    return settings


def _values_setting(key: ScalarNode, value: Node, label: str) -> Setting | None:
    """``NCCL_DEBUG: INFO`` in a mapping (Helm values, a chart's ``env:`` map): a setting of the chart's
    values; ``NCCL_X: null`` removes the chart's default for it."""
    if not ENV_NAME.fullmatch(str(key.value)):
        return None
    line = int(key.start_mark.line) + 1
    if isinstance(value, yaml.ScalarNode):
        if value.tag == "tag:yaml.org,2002:null":
            return Setting(str(key.value), "", label, line, dynamic=True, origin=UNSET, scope=CHART_VALUES)
        text = str(value.value)
        return Setting(str(key.value), text, label, line, "$" in text or "{{" in text, scope=CHART_VALUES)
    _note(label, line, f"{key.value} is given a {'list' if isinstance(value, yaml.SequenceNode) else 'mapping'}, "
          "not a value: not read as a setting")
    return None


def _document_scope(doc: Node) -> str:
    """Settings outside any container (an operator's own env list) belong to their document."""
    return f"{_scalar_of(doc, 'kind') or 'document'} (line {doc.start_mark.line + 1})"


def _container_scope(item: Node) -> str:
    name = _scalar_of(item, "name")
    line = item.start_mark.line + 1
    return f"container '{name}' (line {line})" if name else f"container (line {line})"


def _scalar_of(node: Node, key: str) -> str | None:
    child = _child(node, key)
    return str(child.value) if isinstance(child, yaml.ScalarNode) else None


def _child(node: Node, key: str) -> Node | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    return next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None)


def _configmap_settings(doc: Node, label: str) -> list[Setting]:
    data = _child(doc, "data")
    found: list[Setting] = []
    if not isinstance(data, yaml.MappingNode):
        return found
    for k, v in data.value:
        if not isinstance(k, yaml.ScalarNode) or not isinstance(v, yaml.ScalarNode):
            continue
        if ENV_NAME.fullmatch(str(k.value)) and "\n" not in str(v.value):
            found.append(Setting(str(k.value), str(v.value), label, k.start_mark.line + 1))
        elif "\n" in str(v.value):
            # a whole nccl.conf or script stored under one key: its lines start after the key's line;
            # each key is its own file (mounted or sourced separately), so its own environment
            body = str(v.value)
            reader = read_shell_text if re.search(r"^\s*export\s", body, re.MULTILINE) else _lenient_env
            scope = f"ConfigMap key '{k.value}' (line {k.start_mark.line + 1})"
            found.extend(dataclasses.replace(s, scope=scope)
                         for s in reader(body, label, first_line=_scalar_first_line(v)))
    return found


def _lenient_env(text: str, label: str, *, first_line: int = 1) -> list[Setting]:
    try:
        return read_env_text(text, label, first_line=first_line)
    except ParseError:
        return read_shell_text(text, label, first_line=first_line)


#: Keys whose list items are containers, each with an environment of its own.
_CONTAINER_LISTS = frozenset({"containers", "initContainers", "ephemeralContainers"})


def _walk_env_lists(node: Node, label: str, out: list[Setting], scope: str = "", *,
                    skip: set[int] | None = None) -> None:
    if skip and id(node) in skip:
        return
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            key = str(k.value) if isinstance(k, yaml.ScalarNode) else None
            if key is not None and is_nccl_name(key):
                found = _values_setting(k, v, label)
                if found is not None:
                    out.append(found)
                continue
            if key in ("command", "args") and isinstance(v, yaml.SequenceNode):
                words = [(str(item.value), _scalar_first_line(item)) for item in v.value
                         if isinstance(item, yaml.ScalarNode)]
                out.extend(dataclasses.replace(s, scope=scope) for s in read_argv(words, label))
            elif key == "env" and isinstance(v, yaml.SequenceNode):
                for item in v.value:
                    name = _scalar_of(item, "name")
                    value_node = _child(item, "value")
                    if name is None:
                        continue
                    if isinstance(value_node, yaml.ScalarNode):
                        out.append(Setting(name, str(value_node.value), label, _line_of(item, "name"), scope=scope))
                    elif _child(item, "valueFrom") is not None:
                        out.append(Setting(name, "", label, _line_of(item, "name"), dynamic=True, scope=scope))
            elif key in _CONTAINER_LISTS and isinstance(v, yaml.SequenceNode):
                for item in v.value:
                    _walk_env_lists(item, label, out, _container_scope(item), skip=skip)
            else:
                _walk_env_lists(v, label, out, scope, skip=skip)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _walk_env_lists(item, label, out, scope, skip=skip)


def _scalar_first_line(node: ScalarNode) -> int:
    """The 1-based line of a scalar's first character of content (a block scalar starts below its |)."""
    return int(node.start_mark.line) + (2 if node.style in ("|", ">") else 1)


def _line_of(node: Node, key: str) -> int:
    """The line of ``key`` in a mapping (a key that is itself a list or mapping never equals it)."""
    return next((int(k.start_mark.line) + 1 for k, _ in node.value if k.value == key), int(node.start_mark.line) + 1)


_READERS = {"env": read_env_text, "shell": read_shell_text, "slurm": read_shell_text, "k8s": read_k8s_text,
            "dockerfile": read_dockerfile_text}
