"""klog lines: what Kubernetes programs (kubeadm, kubectl, kubelet) log on stderr.

``Lmmdd hh:mm:ss.uuuuuu threadid file:line] message``, L one of I, W, E, F (klog's header,
``k8s.io/klog/v2``). kubeadm writes them among its answer when a probe merges stderr into
stdout (``2>&1``): ``kubeadm config images list`` without ``--kubernetes-version`` logs that it
could not fetch the latest release and falls back to its own version. A reader skips them as
log, not data, and keeps the other lines' numbers.
"""

from __future__ import annotations

import re

_KLOG = re.compile(r"^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d{6}\s+\d+ [^\s:\]]+:\d+\] ")


def is_klog_line(line: str) -> bool:
    return bool(_KLOG.match(line))
