"""The node health agent: ``clusterctl health``'s level-0 checks run on the node itself, on a timer.

Bootstrap's ``node-agent`` phase installs it on every host as a systemd timer
(``clusterctl-node-agent.timer``) running one bundled Python file (``bundle.py``); ``clusterctl
reset`` takes it back. Each run reads the host with the same probes and judges it with the same
checks as ``clusterctl health`` (``clusterctl.health``), locally (no SSH, no control machine), and
publishes what it found the two ways a fleet already reads:

* NodeConditions on its own Node (``conditions.py``: node-problem-detector's conventions, ``True``
  while a problem is present, ``False`` once it is gone), written with the node's own
  ServiceAccount, allowed only ``get`` and ``patch`` on its own ``nodes/status``;
* Prometheus metrics in node-exporter's textfile collector folder (``metrics.py``, written with
  ``prometheus-client``): one gauge per finding (code, GPU, severity), the last run's time and
  duration, and whether the conditions could be published.

``run.run_once`` is the logic; ``main.main`` is the command line the timer runs (also the Slurm
health check: ``main.py``).
"""
