"""A rich progress bar for fan-outs, shown only on a terminal and only for table output."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from clusterctl.fanout import HostOutcome


class RichProgress:
    def __init__(self, console: Console) -> None:
        self.console = console
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._failed = 0

    def start(self, total: int, label: str) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._failed = 0
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[failed]}"),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
        )
        self._progress.start()
        self._task = self._progress.add_task(label[:40] or "hosts", total=total, failed="")

    def advance(self, outcome: HostOutcome[object]) -> None:
        if self._progress is None or self._task is None:
            return
        if not outcome.ok:
            self._failed += 1
        failed = f"[red]{self._failed} failed[/]" if self._failed else ""
        self._progress.update(self._task, advance=1, failed=failed)

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


#: A command a user copies from a progress row ('clusterctl undo FILE', or any quoted 'clusterctl ...'):
#: wrapped, it stays whole on one line.
_COMMAND = r"'clusterctl [^'\n]*'|clusterctl undo \S+"
_GLUE = "\u00a0"  # not a place textwrap breaks at (it breaks at ASCII whitespace only)


def print_row(console: Console, prefix: str, message: str = "", *, indent: int | None = None) -> None:
    """One live progress row of the engine's phases (bootstrap, upgrade apply): ``prefix`` (the host,
    phase and status columns), then ``message``. On a terminal narrower than the row the message wraps
    with a hanging indent under its column (``indent``: that column, or 2 where that leaves too little
    room for the message or its longest path or command); names, paths and commands stay whole. Off
    a terminal the row stays one line (``terminal_layout.wrap_width``)."""
    import re

    from clusterctl.terminal_layout import MIN_PROSE_WIDTH, hanging, wrap_width

    width = wrap_width(console)
    column = len(prefix) if indent is None else indent
    glued = re.sub(_COMMAND, lambda m: m.group(0).replace(" ", _GLUE), message.replace(_GLUE, " "))
    longest = max((len(word) for word in glued.split()), default=0)
    if width - column < max(MIN_PROSE_WIDTH, longest):
        column = 2  # a narrow message column, or a path or command wider than it: indent less
    text = hanging(glued, width, column, first_indent=prefix).replace(_GLUE, " ")
    console.print(text, markup=False, highlight=False, soft_wrap=True)
