from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "bmc"))
sys.path.append(str(HERE.parent / "quarantine"))  # kube_sim: the small simulated cluster
