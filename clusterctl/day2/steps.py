"""One step of a day-2 action (upgrade, remove-node): what it does, where, the changes it passes
through the gate, and how it went. Shown as a plan first, then filled in as the action runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clusterctl.changes import Change
from clusterctl.secret import mask_text


@dataclass
class Step:
    name: str
    #: The host the step's changes run on (the node itself, or the first control plane).
    runs_on: str
    summary: str
    changes: list[Change] = field(default_factory=list)
    #: ``planned``, ``running``, ``done``, ``failed``, ``interrupted``, ``not started``.
    status: str = "planned"
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"step": self.name, "runs_on": self.runs_on, "summary": mask_text(self.summary),
                                "status": self.status, "changes": [c.to_json() for c in self.changes]}
        if self.message:
            data["message"] = mask_text(self.message)
        return data
