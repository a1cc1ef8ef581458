"""``clusterctl record``: real hosts recorded into mock profiles (command logic, not the simulator).

``run.record`` runs clusterctl's read-only fact commands on each host over the normal transport
and writes a replica inventory with one replay profile per host; ``redact.Redactor`` replaces
identifiers consistently. The replica is replayed by the simulator (``clusterctl.mock``), which
this package does not import.
"""
