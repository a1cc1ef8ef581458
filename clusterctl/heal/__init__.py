"""Self-healing beyond cordon: the escalation chain that follows a quarantine, and the validated return.

``chain.py`` says which steps a host gets (from its findings' actions, overridden by finding code
in the inventory's ``quarantine.heal.chains``); ``history.py`` keeps every step on the
node (annotations), so ``status HOST`` shows it from any machine; ``run.py`` runs the chain on a
quarantined host: each step's changes through the one gate, a bounded wait for the host to come
back, then the release gate (health and a one-host NCCL test) until it passes ``passes`` times in
a row and the host returns by ``release``'s own code; a host that nothing cures ends "needs
hardware" with a report to paste, and a host that keeps coming back (flapping) stays out.
"""
