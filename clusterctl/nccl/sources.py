"""Reading NCCL settings out of the files people keep them in.

Formats: ``env`` (KEY=VALUE, also /etc/nccl.conf and ~/.nccl.conf), ``shell`` (export lines, plain
assignments, ``VAR=1 cmd``, ``mpirun -x K=V``), ``slurm`` (a shell script; #SBATCH lines are
comments, ``srun --export=ALL,K=V`` is read too) and ``k8s`` (container ``env:`` lists in any
manifest kind, ConfigMap ``data:``, multi-document YAML).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from clusterctl.errors import ParseError, UsageError

FORMATS: tuple[str, ...] = ("env", "shell", "slurm", "k8s")
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ASSIGN_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
_DEFAULT_EXPANSION_RE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*):?-([^}]*)\}$")
_STATEMENT_BREAKS = frozenset({";", "&&", "||", "|", "&", "then", "do", "else", "{", "}", "(", ")", "if", "while"})


@dataclass(frozen=True)
class Setting:
    """One ``NAME=value`` found in a file. ``dynamic`` when the value is computed at run time ($VAR)."""

    name: str
    value: str
    file: str
    line: int
    dynamic: bool = False


#: NCCL's own, PyTorch's, aws-ofi-nccl's and the libfabric settings that plugin documents.
LINTED_PREFIXES: tuple[str, ...] = ("NCCL_", "TORCH_NCCL_", "OFI_NCCL_", "FI_")


def is_nccl_name(name: str) -> bool:
    """Names the linter looks at: NCCL_*, PyTorch's TORCH_NCCL_*, aws-ofi-nccl's OFI_NCCL_* and FI_*."""
    return name.startswith(LINTED_PREFIXES)


def read_settings(source: str | Path, format: str | None = None, *, name: str | None = None) -> list[Setting]:
    """The NCCL settings in a file (a Path, or a str naming an existing file) or in a text.

    ``format`` is one of FORMATS, or None to detect it from the name and content. ``name`` is what
    findings call the source when it is a text (default ``<text>``).
    """
    if isinstance(source, Path) or ("\n" not in source and Path(source).is_file()):
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read {path}: {exc}") from None
        label = name or str(path)
    else:
        text = str(source)
        label = name or "<text>"
    fmt = format or detect_format(label, text)
    if fmt not in FORMATS:
        raise UsageError(f"unknown settings format {fmt!r}", hint=f"Use one of: {', '.join(FORMATS)}.")
    settings = _READERS[fmt](text, label)
    return [s for s in settings if is_nccl_name(s.name)]


def detect_format(label: str, text: str) -> str:
    """Guess the format from the file name, then from the content."""
    lowered = label.lower()
    if lowered.endswith((".yaml", ".yml")):
        return "k8s"
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
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def read_env_text(text: str, label: str, *, first_line: int = 1) -> list[Setting]:
    """KEY=VALUE lines, like /etc/nccl.conf; '#' comments and blank lines skipped, ``export`` tolerated."""
    settings: list[Setting] = []
    for offset, raw in enumerate(text.splitlines()):
        line_no = first_line + offset
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export "):].strip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not _NAME_RE.match(key):
            raise ParseError(f"settings file {label}", "expected NAME=VALUE", line=line_no, text=raw)
        value = value.strip()
        if value[:1] not in "'\"" and " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        settings.append(Setting(key, _unquote(value), label, line_no))
    return settings


# -- shell scripts ---------------------------------------------------------------------------


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Lines with backslash continuations joined, each with the number of its first physical line."""
    joined: list[tuple[int, str]] = []
    buffer: list[str] = []
    start = 1
    for number, raw in enumerate(text.splitlines(), start=1):
        if not buffer:
            start = number
        if raw.endswith("\\") and not raw.endswith("\\\\"):
            buffer.append(raw[:-1])
            continue
        buffer.append(raw)
        joined.append((start, " ".join(buffer)))
        buffer = []
    if buffer:
        joined.append((start, " ".join(buffer)))
    return joined


def _tokens(line: str) -> list[str] | None:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes: a heredoc body or a multi-line string
        return None


def _shell_value(raw: str) -> tuple[str, bool]:
    """A shell word's value; ``${NAME:-default}`` stands for its default, other $... are dynamic."""
    m = _DEFAULT_EXPANSION_RE.match(raw)
    if m:
        return m.group(2), "$" in m.group(2)
    return raw, "$" in raw or "`" in raw


def read_shell_text(text: str, label: str, *, first_line: int = 1) -> list[Setting]:
    settings: list[Setting] = []
    for start, line in _logical_lines(text):
        line_no = first_line + start - 1
        tokens = _tokens(line)
        if not tokens:
            continue
        at_statement_start = True
        i = 0
        while i < len(tokens):
            token = tokens[i]
            if token in _STATEMENT_BREAKS:
                at_statement_start = True
                i += 1
                continue
            assign = _ASSIGN_RE.match(token)
            if token in ("export", "declare", "local", "readonly", "env") or token in ("-x", "-g", "-r"):
                if token == "-x" and i + 1 < len(tokens) and not at_statement_start:
                    # mpirun -x NAME=VALUE passes the variable to the ranks
                    nxt = _ASSIGN_RE.match(tokens[i + 1])
                    if nxt:
                        value, dynamic = _shell_value(nxt.group(2))
                        settings.append(Setting(nxt.group(1), value, label, line_no, dynamic))
                        i += 2
                        continue
                at_statement_start = token in ("export", "declare", "local", "readonly", "env") or at_statement_start
                i += 1
                continue
            if assign and at_statement_start:
                value, dynamic = _shell_value(assign.group(2))
                settings.append(Setting(assign.group(1), value, label, line_no, dynamic))
                i += 1
                continue
            if token.startswith("--export="):
                for item in token[len("--export="):].split(","):
                    pair = _ASSIGN_RE.match(item)
                    if pair:
                        value, dynamic = _shell_value(pair.group(2))
                        settings.append(Setting(pair.group(1), value, label, line_no, dynamic))
            at_statement_start = False
            i += 1
    return settings


# -- Kubernetes manifests --------------------------------------------------------------------


def read_k8s_text(text: str, label: str) -> list[Setting]:
    import yaml

    try:
        documents = list(yaml.compose_all(text))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise UsageError(f"not valid YAML: {getattr(exc, 'problem', exc)}", file=label, line=line) from None
    settings: list[Setting] = []
    for doc in documents:
        if doc is None:
            continue
        if _scalar_of(doc, "kind") == "ConfigMap":
            settings.extend(_configmap_settings(doc, label))
        _walk_env_lists(doc, label, settings)
    return settings


def _scalar_of(node: object, key: str) -> str | None:
    import yaml

    if not isinstance(node, yaml.MappingNode):
        return None
    for k, v in node.value:
        if isinstance(k, yaml.ScalarNode) and k.value == key and isinstance(v, yaml.ScalarNode):
            return str(v.value)
    return None


def _child(node: object, key: str) -> object | None:
    import yaml

    if not isinstance(node, yaml.MappingNode):
        return None
    for k, v in node.value:
        if isinstance(k, yaml.ScalarNode) and k.value == key:
            return v
    return None


def _configmap_settings(doc: object, label: str) -> list[Setting]:
    import yaml

    data = _child(doc, "data")
    found: list[Setting] = []
    if not isinstance(data, yaml.MappingNode):
        return found
    for k, v in data.value:
        if not isinstance(k, yaml.ScalarNode) or not isinstance(v, yaml.ScalarNode):
            continue
        if _NAME_RE.match(str(k.value)) and "\n" not in str(v.value):
            found.append(Setting(str(k.value), str(v.value), label, k.start_mark.line + 1))
        elif "\n" in str(v.value):
            # a whole nccl.conf or script stored under one key: its lines start after the key's line
            body = str(v.value)
            first = v.start_mark.line + 2 if v.style in ("|", ">") else v.start_mark.line + 1
            reader = read_shell_text if re.search(r"^\s*export\s", body, re.MULTILINE) else _lenient_env
            found.extend(reader(body, label, first_line=first))
    return found


def _lenient_env(text: str, label: str, *, first_line: int = 1) -> list[Setting]:
    try:
        return read_env_text(text, label, first_line=first_line)
    except ParseError:
        return read_shell_text(text, label, first_line=first_line)


def _walk_env_lists(node: object, label: str, out: list[Setting]) -> None:
    import yaml

    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == "env" and isinstance(v, yaml.SequenceNode):
                for item in v.value:
                    name = _scalar_of(item, "name")
                    value_node = _child(item, "value")
                    if name is None:
                        continue
                    if isinstance(value_node, yaml.ScalarNode):
                        out.append(Setting(name, str(value_node.value), label, _line_of(item, "name")))
                    elif _child(item, "valueFrom") is not None:
                        out.append(Setting(name, "", label, _line_of(item, "name"), dynamic=True))
            else:
                _walk_env_lists(v, label, out)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _walk_env_lists(item, label, out)


def _line_of(node: object, key: str) -> int:
    import yaml

    assert isinstance(node, yaml.MappingNode)
    for k, _ in node.value:
        if isinstance(k, yaml.ScalarNode) and k.value == key:
            return int(k.start_mark.line) + 1
    return int(node.start_mark.line) + 1


def _read_env(text: str, label: str) -> list[Setting]:
    return read_env_text(text, label)


def _read_shell(text: str, label: str) -> list[Setting]:
    return read_shell_text(text, label)


_READERS = {"env": _read_env, "shell": _read_shell, "slurm": _read_shell, "k8s": read_k8s_text}
