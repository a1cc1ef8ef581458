"""Hosts' BMCs over Redfish: the inventory's ``bmc:`` entries, their credentials, power status and actions.

``credentials.py`` reads a BMC's password (a 0600 file or an environment variable) as a ``Secret``;
``redfish.py`` talks to one BMC through the ``sushy`` library; ``power.py`` is ``clusterctl power``
(and the escalation chain's power-cycle step): each power action a ``Change`` through the one gate,
its target the host's BMC (``BmcTarget``).
"""
