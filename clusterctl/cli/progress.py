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
