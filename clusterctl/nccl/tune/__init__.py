"""``clusterctl tune-nccl``: NCCL settings derived from survey/bench facts, a measured sweep, rendering.

- ``inputs``: the per-host facts tuning needs, built from a live survey or a saved one.
- ``derive``: settings a careful engineer would set, each with a one-line reason.
- ``sweep``: a budget-aware measured search over NCCL knobs against the defaults.
- ``render``: Jinja templates -> nccl.conf, profile.d, ConfigMap, Slurm exports, tuner CSV.
- ``push``: write /etc/nccl.conf to hosts (or show the diff).
"""
